"""A stored session as the lines of its JSONL file (docs/format.md, "JSONL"): what
`todo-sessions export` writes, `prune` archives and `todo_sessions._jsonl` reads back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, Protocol

from ..core.envelope import SessionEvent
from ..core.header import SessionHeader, header_line


class SessionReads(Protocol):
    """What an export reads of a store (`SessionStore` has it)."""

    async def header(self, session_id: str) -> SessionHeader: ...

    async def chain_head(self, session_id: str) -> tuple[int, str | None] | None: ...

    def stream(self, session_id: str) -> AsyncIterator[SessionEvent]: ...


__all__ = ["SessionReads", "chain_key_of", "export_lines"]


async def export_lines(
    store: SessionReads, session_id: str, *, progress: Callable[[int], None] | None = None
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


def chain_key_of(store: Any) -> bytes:
    """The key ``store`` chains its sessions with (`core.chain.derive_key`; empty: unkeyed),
    for checking an exported file's chain value with it."""
    return store._core.chain_key
