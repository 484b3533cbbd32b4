"""Following an agent's files while it runs: import what is new again and again.

`Follower.poll` is one pass: discover the session files under the paths (a session started
since the last pass is found), and import each file whose size or modification time changed
since it was last imported (`import_file`: only its new complete lines; a last line still
being written waits for its newline). `follow` polls until ``stop`` is set, so a viewer or an
editor reading the store (``todo-sessions serve``, the ACP bridge) sees a running session
grow. Polling, not a file-system watch: it works the same on every platform and file system
(network mounts included), and a pass over unchanged files costs one ``stat`` each.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..store.store import SessionStore
from .base import MAX_LINE_BYTES, FileResult, Importer, SourceFile, import_file
from .paths import import_paths

__all__ = ["DEFAULT_INTERVAL", "Follower", "follow"]

DEFAULT_INTERVAL = 0.25
"""Seconds between two passes by default."""


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns


class Follower:
    """Imports what is new under ``paths`` (the agent's default location when None), one
    `poll` at a time; each pass returns the results of the files it imported."""

    def __init__(
        self,
        store: SessionStore,
        importer: Importer,
        paths: Iterable[str | Path] | None = None,
        *,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self.store, self.importer = store, importer
        self.roots = [Path(p) for p in paths] if paths is not None else importer.default_paths()
        self.max_line_bytes = max_line_bytes
        self._stamps: dict[Path, tuple[int, int] | None] = {}

    async def poll(self) -> list[FileResult]:
        """One pass (see the module docstring); files unchanged since the last pass are not
        read (and have no result)."""
        if getattr(self.importer, "import_sources", None) is not None:  # not line files
            return await import_paths(
                self.store, self.importer, self.roots, max_line_bytes=self.max_line_bytes
            )
        sources = await asyncio.to_thread(self._changed)
        results = []
        for source, stamp in sources:
            result = await import_file(
                self.store, self.importer, source, max_line_bytes=self.max_line_bytes
            )
            self._stamps[source.path] = stamp  # as it was before reading: a later write shows
            results.append(result)
        return results

    def _changed(self) -> list[tuple[SourceFile, tuple[int, int] | None]]:
        out = []
        for source in self.importer.discover(self.roots):
            stamp = _stamp(source.path)
            if source.path not in self._stamps or stamp != self._stamps[source.path]:
                out.append((source, stamp))
        return out


async def follow(
    store: SessionStore,
    importer: Importer,
    paths: Sequence[str | Path] | None,
    *,
    stop: asyncio.Event,
    report: Callable[[list[FileResult]], None],
    interval: float = DEFAULT_INTERVAL,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> None:
    """`Follower.poll` every ``interval`` seconds until ``stop`` is set, handing each pass's
    results to ``report``. A pass under way when ``stop`` is set finishes first (a file's new
    lines are one append: stopping never leaves a session half-imported); a last pass runs
    after ``stop``, so lines written just before it are imported."""
    follower = Follower(store, importer, paths, max_line_bytes=max_line_bytes)
    while True:
        report(await follower.poll())
        if stop.is_set():
            report(await follower.poll())
            return
        with contextlib.suppress(TimeoutError):  # not `wait_for`: it can swallow a cancel
            async with asyncio.timeout(interval):
                await stop.wait()
