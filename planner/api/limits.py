"""Request bodies over the limit get 413 problem+json, whether announced or streamed.

uvicorn has no body limit. A declared `Content-Length` over the limit is refused before the app
runs; a chunked or lying body is counted as it streams, and the read that crosses the limit
raises `BodyTooLarge`, answered here with 413 if the response has not started.
"""

from __future__ import annotations

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from planner.api.problems import make_problem, problem_response


class BodyTooLarge(Exception):
    """The request body crossed the limit while streaming in."""


def too_large_response(limit_bytes: int) -> Response:
    return problem_response(
        make_problem(
            413,
            f"request body exceeds {limit_bytes} bytes; send a smaller body "
            "(the limit is KVPLAN_MAX_BODY_BYTES)",
            slug="body-too-large",
            title="Request body too large",
        ),
        headers={"Connection": "close"},
    )


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > limit:
                    await too_large_response(limit)(scope, receive, send)
                    return

        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if started:
                raise
            await too_large_response(limit)(scope, receive, send)
