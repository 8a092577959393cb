// kvplan page: optional live update. The page works without this file; with it, changing a
// field re-renders the answer without a reload. Same-origin fetch only; no inline code (CSP).
(function () {
  "use strict";

  var form = document.getElementById("plan-form");
  if (!form || !window.fetch || !window.DOMParser || !window.URLSearchParams) {
    return;
  }
  var DELAY_MS = 400;
  var timer = null;
  var sequence = 0;
  var controller = null;

  function fieldsOf(formElement) {
    var params = new URLSearchParams();
    var data = new FormData(formElement);
    data.forEach(function (value, name) {
      // `last` is for full page loads; here the page itself keeps the answer it shows.
      if (name === "last") {
        return;
      }
      if (typeof value === "string" && value.trim() !== "") {
        params.append(name, name === "model_config" ? value : value.trim());
      }
    });
    return params;
  }

  function swap(doc, id) {
    var fresh = doc.getElementById(id);
    var old = document.getElementById(id);
    if (fresh && old) {
      old.replaceWith(document.importNode(fresh, true));
    }
  }

  function swapChildren(doc, id) {
    // Keeps the element itself, so a live region stays the same node and is announced.
    var fresh = doc.getElementById(id);
    var old = document.getElementById(id);
    if (fresh && old) {
      old.replaceChildren.apply(
        old,
        Array.prototype.map.call(fresh.childNodes, function (node) {
          return document.importNode(node, true);
        })
      );
      old.hidden = fresh.hidden;
    }
  }

  function applyErrors(doc) {
    // Errors and their aria state; the inputs themselves keep what the user is typing.
    var slots = document.querySelectorAll("[data-error-for]");
    Array.prototype.forEach.call(slots, function (slot) {
      var name = slot.getAttribute("data-error-for");
      var fresh = doc.querySelector('[data-error-for="' + name + '"]');
      var field = document.querySelector('[data-field="' + name + '"]');
      var control = document.getElementById("f-" + name);
      var invalid = !!(fresh && !fresh.hasAttribute("hidden"));
      slot.replaceChildren();
      if (fresh) {
        Array.prototype.forEach.call(fresh.childNodes, function (node) {
          slot.appendChild(document.importNode(node, true));
        });
      }
      slot.hidden = !invalid;
      if (field) {
        field.classList.toggle("has-error", invalid);
      }
      if (control) {
        if (invalid) {
          control.setAttribute("aria-invalid", "true");
        } else {
          control.removeAttribute("aria-invalid");
        }
      }
    });
  }

  function swapOptions(doc, id) {
    // The dtype list depends on the engine: take the fresh options, keep the user's choice.
    var fresh = doc.getElementById(id);
    var old = document.getElementById(id);
    if (!fresh || !old || old === document.activeElement) {
      return;
    }
    var value = old.value;
    old.replaceChildren.apply(
      old,
      Array.prototype.map.call(fresh.options, function (node) {
        return document.importNode(node, true);
      })
    );
    old.value = value;
  }

  function markStale(stale) {
    var note = document.getElementById("stale-note");
    var hero = document.getElementById("answer-hero");
    var answer = document.getElementById("answer");
    if (note) {
      note.hidden = !stale;
    }
    if (hero) {
      hero.classList.toggle("is-stale", stale);
    }
    if (answer) {
      answer.classList.toggle("is-stale", stale);
    }
  }

  function peek() {
    // On a narrow screen the answer sits above the form: mirror its headline at the bottom
    // while the field being typed in is in view and the answer is not.
    var box = document.getElementById("live-peek");
    var hero = document.getElementById("answer-hero");
    var sentence = hero && hero.querySelector(".sentence");
    if (!box || !hero || !sentence || !window.matchMedia) {
      return;
    }
    var narrow = window.matchMedia("(max-width: 899px)").matches;
    var above = hero.getBoundingClientRect().bottom < 0;
    var link = box.querySelector("a");
    if (link) {
      link.textContent = sentence.textContent.replace(/\s+/g, " ").trim();
    }
    box.hidden = !(narrow && above && form.contains(document.activeElement));
  }

  function update() {
    var params = fieldsOf(form);
    if (!params.has("model") && !params.has("model_config")) {
      return;
    }
    var mine = ++sequence;
    if (controller) {
      controller.abort();
    }
    controller = window.AbortController ? new AbortController() : null;
    var withConfig = params.has("model_config");
    var url = withConfig ? "/" : "/?" + params.toString();
    var init = {
      method: withConfig ? "POST" : "GET",
      credentials: "same-origin",
      headers: { Accept: "text/html" },
    };
    if (withConfig) {
      init.body = params;
    }
    if (controller) {
      init.signal = controller.signal;
    }
    document.body.classList.add("is-updating");
    fetch(url, init)
      .then(function (response) {
        return response.text();
      })
      .then(function (html) {
        if (mine !== sequence) {
          return;
        }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("answer");
        var shown = document.getElementById("answer");
        var freshState = fresh ? fresh.getAttribute("data-answer") : "no";
        var shownState = shown ? shown.getAttribute("data-answer") : "no";
        var keep = freshState !== "yes" && (shownState === "yes" || shownState === "stale");
        swapChildren(doc, "error-summary");
        applyErrors(doc);
        swapOptions(doc, "f-kv_cache_dtype");
        swapChildren(doc, "release-list");
        markStale(keep || freshState === "stale");
        if (keep) {
          // One bad keystroke keeps the last good answer, marked stale, and the URL that gave it.
          return;
        }
        var last = doc.getElementById("f-last");
        if (last && form.elements.namedItem("last")) {
          // The answer now shown: Enter or the language switch with a mistake keeps it.
          form.elements.namedItem("last").value = last.value;
        }
        swapChildren(doc, "answer-hero");
        swap(doc, "answer");
        document.title = doc.title;
        peek();
        if (!withConfig && window.history && window.history.replaceState) {
          // The answer's own share link is the tidy URL; with errors, the URL asked.
          var share = doc.getElementById("share-link");
          window.history.replaceState(null, "", share ? share.getAttribute("href") : url);
        }
      })
      .catch(function () {
        // Offline or aborted: the submit button still works.
      })
      .then(function () {
        if (mine === sequence) {
          document.body.classList.remove("is-updating");
        }
      });
  }

  function schedule() {
    window.clearTimeout(timer);
    timer = window.setTimeout(update, DELAY_MS);
  }

  window.addEventListener("scroll", function () {
    var box = document.getElementById("live-peek");
    if (box && !box.hidden) {
      peek();
    }
  }, { passive: true });
  form.addEventListener("focusout", function () {
    window.setTimeout(peek, 0);
  });
  function showEngineFields() {
    // SGLang's own flags show when SGLang is chosen (or while one of them holds a value).
    var engine = document.getElementById("f-engine");
    var groups = document.querySelectorAll("fieldset[data-engine]");
    Array.prototype.forEach.call(groups, function (group) {
      var used = Array.prototype.some.call(
        group.querySelectorAll("input, select"),
        function (control) {
          return control.value !== "";
        }
      );
      group.hidden = !(engine && engine.value === group.getAttribute("data-engine")) && !used;
    });
  }

  form.addEventListener("change", function (event) {
    if (event.target && event.target.id === "f-engine") {
      showEngineFields();
    }
    schedule();
  });
  form.addEventListener("input", function (event) {
    // The model picker waits for "change": half a name is not worth an error message.
    var target = event.target;
    if (target && target.tagName === "INPUT" && target.id !== "f-model") {
      schedule();
    }
  });
})();
