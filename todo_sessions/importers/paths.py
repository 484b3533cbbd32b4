"""`import_paths`: every session file of an agent under some paths, a few files at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path

from ..store.store import SessionStore
from .base import MAX_LINE_BYTES, FileResult, Importer, SourceFile, import_file

__all__ = ["CONCURRENT_FILES", "import_paths", "in_order", "stored_ids"]

CONCURRENT_FILES = 8
"""Files `import_paths` imports at once: one file's lines are mapped while another's are
written (the store's writer thread), and the writer commits appends that wait together in one
transaction (its group commit)."""


async def import_paths(
    store: SessionStore,
    importer: Importer,
    paths: Iterable[str | Path] | None = None,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> list[FileResult]:
    """Import every session file `Importer.discover` finds under ``paths`` (the agent's
    default location when None), parents before children; one `FileResult` per file. An
    importer with an ``import_sources(store, sources)`` of its own (opencode, whose sessions
    are database rows) imports them with it instead of `import_file`."""
    roots = [Path(p) for p in paths] if paths is not None else importer.default_paths()
    sources = await asyncio.to_thread(importer.discover, roots)
    own = getattr(importer, "import_sources", None)  # an agent whose sessions are not lines
    if own is not None:
        return list(await own(store, sources))
    stored = await stored_ids(store, sources)

    async def one(source: SourceFile) -> FileResult:
        new = source.session_id not in stored
        return await import_file(store, importer, source, max_line_bytes=max_line_bytes, new=new)

    return await in_order(sources, one)


async def in_order(
    sources: Sequence[SourceFile], run: Callable[[SourceFile], Awaitable[FileResult]]
) -> list[FileResult]:
    """``run`` over ``sources``, `CONCURRENT_FILES` at once, each child session's after its
    parent's (when the parent is among them) and two sources of one session one after the
    other; the results in the sources' order. A store error is raised as it would be alone."""
    results: list[FileResult | None] = [None] * len(sources)
    done = [asyncio.Event() for _ in sources]
    last: dict[str, int] = {}  # a session's last source
    before: list[int | None] = []  # the source of the same session before each
    for index, source in enumerate(sources):
        before.append(last.get(source.session_id))
        last[source.session_id] = index
    slots = asyncio.Semaphore(CONCURRENT_FILES)

    async def one(index: int, source: SourceFile) -> None:
        parent = last.get(source.parent) if source.parent is not None else None
        for first in (parent, before[index]):
            if first is not None and first < index:  # backwards only: no wait in a cycle
                await done[first].wait()  # a child session after its parent's
        try:
            async with slots:
                results[index] = await run(source)
        finally:
            done[index].set()

    try:
        async with asyncio.TaskGroup() as group:
            for index, source in enumerate(sources):
                group.create_task(one(index, source))
    except BaseExceptionGroup as failed:  # the store failed: its error, as it would be alone
        raise failed.exceptions[0] from None
    return [r for r in results if r is not None]


async def stored_ids(store: SessionStore, sources: Sequence[SourceFile]) -> set[str]:
    """Which of the sources' sessions the store holds, from one listing of its session ids
    (a page a query) rather than a read of each session: a session not stored yet has no log
    to read before its import."""
    wanted = {s.session_id for s in sources}
    if not wanted:
        return set()
    return {sid async for sid in store.session_ids() if sid in wanted}
