"""``todo-sessions serve``: run the web application with uvicorn."""

from __future__ import annotations

import uvicorn

from ..store.store import SessionStore
from .app import LOCAL_HOSTS, create_app

__all__ = ["serve"]

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


def serve(
    store: SessionStore,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_writes: bool = False,
    database: str | None = None,
) -> None:
    """Serve ``store`` until interrupted (blocks)."""
    app = create_app(
        store,
        allow_writes=allow_writes,
        allowed_hosts=allowed_hosts(host),
        database=database,
        own_store=True,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,  # open live streams never end on their own
        lifespan="on",
    )
    uvicorn.Server(config).run()
