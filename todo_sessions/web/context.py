"""What an endpoint reads from its request: the app's settings on ``request.app.state``, and
the query and path parameters, checked (a bad one is a 400, an unknown session a 404).

`app.create_app` sets the state; an endpoint tested alone needs only ``store`` set by hand on
a plain ``Starlette`` app's state. The names:

- ``store``: the opened `SessionStore` (required);
- ``allow_writes``: whether a fork is allowed (default False);
- ``fork_token``: the token a fork request must carry (default empty: none is accepted);
- ``message_limit``: the most bytes of one text a page shows before cutting it (default
  `bounds.MESSAGE_LIMIT`);
- ``database``: what the page header shows, every password masked (default: the store's URL,
  masked).
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request

from .._redact import mask_url
from ..errors import InvalidEventError, SessionNotFoundError
from ..store.results import SessionSummary
from ..store.store import SessionStore
from .bounds import MESSAGE_LIMIT

__all__ = [
    "MAX_INT",
    "allow_writes",
    "fork_token",
    "message_limit",
    "path_session_id",
    "query_int",
    "shown_database",
    "store_of",
    "summary_or_404",
    "wants_json",
]


def _setting(request: Request, name: str, default: Any) -> Any:
    return getattr(request.app.state, name, default)


def store_of(request: Request) -> SessionStore:
    """The store the app serves (``app.state.store``)."""
    store = _setting(request, "store", None)
    if not isinstance(store, SessionStore):
        raise RuntimeError("the viewer's app.state.store is not set to a SessionStore")
    return store


def allow_writes(request: Request) -> bool:
    return _setting(request, "allow_writes", False) is True


def fork_token(request: Request) -> str:
    token = _setting(request, "fork_token", "")
    return token if isinstance(token, str) else ""


def message_limit(request: Request) -> int:
    limit = _setting(request, "message_limit", MESSAGE_LIMIT)
    return limit if isinstance(limit, int) and limit >= 1 else MESSAGE_LIMIT


def shown_database(request: Request) -> str:
    database = _setting(request, "database", None)
    return mask_url(database if isinstance(database, str) else store_of(request).url)


MAX_INT = 2**63 - 1
"""The largest integer a parameter may hold: a seq or an index id is a signed 64-bit integer
in the database (a larger one would reach the driver and fail there)."""


def query_int(
    request: Request, name: str, default: int | None, *, low: int = 0, high: int = MAX_INT
) -> int | None:
    """The integer query parameter ``name`` (``default`` when absent or empty); 400 when it
    is not an integer or lies outside ``low..high``."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"{name} must be an integer, got {raw!r}") from None
    if value < low:
        raise HTTPException(400, f"{name} must be >= {low}, got {value}")
    if value > high:
        raise HTTPException(400, f"{name} must be <= {high}, got {value}")
    return value


def path_session_id(request: Request) -> str:
    """The session id of a ``/sessions/ID`` or ``/api/sessions/ID/...`` path."""
    value: str = request.path_params["session_id"]
    return value


def wants_json(request: Request) -> bool:
    """Whether an error is answered as JSON (under ``/api/``) rather than as a page."""
    return request.url.path.startswith("/api/")


async def summary_or_404(request: Request, session_id: str) -> SessionSummary:
    """The summary of ``session_id``; 404 for an unknown session or an id that is none."""
    try:
        return await store_of(request).summary(session_id)
    except SessionNotFoundError:
        raise HTTPException(404, f"no session {session_id!r}") from None
    except InvalidEventError as exc:  # not a valid id at all
        raise HTTPException(404, str(exc)) from None
