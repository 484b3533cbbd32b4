"""What keeps a foreign page out: the security headers of every response, the ``Host`` check
(DNS rebinding), and the checks of a write (same origin, the server's token).

Every request's ``Host`` header must be one of the allowed names (a foreign page that resolves
its own name to this server is refused, 400). A write must also come from the page itself: a
same-origin ``Origin`` header or ``Sec-Fetch-Site: same-origin`` (a request with neither, or a
cross-site one, is refused, 403), and it must carry the server's token (``fork_token`` in the
form body, a random value made when the app is created and written into the session page).
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from urllib.parse import parse_qs, urlsplit

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .context import allow_writes, fork_token

__all__ = [
    "CSP",
    "FORK_TOKEN_FIELD",
    "LOCAL_HOSTS",
    "HostCheck",
    "SecurityHeaders",
    "check_write",
    "host_name",
    "same_origin",
]

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
"""The ``Host`` names a viewer on the loopback interface accepts."""

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""Nothing from the network, no inline script: even a missed escape could not run code."""

FORK_TOKEN_FIELD = "fork_token"
"""The form field a fork request carries the server's token in."""

MAX_FORM_BYTES = 4096
"""A write's form body longer than this is refused (it only holds the token)."""


class SecurityHeaders:
    """Adds the Content-Security-Policy, ``nosniff`` and ``no-referrer`` to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port, lower case, without a final dot:
    ``[::1]:8765`` → ``::1``, ``Example.COM.:80`` → ``example.com``."""
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


class HostCheck:
    """Refuses (400) a request whose ``Host`` header is not one of ``names`` (DNS
    rebinding). Names are compared as `host_name` gives them; IPv6 with or without
    brackets."""

    def __init__(self, app: ASGIApp, names: Sequence[str]) -> None:
        self.app = app
        self.names = frozenset(host_name(n) for n in names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope.get("headers") or [])
            host = headers.get(b"host", b"").decode("latin-1")
            if host_name(host) not in self.names:
                response = PlainTextResponse("Invalid host header", status_code=400)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def same_origin(request: Request) -> bool:
    """Whether a request comes from this server's own page: ``Sec-Fetch-Site: same-origin``
    (browsers send it), else an ``Origin`` naming this server's scheme and host."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return False
    parts = urlsplit(origin)
    return parts.scheme == request.url.scheme and parts.netloc == request.headers.get("host")


async def _form_token(request: Request) -> str | None:
    """The ``fork_token`` of a url-encoded form body (None when absent or malformed)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    try:
        values = parse_qs(body.decode("ascii"), strict_parsing=False).get(FORK_TOKEN_FIELD)
    except (UnicodeDecodeError, ValueError):
        return None
    return values[0] if values and len(values) == 1 else None


async def check_write(request: Request) -> None:
    """Refuses (403) a write unless the server allows writes, the request comes from its own
    page and carries its token (an app without a token accepts none)."""
    if not allow_writes(request):
        raise HTTPException(
            403, "this server is read-only: start it with --allow-writes to fork sessions"
        )
    if not same_origin(request):
        raise HTTPException(403, "a fork must come from this server's own page")
    expected = fork_token(request)
    token = await _form_token(request)
    if not expected or token is None or not hmac.compare_digest(token.encode(), expected.encode()):
        raise HTTPException(403, "a fork needs this server's token: reload the page")
