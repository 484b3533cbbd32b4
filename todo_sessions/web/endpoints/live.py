"""Live updates: ``GET /api/sessions/ID/events?from=SEQ``, server-sent events over
`SessionStore.follow`, one per appended event, with a comment line when idle."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ...core.envelope import SessionEvent
from ...errors import SessionNotFoundError
from ...store.store import SessionStore
from ..bounds import closing
from ..context import message_limit, path_session_id, query_int, store_of, summary_or_404
from ..render import render_row, when
from ..timeline import cut_row, event_row
from .session import full_url

__all__ = ["HEARTBEAT_SECONDS", "api_events", "event_stream"]

HEARTBEAT_SECONDS = 15.0
"""A comment line on an idle event stream, so a closed browser tab is noticed."""

_SEQ_TEXT = re.compile(r"[0-9]{1,18}")
"""A ``Last-Event-ID`` we sent: ASCII digits (``str.isdigit`` also takes ``²``)."""

QUEUED_EVENTS = 1000
"""Events read ahead of the client at most."""


async def api_events(request: Request) -> Response:
    """The event stream from ``from`` (default: the session's end; a ``Last-Event-ID`` the
    browser sends on reconnecting: on after that event)."""
    session_id = path_session_id(request)
    summary = await summary_or_404(request, session_id)
    from_seq = query_int(request, "from", summary.next_seq)
    assert from_seq is not None
    resumed = request.headers.get("last-event-id", "").strip()
    if _SEQ_TEXT.fullmatch(resumed):  # a browser reconnecting: on after the last it had
        from_seq = int(resumed) + 1
    stream = event_stream(
        store_of(request), session_id, from_seq, full_url(session_id), message_limit(request)
    )
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _append_message(event: SessionEvent, calls: dict[str, str], url: str, limit: int) -> str:
    row = cut_row(event_row(event, calls), url, limit)
    payload = {
        "seq": event.seq,
        "type": event.type,
        "time": event.time,
        "updated": when(event.time),
        "html": render_row(row),
    }
    return f"event: append\nid: {event.seq}\ndata: {json.dumps(payload)}\n\n"


async def event_stream(
    store: SessionStore,
    session_id: str,
    from_seq: int,
    full_url: Callable[[int], str],
    limit: int,
) -> AsyncIterator[str]:
    """Server-sent events: ``append`` with ``{seq, type, time, updated, html}`` for each event
    appended from ``from_seq`` on (read with `SessionStore.follow`), a comment line when idle,
    and ``gone`` when the session is deleted."""
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=QUEUED_EVENTS)
    done = object()

    async def pump() -> None:
        try:
            follow = store.follow(session_id, from_seq, poll_interval=0.1)
            async with closing(follow) as events:
                async for event in events:
                    await queue.put(event)
        except SessionNotFoundError:
            pass
        finally:
            await queue.put(done)

    task = asyncio.create_task(pump())
    calls: dict[str, str] = {}
    try:
        yield ": following\n\n"
        while True:
            try:  # not `wait_for`: it can swallow the cancel of a closed stream
                async with asyncio.timeout(HEARTBEAT_SECONDS):
                    item = await queue.get()
            except TimeoutError:
                yield ": idle\n\n"
                continue
            if item is done:
                yield "event: gone\ndata: {}\n\n"
                return
            yield _append_message(item, calls, full_url(item.seq), limit)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
