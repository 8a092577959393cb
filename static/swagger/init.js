// kvplan: starts Swagger UI on /docs from same-origin files only (CSP default-src 'self';
// no inline script). Vendored from the npm package swagger-ui-dist; see VENDORED.txt.
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "/api/v1/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
