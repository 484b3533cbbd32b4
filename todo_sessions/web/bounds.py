"""How much a page reads and shows: the window sizes, the byte limit of one text, and the
helpers that keep every read bounded (`page_start`, `clamp`, `closing`, `cut_text`).

A timeline page is one `stream` page of `TIMELINE_PAGE` events, the messages are those of one
such window, and a text longer than `MESSAGE_LIMIT` bytes is shown cut, with a link to the
full text: a 100,000-event session costs what a short one does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

__all__ = [
    "MESSAGES_SHOWN",
    "MESSAGE_LIMIT",
    "TIMELINE_PAGE",
    "clamp",
    "closing",
    "cut_text",
    "page_start",
]

TIMELINE_PAGE = 200
"""Events per timeline page (the page holding the selected seq is shown)."""

MESSAGES_SHOWN = 200
"""The message pane shows the last this many messages of its window (the JSON API has them
all; a window of `TIMELINE_PAGE` events holds at most that many). Read at each request."""

MESSAGE_LIMIT = 1_000_000
"""The most bytes of one text (a message block, a timeline row's text) a page or the state
API shows; a longer one is cut (at a character boundary) and links to the full text."""

T = TypeVar("T")


def page_start(seq: int) -> int:
    """The first seq of the timeline page (and message window) that holds ``seq``."""
    return seq - seq % TIMELINE_PAGE


def clamp(at: int | None, last: int) -> int:
    """The seq to show: ``at`` within ``0..last`` (None: the end)."""
    if at is None or at > last:
        return max(last, 0)
    return max(at, 0)


@asynccontextmanager
async def closing(iterator: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """``contextlib.aclosing`` for the store's iterators (typed as plain async iterators):
    leaving the block closes the generator at once, releasing what it holds."""
    try:
        yield iterator
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()


def cut_text(text: str, limit: int) -> tuple[str, int | None]:
    """``text`` cut to at most ``limit`` UTF-8 bytes (at a character boundary), and its full
    size in bytes when it was cut (None: shown whole)."""
    if len(text) <= limit // 4:  # certainly short enough: no need to encode it
        return text, None
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, None
    return data[:limit].decode("utf-8", "ignore"), len(data)
