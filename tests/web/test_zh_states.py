"""The whole page in Chinese: every rendered state (an answer per engine and model kind, each
kind of error, a refusal, the explain and reconcile pages) is scanned for English sentences.

A sentence is three or more plain English words in a row (identifiers with `_`, digits, dots or
slashes, units and ids are not words), in the visible text or in a tooltip, label or
placeholder. Left out: what the user typed (a textarea), and content marked as an engine's own
words (class `engine-words`), where the English is the point: a log's own line and a quoted
engine message, searchable as printed."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser

import pytest
from starlette.testclient import TestClient

from tests.core.test_logparse import load_fixtures

ZH = {"accept-language": "zh-CN,zh;q=0.9"}
_WORD = r"(?<![\w./@#=:-])[A-Za-z][a-z]+(?![\w./@#=-])"
# Three words in a row, joined by spaces or light punctuation ("a, b and c").
ENGLISH = re.compile(rf"{_WORD}(?:[ ,;:()'’\"]+{_WORD}){{2,}}")
ATTRIBUTES = ("title", "aria-label", "placeholder", "alt")
# An engine's own words, quoted as such (searchable as printed): not prose to translate.
QUOTE_CLASSES = ("engine-words",)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self._skip: list[str] = []
        self._stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag in ("input", "meta", "link", "br", "img", "hr", "rect", "line", "circle", "path"):
            self._attrs(found)
            return
        quoted = any(c in (found.get("class") or "").split() for c in QUOTE_CLASSES)
        self._stack.append(tag)
        # A textarea holds what the user typed or pasted (a log): theirs, not the page's.
        self._skip.append("skip" if tag in ("script", "style", "textarea") or quoted else "")
        self._attrs(found)

    def _attrs(self, found: dict[str, str | None]) -> None:
        self.chunks += [v for k, v in found.items() if k in ATTRIBUTES and v]

    def handle_endtag(self, tag: str) -> None:
        if tag in self._stack:
            while self._stack:
                self._skip.pop()
                if self._stack.pop() == tag:
                    break

    def handle_data(self, data: str) -> None:
        if not any(self._skip):
            self.chunks.append(data)


# A log line quoted by name ('Load weight begin … avail mem') is the engine's words too.
QUOTED = re.compile(r"'[^'\n]{1,80}'")


def english_sentences(page: str) -> list[str]:
    parser = _Text()
    parser.feed(page)
    lines = [QUOTED.sub(" ", re.sub(r"\s+", " ", html.unescape(c))).strip() for c in parser.chunks]
    return [m.group(0) for line in lines for m in ENGLISH.finditer(line)]


BASE = "/?context_tokens=8192&gpu=H100-SXM-80GB"
CONFIG = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "hidden_size": 256, "torch_dtype": "bfloat16"}  # fmt: skip
# Pasted configs (the form posts them).
POSTED: dict[str, dict[str, str]] = {
    "error, config without heads": {"model_config": json.dumps({"num_hidden_layers": 32})},
    "error, config dtype": {"model_config": json.dumps({**CONFIG, "torch_dtype": "float8"})},
    "error, config GQA": {"model_config": json.dumps({**CONFIG, "num_key_value_heads": 3})},
    "answer, pasted config": {"model_config": json.dumps(CONFIG)},
}
STATES: dict[str, str] = {
    "answer, budget": "/?model=meta-llama/Llama-3.1-8B&kv_cache_dtype=bf16&context_tokens=8192"
    "&kv_budget_gib=48",
    "answer, GPU": BASE + "&model=meta-llama/Llama-3.1-8B",
    "answer, MLA": "/?model=deepseek-ai/DeepSeek-V3&context_tokens=8192&gpu=H200-141GB"
    "&tensor_parallel_size=8",
    "answer, sliding window": BASE + "&model=google/gemma-2-9b",
    "answer, catalog remark": BASE + "&model=mistralai/Mixtral-8x7B-v0.1&tensor_parallel_size=2",
    "answer, SGLang": BASE + "&model=meta-llama/Llama-3.1-8B&engine=sglang",
    "answer, TensorRT-LLM": BASE + "&model=meta-llama/Llama-3.1-8B&engine=trtllm",
    "answer, transformers": BASE + "&model=meta-llama/Llama-3.1-8B&engine=transformers",
    "refusal, no KV memory": BASE + "&model=mistralai/Mixtral-8x7B-v0.1",
    "error, tensor parallel": BASE + "&model=meta-llama/Llama-3.1-8B&tensor_parallel_size=3",
    "error, unknown model": BASE + "&model=meta-llama/Llama-3.1-8X",
    "error, context": BASE + "&model=meta-llama/Llama-3.1-8B&context_tokens=32kk",
    "error, KV dtype": BASE + "&model=meta-llama/Llama-3.1-8B&engine=sglang&kv_cache_dtype=int4",
    "answer, hybrid state layers": "/?context_tokens=8192&gpu=H200-141GB"
    "&model=Qwen/Qwen3-Next-80B-A3B-Instruct&tensor_parallel_size=2",
    "error, unknown GPU": "/?context_tokens=8192&gpu=H900&model=meta-llama/Llama-3.1-8B",
    "error, budget above the GPU": BASE + "&model=meta-llama/Llama-3.1-8B&kv_budget_gib=4000",
    "error, pipeline stages": BASE + "&model=meta-llama/Llama-3.1-8B&pipeline_parallel_size=64",
    "explain": "/explain",
}


@pytest.mark.parametrize("state", sorted(STATES))
def test_no_english_sentence_on_the_chinese_page(client: TestClient, state: str) -> None:
    response = client.get(STATES[state], headers=ZH)
    assert response.status_code == 200
    assert '<html lang="zh-Hans">' in response.text
    assert english_sentences(response.text) == []


def test_a_refusal_says_why_in_chinese_and_quotes_the_engine(client: TestClient) -> None:
    # Mixtral-8x7B's 86.99 GiB of weights leave vLLM no KV memory on one 80 GB H100.
    response = client.get(STATES["refusal, no KV memory"], headers=ZH)
    item = re.search(r'<li data-code="engine.refuses_to_start".*?</li>', response.text, re.S)
    assert item is not None
    assert "vLLM 用这些设置无法启动：没有显存留给 KV cache。" in item.group(0)
    assert '<q class="engine-words" lang="en">No available memory for the cache blocks.' in (
        item.group(0)
    )


def test_formula_remarks_in_chinese(client: TestClient) -> None:
    mla = client.get(STATES["answer, MLA"], headers=ZH).text
    # DeepSeek-V3: 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 B = 70,272 B.
    assert "<code>61 × (512 + 64) × 2 B = 70,272 B</code> MLA：每层每个 token 一个潜变量" in mla
    hybrid = client.get(STATES["answer, hybrid state layers"], headers=ZH).text
    assert "状态层每个请求另占" in hybrid and "state layers hold" not in hybrid


@pytest.mark.parametrize("state", sorted(POSTED))
def test_no_english_sentence_on_the_chinese_page_for_a_pasted_config(
    client: TestClient, state: str
) -> None:
    data = {"context_tokens": "8192", "gpu": "H100-SXM-80GB", **POSTED[state]}
    response = client.post("/", data=data, headers=ZH)
    assert response.status_code == 200
    assert english_sentences(response.text) == []


def test_the_scan_finds_english() -> None:
    # The check itself: a sentence in a paragraph or a tooltip is found; ids, flags, units and
    # an engine's quoted words are not.
    page = (
        "<p>这是 vLLM 0.33 --max-num-seqs meta-llama/Llama-3.1-8B 48 GiB int8_per_token_head</p>"
        '<p><q class="engine-words">No available memory for the cache blocks</q></p>'
    )
    assert english_sentences(page) == []
    assert english_sentences("<p>中文 and then some English words</p>") == [
        "and then some English words"
    ]
    assert english_sentences('<span title="the default of vLLM">x</span>') == ["the default of"]
    assert english_sentences("<p>需要 'Load weight begin … avail mem' 行</p>") == []
    assert english_sentences("<textarea>the user pasted this log</textarea>") == []
    assert english_sentences('<span title="one two three four">x</span>') == ["one two three four"]


FIXTURES = {f["id"]: f for f in load_fixtures()}


@pytest.mark.parametrize("with_model", [False, True])
@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_reconcile_page_in_chinese(client: TestClient, fixture: str, with_model: bool) -> None:
    # Every real start-up log of the suite, alone (figures not recomputable, each with its
    # reason) and with a model and GPU (checks, variants, the reserves' derivation).
    data = {"log": "\n".join(FIXTURES[fixture]["log_lines"])}
    if with_model:
        data |= {
            "model": "meta-llama/Llama-3.1-8B",
            "gpu": "H100-SXM-80GB",
            "memory_fraction": "0.9",
        }
    response = client.post("/reconcile", data=data, headers=ZH)
    assert response.status_code == 200
    assert '<html lang="zh-Hans">' in response.text
    assert english_sentences(response.text) == []
