"""The Starlette application: `create_app` wires the endpoints (`endpoints`), the middleware
(`security`) and the error handlers, and puts the settings on ``app.state`` (`context`).

Routes (``ID`` is the percent-encoded session id; ids may contain ``/``):

- ``GET /``: the session list (``?limit=N&before=ID``: the page after session ID), narrowed
  by the filters ``cwd``, ``tag``, ``text``, ``parent``, ``open_todos`` (yes, no, any),
  ``since`` and ``until`` (a date, a time or a duration ago; see `filters.parse_filters`).
- ``GET /open?id=ID``: redirects to the session page.
- ``GET /search?q=QUERY`` and ``GET /api/search``: search, as a page and as JSON.
- ``GET /sessions/ID?at=SEQ``: the session page at SEQ (default: the end).
- ``GET /api/sessions?limit=N&before=ID``: the list as JSON (the same filters).
- ``GET /api/sessions/ID/state?at=SEQ``: todo list (with changes) as of SEQ, and the messages
  of the window that holds SEQ (the surface events of its timeline page, up to SEQ: bounded
  work, whatever the session's length; ``window`` says which seqs, and the ``at`` of the
  windows before and after); ``&html=1`` adds the panes as HTML and leaves the messages list
  out.
- ``GET /api/sessions/ID/timeline?at=SEQ``: the timeline page that holds SEQ, as HTML.
- ``GET /api/sessions/ID/events?from=SEQ``: server-sent events, one per appended event.
- ``GET /api/sessions/ID/export``: the JSONL export, as a download.
- ``GET /api/sessions/ID/message?seq=SEQ``: the full text of the event at SEQ (what a page
  shows cut when it is longer than ``message_limit`` bytes), as plain text.
- ``POST /api/sessions/ID/fork?at=SEQ``: fork at SEQ; refused (403) unless writes are allowed.

The server is read-only unless ``allow_writes``: the only write is fork, and it is checked as
`security` says (``Host``, same origin, the server's token).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from .._redact import mask_url
from ..errors import TodoSessionsError
from ..store.store import SessionStore
from .bounds import MESSAGE_LIMIT
from .endpoints import fork, listing, live, search, session
from .responses import http_error, library_error
from .security import LOCAL_HOSTS, HostCheck, SecurityHeaders

__all__ = ["create_app", "routes"]

STATIC = Path(__file__).parent / "static"

_SESSION = "/api/sessions/{session_id:path}"


async def no_icon(request: Request) -> Response:
    """``/favicon.ico``: none (204), so a browser does not log a 404 for each page."""
    return Response(status_code=204)


def routes() -> list[BaseRoute]:
    """Every route of the viewer (the module docstring lists them)."""
    return [
        Route("/", listing.sessions_page),
        Route("/favicon.ico", no_icon),
        Route("/open", session.open_session),
        Route("/search", search.search_page),
        Route("/api/search", search.api_search),
        Route("/api/sessions", listing.api_sessions),
        Route(f"{_SESSION}/state", session.api_state),
        Route(f"{_SESSION}/timeline", session.api_timeline),
        Route(f"{_SESSION}/events", live.api_events),
        Route(f"{_SESSION}/export", session.api_export),
        Route(f"{_SESSION}/message", session.api_message),
        Route(f"{_SESSION}/fork", fork.api_fork, methods=["POST"]),
        Route("/sessions/{session_id:path}", session.session_page),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]


def create_app(
    store: SessionStore | str,
    *,
    allow_writes: bool = False,
    allowed_hosts: Sequence[str] | None = LOCAL_HOSTS,
    database: str | None = None,
    own_store: bool | None = None,
    message_limit: int = MESSAGE_LIMIT,
) -> Starlette:
    """The web application over ``store`` (a `SessionStore`, or a URL to open one).

    The app opens the store when it starts and closes it when it stops if it opened it.
    ``allowed_hosts``: the ``Host`` names accepted, without ports (``None``: any, only for an
    app behind a proxy that checks ``Host`` itself; `server.serve` never passes it).
    ``database``: what the page header shows (default: the store's URL), every password
    masked.
    ``own_store``: close the store when the app stops (default: only a store it opened).
    ``message_limit``: the most bytes of one text a page shows (longer: cut, with a link to
    ``/api/sessions/ID/message?seq=SEQ``).
    """
    if message_limit < 1:
        raise ValueError(f"message_limit must be >= 1, got {message_limit}")
    owned = not isinstance(store, SessionStore) if own_store is None else own_store
    the_store = SessionStore(store) if isinstance(store, str) else store

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await the_store.open()
        try:
            yield
        finally:
            if owned:
                await the_store.aclose()

    middleware = [Middleware(SecurityHeaders)]
    if allowed_hosts is not None:
        middleware.append(Middleware(HostCheck, names=list(allowed_hosts)))
    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        HTTPException: http_error,
        TodoSessionsError: library_error,
    }
    app = Starlette(
        routes=routes(), middleware=middleware, exception_handlers=handlers, lifespan=lifespan
    )
    app.state.store = the_store
    app.state.allow_writes = allow_writes
    app.state.fork_token = secrets.token_urlsafe(32) if allow_writes else ""
    app.state.message_limit = message_limit
    app.state.database = mask_url(database if database is not None else the_store.url)
    return app
