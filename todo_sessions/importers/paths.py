"""`import_paths`: every session file of an agent under some paths, a few files at once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

from ..store.store import SessionStore
from .base import MAX_LINE_BYTES, FileResult, Importer, SourceFile, import_file

__all__ = ["CONCURRENT_FILES", "import_paths"]

CONCURRENT_FILES = 4
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
    results: list[FileResult | None] = [None] * len(sources)
    ready = {s.session_id: asyncio.Event() for s in sources}
    slots = asyncio.Semaphore(CONCURRENT_FILES)

    async def one(index: int, source: SourceFile) -> None:
        parent = ready.get(source.parent) if source.parent is not None else None
        if parent is not None:
            await parent.wait()  # a child session after its parent's
        try:
            async with slots:
                results[index] = await import_file(
                    store, importer, source, max_line_bytes=max_line_bytes
                )
        finally:
            ready[source.session_id].set()

    try:
        async with asyncio.TaskGroup() as group:
            for index, source in enumerate(sources):
                group.create_task(one(index, source))
    except BaseExceptionGroup as failed:  # the store failed: its error, as it would be alone
        raise failed.exceptions[0] from None
    return [r for r in results if r is not None]
