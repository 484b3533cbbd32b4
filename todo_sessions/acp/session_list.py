"""``session/list`` on the store: one page of sessions, newest activity first, cursor paged
on the store's keyset pagination (the cursors and entries are `todo_sessions.acp.listing`).

Subagent sessions (header ``origin`` ``subagent``: a child a ``subagent`` call ran) are left
out unless asked for: the client reaches them through their parent. Only sessions with a
parent are looked at (one header read each); a page can so hold fewer entries than the page
size, and the cursor still continues after the last session read."""

from __future__ import annotations

from ..core.types import USER_MESSAGE
from ..errors import SessionNotFoundError
from ..store.results import SessionSummary
from ..store.store import SessionStore
from . import _sdk
from .client_errors import client_errors
from .listing import (
    CursorError,
    check_cwd,
    cursor_position,
    decode_cursor,
    encode_cursor,
    first_line,
    session_info,
)

__all__ = ["SUBAGENT_ORIGIN", "TITLE_SCAN", "list_page", "title_of"]

SUBAGENT_ORIGIN = "subagent"
"""The header ``origin`` of a session a ``subagent`` tool call ran."""

TITLE_SCAN = 64
"""How many first events of an untitled session are looked through for a user message."""


async def title_of(store: SessionStore, summary: SessionSummary) -> str | None:
    """The session's title, else the first line of its first user message, looked for among
    its first `TITLE_SCAN` events (one short read), else None."""
    if summary.title:
        return summary.title
    events = await store.read_from(summary.id, 0, limit=TITLE_SCAN)
    for event in events:
        if event.type == USER_MESSAGE:
            return first_line(event.data)
    return None


async def _subagent(store: SessionStore, summary: SessionSummary) -> bool:
    if summary.parent is None:
        return False
    try:
        return (await store.header(summary.id)).origin == SUBAGENT_ORIGIN
    except SessionNotFoundError:  # deleted meanwhile: not listed either
        return True


async def list_page(
    store: SessionStore,
    *,
    cwd: str | None,
    cursor: str | None,
    page_size: int,
    subagents: bool = False,
) -> _sdk.ListSessionsResponse:
    """The page of ``page_size`` sessions after ``cursor`` (a session without a cwd is not
    listed: the schema needs one; a subagent session only with ``subagents``). A bad cursor
    or cwd is ``invalid_params``."""
    before = None
    if cursor is not None:
        try:
            before = cursor_position(*decode_cursor(cursor, store.store_id))
        except CursorError as exc:
            raise _sdk.RequestError.invalid_params({"cursor": str(exc)}) from None
    try:
        cwd = check_cwd(cwd)
    except ValueError as exc:
        raise _sdk.RequestError.invalid_params({"cwd": str(exc)}) from None
    with client_errors():
        rows = await store.list(limit=page_size + 1, before=before, cwd=cwd)
    page, more = rows[:page_size], len(rows) > page_size
    sessions = [
        session_info(summary, await title_of(store, summary))
        for summary in page
        if summary.cwd and (subagents or not await _subagent(store, summary))
    ]
    next_cursor = None
    if more:
        last = page[-1]
        next_cursor = encode_cursor(store.store_id, last.updated_at, last.id)
    return _sdk.ListSessionsResponse(sessions=sessions, next_cursor=next_cursor)
