"""Projection and repair costs as a session grows (1k, 10k, 100k events).

    python bench/projections_bench.py [--url sqlite:///path.db | postgresql://...] [--quick]

For each size it builds a realistic session (turns of: user message, steps with streamed
chunks, an assistant message, a tool call and its result, a todo write every other step) and
reports:

- ``current_todos``: the store's indexed lookup of the latest ``todo/write`` (median of many);
- ``derive_messages``: from the store (surface rows only) against reading and decoding the
  whole session and folding it in Python (``read_from`` + the pure ``derive_messages``);
- ``load``: reading a closed session whole through ``SessionStore.load``;
- live ``Session.append`` followed by ``derive_messages()`` after every append, timed over
  1,000 appends at the end of a session of that size (should stay flat).

Targets (issue #3): current_todos < 1 ms and at 100k no more than 1.5x its 1k time;
store derive_messages at least 2x faster than the full decode; live append+derive flat.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from todo_sessions import Session, SessionEvent, SessionHeader, SessionStore
from todo_sessions.core.surface import derive_messages

T0 = 1_764_000_000_000


def session_events(size: int) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(type, data, envelope extras) for a closed session of about ``size`` events."""
    out: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    turn = 0
    while len(out) < size - 40:
        turn += 1
        out.append(("turn/start", {"turn": turn}, {}))
        user = {
            "id": f"u{turn}",
            "role": "user",
            "content": [{"type": "text", "text": "please fix the build " * 3}],
            "source": {"kind": "user"},
        }
        out.append(("user/message", user, {"surface_op": "append"}))
        for step in range(1, 6):
            out.append(("step/start", {"turn": turn, "step": step}, {}))
            first_chunk = len(out)
            for i in range(5):
                chunk = {"type": "text-delta", "index": i, "text": "looking at the failing test "}
                out.append(("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk}, {}))
            call_id = f"c{turn}.{step}"
            message = {
                "id": f"a{turn}.{step}",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "looking at the failing test " * 5},
                    {
                        "type": "tool-call",
                        "id": call_id,
                        "name": "read_file",
                        "arguments": '{"path": "src/app.py"}',
                    },
                ],
                "source": {"kind": "model", "provider": "bench", "model": "m"},
            }
            out.append(
                (
                    "assistant/message",
                    {"turn": turn, "step": step, "message": message},
                    {
                        "surface_op": "append",
                        "source_event_seqs": list(range(first_chunk, first_chunk + 5)),
                    },
                )
            )
            call_seq = len(out)
            out.append(
                (
                    "tool/call",
                    {
                        "turn": turn,
                        "step": step,
                        "callId": call_id,
                        "name": "read_file",
                        "arguments": '{"path": "src/app.py"}',
                    },
                    {},
                )
            )
            if step % 2:
                todos = [
                    {
                        "content": f"task {k}",
                        "status": "completed"
                        if k < step
                        else "in_progress"
                        if k == step
                        else "pending",
                    }
                    for k in range(6)
                ]
                out.append(("todo/write", {"todos": todos}, {}))
            result = {
                "turn": turn,
                "step": step,
                "message": {
                    "id": f"r{turn}.{step}",
                    "role": "user",
                    "source": {"kind": "tool", "callId": call_id},
                    "content": [
                        {
                            "type": "tool-result",
                            "toolCallId": call_id,
                            "content": [{"type": "text", "text": "def main():\n    pass\n" * 10}],
                        }
                    ],
                },
            }
            out.append(
                ("tool/result", result, {"surface_op": "append", "source_event_seqs": [call_seq]})
            )
            out.append(("step/end", {"turn": turn, "step": step}, {}))
        out.append(("turn/end", {"turn": turn, "reason": {"kind": "completed"}}, {}))
    return out


def build(size: int) -> list[SessionEvent]:
    return [SessionEvent(t, i, T0 + i, d, **x) for i, (t, d, x) in enumerate(session_events(size))]


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def timed(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return median_ms(samples)


def live_append_derive_us(events: list[SessionEvent], tail: int = 1000) -> float:
    """Mean µs for append + derive_messages over the last ``tail`` events."""
    session = Session(SessionHeader(id="live", created_at=0), events[:-tail], clock=lambda: T0)
    start = time.perf_counter()
    for e in events[-tail:]:
        session.append(
            e.type, e.data_copy(), surface_op=e.surface_op, source_event_seqs=e.source_event_seqs
        )
        session.derive_messages()
    return (time.perf_counter() - start) / tail * 1e6


async def run(url: str, sizes: list[int], repeat: int) -> None:
    rows = []
    async with SessionStore(url) as store:
        for size in sizes:
            sid = f"bench-{size}-{os.getpid()}"
            events = build(size)
            await store.create(SessionHeader(id=sid, created_at=T0, cwd="/bench"))
            for i in range(0, len(events), 5000):
                await store.append(sid, events[i : i + 5000])
            todos = await timed(lambda sid=sid: store.current_todos(sid), repeat * 10)
            derive = await timed(lambda sid=sid: store.derive_messages(sid), repeat)

            async def full(sid: str = sid) -> None:
                derive_messages(await store.read_from(sid))

            decode = await timed(full, repeat)
            load = await timed(lambda sid=sid: store.load(sid), repeat)
            live = live_append_derive_us(events)
            rows.append((len(events), todos, derive, decode, load, live))
            await store.delete(sid)
    print(
        f"store: {url.split('://')[0]}   python {platform.python_version()}   "
        f"sqlite {sqlite3.sqlite_version}   cpus {os.cpu_count()}"
    )
    head = (
        f"{'events':>8} {'current_todos':>14} {'derive (store)':>15} "
        f"{'read+decode+fold':>17} {'speedup':>8} {'load':>9} {'live append+derive':>19}"
    )
    print(head)
    print("-" * len(head))
    for n, todos, derive, decode, load, live in rows:
        print(
            f"{n:>8} {todos:>11.3f} ms {derive:>12.1f} ms {decode:>14.1f} ms "
            f"{decode / derive:>7.1f}x {load:>6.1f} ms {live:>15.1f} µs"
        )
    first, last = rows[0], rows[-1]
    print(
        f"\ncurrent_todos {last[0]} vs {first[0]} events: {last[1] / first[1]:.2f}x "
        "(target <= 1.5x, and < 1 ms)"
    )
    print(
        f"derive_messages store vs full decode at {last[0]}: {last[3] / last[2]:.1f}x faster "
        "(target >= 2x)"
    )
    print(
        f"live append+derive {last[0]} vs {first[0]} events: {last[5] / first[5]:.2f}x "
        "(target: flat)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="database URL (default: a temporary SQLite file)")
    parser.add_argument("--quick", action="store_true", help="1k and 10k only, fewer repeats")
    args = parser.parse_args()
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    repeat = 3 if args.quick else 7
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(args.url or f"sqlite:///{tmp}/bench.db", sizes, repeat))


if __name__ == "__main__":
    main()
