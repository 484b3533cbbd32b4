"""One session: its page (``/sessions/ID``), and under ``/api/sessions/ID/`` its state at a
seq, a timeline page, the full text of one event and the JSONL export."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse

from ..._jsonl import export_lines
from ..._jsonout import dumps, escape_controls
from ...core.types import TURN_START
from .. import bounds
from ..bounds import clamp, closing, page_start
from ..context import message_limit, path_session_id, query_int, store_of, summary_or_404
from ..messages import full_text
from ..render import api_url, render, render_messages, render_todos, session_url
from ..responses import JSONResponse, page
from ..seq_state import SessionPage, load_state
from ..timeline import load_timeline

__all__ = [
    "api_export",
    "api_message",
    "api_state",
    "api_timeline",
    "full_url",
    "open_session",
    "session_page",
]


def full_url(session_id: str) -> Callable[[int], str]:
    """The link to the full text of an event of ``session_id`` (shown where a text is cut)."""
    return lambda seq: api_url(session_id, "message", seq=seq)


async def open_session(request: Request) -> Response:
    """``GET /open?id=ID``: redirects to the session page (to the list without an id)."""
    session_id = request.query_params.get("id", "").strip()
    if not session_id:
        return RedirectResponse("/", status_code=303)
    return RedirectResponse(session_url(session_id), status_code=303)


async def session_page(request: Request) -> Response:
    """``GET /sessions/ID?at=SEQ``: the session page at SEQ (default: the end)."""
    session_id = path_session_id(request)
    summary = await summary_or_404(request, session_id)
    store, limit = store_of(request), message_limit(request)
    last = summary.next_seq - 1
    at = clamp(query_int(request, "at", None), last)
    start = page_start(at)
    # independent reads: the store runs them side by side (SQLite: two reader threads)
    header, turns, state, rows = await asyncio.gather(
        store.header(session_id),
        store.count(session_id, type=TURN_START),
        load_state(store, session_id, at, last, limit=limit),
        load_timeline(store, session_id, start, full_url=full_url(session_id), limit=limit),
    )
    data = SessionPage(header.model_dump(), summary, turns, state, start, rows)
    shown = bounds.MESSAGES_SHOWN
    return page(
        request,
        "session.html",
        page=data,
        state=state,
        start=start,
        rows=rows,
        session_id=session_id,
        next_seq=summary.next_seq,
        page_size=bounds.TIMELINE_PAGE,
        shown=shown,
        total=len(state.messages),
        messages=state.messages_json(shown),
        seqs=state.shown_seqs(shown),
        window=state.window(),
        metadata_json=dumps(dict(summary.metadata), indent=2),
    )


async def api_state(request: Request) -> Response:
    """``GET /api/sessions/ID/state?at=SEQ``: the todo list and the window's messages as of
    SEQ (``&html=1``: the two panes as HTML instead of the messages)."""
    session_id = path_session_id(request)
    summary = await summary_or_404(request, session_id)
    last = summary.next_seq - 1
    at = clamp(query_int(request, "at", None), last)
    limit = message_limit(request)
    state = await load_state(store_of(request), session_id, at, last, limit=limit)
    with_html = request.query_params.get("html") == "1"
    body = {"session": session_id, **state.to_json(with_messages=not with_html)}
    if with_html:
        body["html"] = {
            "todos": render_todos(state),
            "messages": render_messages(state, bounds.MESSAGES_SHOWN, session_id),
        }
    return JSONResponse(body)


async def api_timeline(request: Request) -> Response:
    """``GET /api/sessions/ID/timeline?at=SEQ``: the timeline page that holds SEQ, as HTML."""
    session_id = path_session_id(request)
    summary = await summary_or_404(request, session_id)
    at = clamp(query_int(request, "at", None), summary.next_seq - 1)
    start = page_start(at)
    rows = await load_timeline(
        store_of(request),
        session_id,
        start,
        full_url=full_url(session_id),
        limit=message_limit(request),
    )
    html = render(
        "_timeline.html",
        session_id=session_id,
        start=start,
        rows=rows,
        next_seq=summary.next_seq,
        page_size=bounds.TIMELINE_PAGE,
    )
    return JSONResponse(
        {"session": session_id, "start": start, "next": summary.next_seq, "html": html}
    )


async def api_message(request: Request) -> Response:
    """``GET /api/sessions/ID/message?seq=SEQ``: the full text of the event at SEQ."""
    session_id = path_session_id(request)
    summary = await summary_or_404(request, session_id)
    seq = query_int(request, "seq", None)
    if seq is None or seq >= summary.next_seq:
        raise HTTPException(404, f"no event at seq {seq} in session {session_id!r}")
    event = None
    async with closing(store_of(request).stream(session_id, seq, page_size=1)) as events:
        event = await anext(events, None)
    if event is None or event.seq != seq:
        raise HTTPException(404, f"no event at seq {seq} in session {session_id!r}")
    return Response(full_text(event), media_type="text/plain; charset=utf-8")


async def api_export(request: Request) -> Response:
    """``GET /api/sessions/ID/export``: the JSONL export, as a download."""
    session_id = path_session_id(request)
    await summary_or_404(request, session_id)
    store = store_of(request)

    async def lines() -> AsyncIterator[bytes]:
        async with closing(export_lines(store, session_id)) as exported:
            async for line in exported:
                yield (escape_controls(line) + "\n").encode()

    filename = quote(f"{session_id}.jsonl", safe="")
    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f"attachment; filename*=UTF-8''{filename}"},
    )
