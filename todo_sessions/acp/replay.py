"""``session/load``'s replay: the stored log read in pages, each page's updates as wire JSON.

Pages are `SessionStore.read_from` reads, the next one read while one is sent, at most two
held: memory stays flat in the session's length. The updates' JSON is built straight from the
stored payloads (`UpdateMapper.feed_wire`); a page's updates go out in one write.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from ..core.envelope import SessionEvent
from ..core.types import USER_MESSAGE
from ..store.store import SessionStore
from .listing import first_line
from .presenter import Presenter
from .usage import UsageTally

__all__ = ["Replay", "read_pages", "send_page"]


async def read_pages(
    store: SessionStore, session_id: str, page_size: int
) -> AsyncGenerator[list[SessionEvent], None]:
    """The stored log in pages of ``page_size`` events (`SessionStore.read_from`, each page
    its own short read, as `SessionStore.stream` reads), the next page read while the caller
    works on this one: at most two pages are held, whatever the length."""
    page = await store.read_from(session_id, 0, limit=page_size)
    while page:
        ahead: asyncio.Task[list[SessionEvent]] | None = None
        if len(page) == page_size:
            ahead = asyncio.ensure_future(
                store.read_from(session_id, page[-1].seq + 1, limit=page_size)
            )
            await asyncio.sleep(0)  # let the read start before this page is worked on
        try:
            yield page
        except BaseException:
            if ahead is not None:
                ahead.cancel()
                with contextlib.suppress(BaseException):
                    await ahead
            raise
        page = [] if ahead is None else await ahead


class Replay:
    """What a replay sends and sums: the updates of each page (`page`), the usage over the
    log (``tally``), the title (the stored one, else the first user message's first line)
    and the seq after the last event replayed (``next_seq``)."""

    def __init__(self, mapper: Presenter, title: str | None) -> None:
        self.mapper = mapper
        self.tally = UsageTally()
        self.title = title
        self.next_seq = 0

    def page(self, events: Sequence[SessionEvent]) -> list[dict[str, Any]]:
        """The wire updates of one page, in log order."""
        batch: list[dict[str, Any]] = []
        for event in events:
            self.tally.feed(event)
            if self.title is None and event.type == USER_MESSAGE:
                self.title = first_line(event.data)
            batch.extend(self.mapper.feed(event))
        if events:
            self.next_seq = events[-1].seq + 1
        return batch


async def send_page(conn: Any, session_id: str, updates: list[dict[str, Any]]) -> None:
    """Send a page's wire updates together, in order (one ``session_update`` each on a
    connection without ``session_updates``)."""
    if not updates:
        return
    send_many = getattr(conn, "session_updates", None)
    if send_many is not None:
        await send_many(session_id, updates)
        return
    for update in updates:
        await conn.session_update(session_id=session_id, update=update)
