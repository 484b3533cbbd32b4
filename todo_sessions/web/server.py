"""``todo-sessions serve``: run the web application with uvicorn."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

import uvicorn

from ..store.store import SessionStore
from .app import LOCAL_HOSTS, create_app

__all__ = ["allowed_hosts", "listen", "serve"]

_EVERY_INTERFACE = ("0.0.0.0", "::", "")


def allowed_hosts(host: str) -> list[str] | None:
    """The ``Host`` names to accept: the local names, plus ``host`` itself; None (any) when
    the server listens on every interface."""
    if host in _EVERY_INTERFACE:
        return None
    names = list(LOCAL_HOSTS)
    if host not in names:
        names.append(host if ":" not in host else f"[{host}]")
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
) -> None:
    """Serve ``store`` until interrupted (blocks). ``announce`` gets the server's URL once it
    listens (with the real port when ``port`` is 0)."""
    sock = listen(host, port)
    app = create_app(
        store,
        allow_writes=allow_writes,
        allowed_hosts=allowed_hosts(host),
        database=database,
        own_store=True,
    )
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,  # open live streams never end on their own
        lifespan="on",
    )
    shown = f"[{host}]" if ":" in host else host
    if announce is not None:
        announce(f"http://{shown}:{sock.getsockname()[1]}/")
    with sock:
        uvicorn.Server(config).run(sockets=[sock])
