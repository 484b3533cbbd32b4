"""The library is a guest in its host's process: it never changes process-wide state.

While a store reads and decodes large sessions from several tasks, the host's garbage
collector stays enabled with its thresholds unchanged (sampled from another thread), and no
signal handler or logging configuration changes.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import threading
from pathlib import Path

from factories import chunks, header, turn

from todo_sessions import SessionStore, export_lines, import_lines


class GCWatch:
    """Samples ``gc.isenabled()`` from a thread of its own until stopped."""

    def __init__(self) -> None:
        self.samples: list[bool] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(gc.isenabled())
            self._stop.wait(0.0005)

    def __enter__(self) -> GCWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def test_host_gc_stays_enabled_during_concurrent_large_reads(tmp_path: Path) -> None:
    thresholds = gc.get_threshold()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    root_handlers = list(logging.getLogger().handlers)
    async with SessionStore(tmp_path / "big.db") as store:
        for name in ("a", "b"):
            await store.create(header(name))
            opening, closing = turn(0)[:4], turn(0)[4:]  # ... step/start | step/end, turn/end
            await store.append(name, opening)
            await store.append(name, chunks(4, 20_000))
            await store.append(name, [e.replace(seq=20_004 + i) for i, e in enumerate(closing)])
        assert gc.isenabled()
        with GCWatch() as watch:
            reads = [
                store.read_from("a"),
                store.read_from("b"),
                store.derive_messages("a"),
                store.read("b"),
            ]
            results = await asyncio.gather(*reads)
            lines = [line async for line in export_lines(store, "a")]
            await import_lines(store, lines, as_id="a-copy")
        assert len(results[0]) == len(results[1]) == 20_006
        assert len(watch.samples) > 10  # the watch really ran during the reads
        assert all(watch.samples), f"GC was off in {watch.samples.count(False)} samples"
    assert gc.isenabled()
    assert gc.get_threshold() == thresholds
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers
    assert logging.getLogger().handlers == root_handlers


async def test_a_disabled_host_gc_stays_disabled(tmp_path: Path) -> None:
    gc.disable()
    try:
        async with SessionStore(tmp_path / "s.db") as store:
            await store.create(header("s"))
            await store.append("s", turn(0))
            await store.read_from("s")
            await store.derive_messages("s")
        assert not gc.isenabled()
    finally:
        gc.enable()
