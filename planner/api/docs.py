"""Swagger UI at `/docs`, from vendored files under `static/swagger/` (no CDN, no inline script).

FastAPI's built-in page loads from a CDN and runs an inline script, which the CSP
(`default-src 'self'`) forbids; this page only links same-origin files.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(include_in_schema=False)

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kvplan API</title>
<link rel="icon" href="/static/swagger/favicon-32x32.png">
<link rel="stylesheet" href="/static/swagger/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/static/swagger/swagger-ui-bundle.js"></script>
<script src="/static/swagger/init.js"></script>
</body>
</html>
"""


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    return HTMLResponse(_PAGE)
