"""Security headers on every response, as a pure ASGI middleware (the app applies them in its
observation layer, `planner.api.observe`, one `send` wrapper for both).

Pure ASGI rather than `BaseHTTPMiddleware`, which breaks contextvars and buffers streaming
responses. A header the route already set (e.g. a page with its own CSP) is left alone.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# No inline script or style anywhere (Swagger UI included: its initializer is a static file);
# `data:` images because Swagger's CSS embeds its icons that way.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "strict-origin-when-cross-origin",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}

ENCODED_HEADERS: tuple[tuple[bytes, bytes], ...] = tuple(
    (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in SECURITY_HEADERS.items()
)


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers.extend(item for item in ENCODED_HEADERS if item[0] not in present)
                # uvicorn runs with server_header=False; drop one an app layer might add.
                headers = [(n, v) for n, v in headers if n.lower() != b"server"]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
