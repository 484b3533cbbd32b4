"""JSONL export and import of a large session into a file SQLite database (issue #6).

Run:  python bench/jsonl_bench.py [--events 100000] [--small 10000] [--rounds 3]

Builds two sessions (``--small`` and ``--events`` events) in a temporary SQLite file with the
store's default settings (WAL, synchronous=FULL) by ``SessionStore.append`` in batches of 1000,
and reports that batched append rate as the baseline. Then, for each size:

- export: ``export_lines`` streamed to a file, as ``todo-sessions export ID -o FILE`` does;
- import: ``import_lines`` reading that file under a new id (``--as``): every line parsed and
  validated first, then one ``append`` transaction;
- export-ref / import-ref: the same in the reference harness's format (``export --format
  reference``: its header line, chunk runs packed into ``text-chunks`` rows; import unpacks
  them), side by side with ours.

The four operations run in alternating rounds (``--rounds``); each rate is the median of the
rounds, with the lowest and highest.

Events/second come from a run without tracing; peak memory from a second run under
``tracemalloc`` (Python allocations of every thread, including aiosqlite's; SQLite's own page
cache is not counted). Export streams page by page, so its peak must not grow with the
session; import holds the validated session in memory before its single transaction, so its
peak grows with the session by design.

The events are a realistic mix: turns of 100 events (turn/start, user/message, step/start,
93 ``assistant/chunk`` deltas of ~40 characters, assistant/message citing them, todo/write,
step/end, turn/end).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import platform
import sqlite3
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from todo_sessions import (
    SessionEvent,
    SessionHeader,
    SessionStore,
    export_lines,
    import_lines,
    reference_lines,
)

T0 = 1_764_000_000_000
TURN = 100
CHUNKS = TURN - 7
BATCH = 1000

Work = Callable[[], Awaitable[int]]


def turn_events(start: int, number: int) -> list[SessionEvent]:
    """One complete turn of ``TURN`` events starting at seq ``start``."""
    s, n = start, number

    def ev(offset: int, kind: str, data: Any, **surface: Any) -> SessionEvent:
        return SessionEvent(kind, s + offset, T0 + s + offset, data, **surface)

    user = {
        "id": f"u{n}",
        "role": "user",
        "content": [{"type": "text", "text": f"request number {n}: please fix the next bug"}],
        "source": {"kind": "user"},
    }
    out = [
        ev(0, "turn/start", {"turn": n}),
        ev(1, "user/message", user, surface_op="append"),
        ev(2, "step/start", {"turn": n, "step": 1}),
    ]
    for i in range(CHUNKS):
        text = f"token {i:02d} of the answer to request {n}, "
        chunk = {"type": "text-delta", "index": 0, "text": text}
        out.append(ev(3 + i, "assistant/chunk", {"turn": n, "step": 1, "chunk": chunk}))
    message = {
        "id": f"a{n}",
        "role": "assistant",
        "content": [{"type": "text", "text": f"answer to request {n}"}],
        "source": {"kind": "model", "provider": "bench", "model": "scripted"},
    }
    cites = list(range(s + 3, s + 3 + CHUNKS))
    todos = {"todos": [{"content": f"request {n}", "status": "completed"}]}
    out += [
        ev(
            3 + CHUNKS,
            "assistant/message",
            {"turn": n, "step": 1, "message": message},
            surface_op="append",
            source_event_seqs=cites,
        ),
        ev(4 + CHUNKS, "todo/write", todos),
        ev(5 + CHUNKS, "step/end", {"turn": n, "step": 1}),
        ev(6 + CHUNKS, "turn/end", {"turn": n, "reason": {"kind": "completed"}}),
    ]
    return out


def session_events(count: int) -> list[SessionEvent]:
    assert count % TURN == 0, f"--events must be a multiple of {TURN}"
    events: list[SessionEvent] = []
    for number in range(1, count // TURN + 1):
        events += turn_events(len(events), number)
    return events


async def build(store: SessionStore, session_id: str, events: list[SessionEvent]) -> float:
    """Append ``events`` in batches of ``BATCH``; return events/second."""
    await store.create(SessionHeader(id=session_id, created_at=T0, cwd="/bench"))
    started = time.perf_counter()
    for start in range(0, len(events), BATCH):
        await store.append(session_id, events[start : start + BATCH])
    return len(events) / (time.perf_counter() - started)


async def export_to(
    store: SessionStore, session_id: str, path: Path, *, reference: bool = False
) -> int:
    lines = reference_lines if reference else export_lines
    count = 0
    with path.open("w", encoding="utf-8") as out:
        async for line in lines(store, session_id):
            out.write(line + "\n")
            count += 1
    return (await store.summary(session_id)).next_seq if reference else count - 1


async def import_from(store: SessionStore, path: Path, as_id: str) -> int:
    with path.open(encoding="utf-8") as lines:
        return (await import_lines(store, lines, as_id=as_id)).events


async def measure(work: Work, *, traced: bool) -> tuple[int, float, int]:
    """(events, seconds, peak traced bytes or 0)."""
    gc.collect()
    if traced:
        tracemalloc.start()
        tracemalloc.reset_peak()
    started = time.perf_counter()
    try:
        events = await work()
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1] if traced else 0
    finally:
        if traced:
            tracemalloc.stop()
    return events, seconds, peak


def operations(store: SessionStore, sid: str, path: Path) -> dict[str, Work]:
    """The measured operations on one session, ours and the reference's format; each import
    stores a new copy."""
    copies = itertools.count()
    ref = path.with_suffix(".ref.jsonl")
    return {
        "export": lambda: export_to(store, sid, path),
        "import": lambda: import_from(store, path, f"{sid}-copy{next(copies)}"),
        "export-ref": lambda: export_to(store, sid, ref, reference=True),
        "import-ref": lambda: import_from(store, ref, f"{sid}-copy{next(copies)}"),
    }


async def main(sizes: list[int], rounds: int = 3) -> None:
    print(
        f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, {platform.machine()}"
    )
    rows: list[tuple[int, str, tuple[float, float, float], float]] = []
    peaks: dict[tuple[str, int], float] = {}
    append_rates: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with SessionStore(f"sqlite:///{tmp}/bench.db") as store:
            for size in sizes:
                append_rates[size] = await build(store, f"s{size}", session_events(size))
            for size in sizes:
                path = Path(tmp) / f"s{size}.jsonl"
                ops = operations(store, f"s{size}", path)
                rates: dict[str, list[float]] = {op: [] for op in ops}
                for _ in range(rounds):  # alternating: every op once per round
                    for op, work in ops.items():
                        events, seconds, _ = await measure(work, traced=False)
                        assert events == size, (op, events, size)
                        rates[op].append(events / seconds)
                for op, work in ops.items():
                    _, _, peak = await measure(work, traced=True)
                    peaks[(op, size)] = peak / 2**20
                    ordered = sorted(rates[op])
                    spread = (ordered[len(ordered) // 2], ordered[0], ordered[-1])
                    rows.append((size, op, spread, peak / 2**20))
            big = Path(tmp) / f"s{sizes[-1]}.jsonl"
            ref = big.with_suffix(".ref.jsonl")
            print(
                f"{sizes[-1]:,}-event export file: {big.stat().st_size / 2**20:.1f} MiB ours, "
                f"{ref.stat().st_size / 2**20:.1f} MiB reference format"
            )

    print()
    head = f"{'events':>9}  {'operation':<10}  {'events/s (median, min-max)':>30}"
    print(f"{head}  {'peak MiB (tracemalloc)':>22}")
    for size in sizes:
        baseline = f"(SessionStore.append, batches of {BATCH})"
        print(f"{size:>9,}  {'append':<10}  {append_rates[size]:>30,.0f}  {baseline}")
        for events, op, (median, low, high), peak in rows:
            if events == size:
                rate = f"{median:,.0f} ({low:,.0f}-{high:,.0f})"
                print(f"{events:>9,}  {op:<10}  {rate:>30}  {peak:>22.1f}")
    small, big = sizes[0], sizes[-1]
    growth = {op: peaks[(op, big)] / peaks[(op, small)] for op in ("export", "import")}
    print()
    print(f"peak memory {big:,} vs {small:,} events ({big // small}x the session):")
    print(f"  export {growth['export']:.2f}x  (streams page by page: constant)")
    print(f"  import {growth['import']:.2f}x  (validates the whole file before one transaction)")
    if growth["export"] > 1.5:
        raise SystemExit("export peak memory grows with the session size")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main([args.small, args.events], args.rounds))
