"""``todo-sessions serve``: run the web application with uvicorn."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Sequence

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..store.store import SessionStore
from .app import create_app
from .bounds import MESSAGE_LIMIT
from .security import LOCAL_HOSTS

__all__ = ["HEADER_TIMEOUT_SECONDS", "HostError", "allowed_hosts", "listen", "serve"]

HEADER_TIMEOUT_SECONDS = 10.0
"""How long a connection may take to send a request's headers before it is closed: half-sent
requests do not pile up (uvicorn has no such timeout of its own)."""


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol with a header timeout: a connection that has not sent a whole
    request head `header_timeout` seconds after it opened (or after its previous response
    ended) is closed. A request being answered (a live event stream) is never cut."""

    header_timeout: float = HEADER_TIMEOUT_SECONDS
    _header_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _answering(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _headers_late(self) -> None:
        self._header_timer = None
        if not self._answering() and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._answering():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self._answering():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def header_timeout_protocol(seconds: float) -> type[asyncio.Protocol]:
    """`HeaderTimeoutProtocol` closing a connection whose request head has not come whole
    ``seconds`` after it opened (or after its previous response ended)."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout": seconds})


_EVERY_INTERFACE = ("0.0.0.0", "::", "", "*", "[::]")


class HostError(ValueError):
    """``serve`` on every interface without a name to accept in the ``Host`` header."""


def allowed_hosts(host: str, allow: Sequence[str] = ()) -> list[str]:
    """The ``Host`` names to accept: the loopback names, ``host`` itself (unless it is a
    wildcard) and the names in ``allow`` (``--allow-host``). A wildcard ``host`` (``0.0.0.0``,
    ``::``) without ``allow`` raises `HostError` saying what to pass: the check is never
    switched off (DNS rebinding)."""
    names = list(LOCAL_HOSTS)
    if host.strip() in _EVERY_INTERFACE:
        if not allow:
            shown = host or "''"
            raise HostError(
                f"--host {shown} listens on every interface: name each host name the viewer "
                "is reached by with --allow-host NAME (repeatable), e.g. --allow-host "
                f"{socket.gethostname() or 'myhost.local'}"
            )
    elif host not in names:
        names.append(host)
    for name in allow:
        if name not in names:
            names.append(name)
    return names


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or `OSError` saying which address failed (a port
    in use, an unknown host)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise OSError(f"cannot listen on {host}:{port}: {reason}") from exc


def serve(
    store: SessionStore,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_writes: bool = False,
    database: str | None = None,
    announce: Callable[[str], None] | None = None,
    allow_hosts: Sequence[str] = (),
    header_timeout: float = HEADER_TIMEOUT_SECONDS,
    message_limit: int = MESSAGE_LIMIT,
) -> None:
    """Serve ``store`` until interrupted (blocks). ``announce`` gets the server's URL once it
    listens (with the real port when ``port`` is 0). ``allow_hosts``: more ``Host`` names to
    accept (see `allowed_hosts`; `HostError` for a wildcard ``host`` without any).
    ``header_timeout``: seconds a connection may take to send a request's headers (from when
    it opens, or when the previous response ended) before it is closed."""
    names = allowed_hosts(host, allow_hosts)
    sock = listen(host, port)
    app = create_app(
        store,
        allow_writes=allow_writes,
        allowed_hosts=names,
        message_limit=message_limit,
        database=database,
        own_store=True,
    )
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,  # open live streams never end on their own
        http=header_timeout_protocol(header_timeout),
        lifespan="on",
    )
    shown = f"[{host}]" if ":" in host else host
    if announce is not None:
        announce(f"http://{shown}:{sock.getsockname()[1]}/")
    with sock:
        uvicorn.Server(config).run(sockets=[sock])
