"""A stored session as the lines of its JSONL file (docs/format.md, "JSONL"): what
`todo-sessions export` writes, `prune` archives and `todo_sessions.jsonl` reads back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING

from ..core.header import header_line

if TYPE_CHECKING:
    from .store import SessionStore

__all__ = ["chain_key_of", "export_lines"]


async def export_lines(
    store: SessionStore, session_id: str, *, progress: Callable[[int], None] | None = None
) -> AsyncIterator[str]:
    """The JSONL lines (without newlines) of a stored session, read page by page: the header
    line carries the chain value of the last event exported (docs/format.md, "The hash
    chain"); events appended meanwhile are not exported."""
    header = await store.header(session_id)
    chain = await store.chain_head(session_id)
    yield header_line(header, chain)
    if chain is None:
        return
    last = chain[0]
    events = store.stream(session_id)
    async with aclosing(events):  # type: ignore[type-var]  # an async generator
        async for event in events:
            yield event.to_json()
            if progress is not None:
                progress(1)
            if event.seq >= last:
                break


def chain_key_of(store: SessionStore) -> bytes:
    """The key ``store`` chains its sessions with (`core.chain.derive_key`; empty: unkeyed),
    for checking an exported file's chain value with it."""
    return store._chain_key
