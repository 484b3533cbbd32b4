"""Long sessions (issue #12): resume from checkpoints, memory, projections at a seq, live tail.

    python bench/long_sessions_bench.py [--pg URL] [--sizes 10000,100000] [--rounds 7]
                                        [--tail-chunks 200] [--fold-upto 100000] [--no-tail]

The session: T turns of 1,000 streamed ``assistant/chunk`` events each (a user message, one
step, the chunks, an assistant message citing them, a ``todo/write``, the closers), written
through `SessionService`, which checkpoints every turn end. 100 turns are 100,600 events.

For each size and backend, side by side in alternating rounds (median and p25-p75):

- ``resume``: ``SessionService.resume`` (newest checkpoint + the events after it) against the
  same call with the checkpoints deleted (the whole log folded: what resuming cost before),
  for sizes up to ``--fold-upto``;
- ``then messages``: the first ``session.derive_messages()`` after that resume. A session
  resumed from a checkpoint decodes the conversation's nodes only now (once), so this is
  where the length of the conversation (not of the log) is paid;
- ``derive_messages(upto_seq=N)`` at random N, with and without checkpoints;
- memory of the resumed session: tracemalloc peak during a resume and what stays allocated
  (from a second, untimed resume: tracing slows the code it watches).

Live tail (SQLite file and PostgreSQL): a writer streams ``--tail-chunks`` chunks at 20 per
second through a service with ``flush_interval=0.1``; a follower in another process records
when each chunk arrives. Reported: latency from the chunk's creation (its ``time``) to its
arrival, median and p99; and the writer's cost of the timer against checkpoint-only
flushing: wall time of appending 20,000 chunks as fast as possible, both ways.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pg_chaos import with_scratch_database

from todo_sessions import SessionService, SessionStore

CHUNKS = 1000


def quartiles(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.1f}"
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):8.1f} [{q[0]:.1f}-{q[2]:.1f}]"


def turn(session: Any, number: int, chunks: int = CHUNKS) -> None:
    session.append("turn/start", {"turn": number})
    user = {
        "id": f"u{number}",
        "role": "user",
        "content": [{"type": "text", "text": f"step {number}: fix the failing test"}],
        "source": {"kind": "user"},
    }
    session.append("user/message", user, surface_op="append")
    session.append("step/start", {"turn": number, "step": 1})
    first = session.next_seq
    for i in range(chunks):
        chunk = {"type": "text-delta", "index": 0, "text": f"token{i} "}
        session.append("assistant/chunk", {"turn": number, "step": 1, "chunk": chunk})
    message = {
        "id": f"a{number}",
        "role": "assistant",
        "content": [{"type": "text", "text": f"answer {number}"}],
        "source": {"kind": "model", "provider": "bench", "model": "scripted"},
    }
    session.append(
        "assistant/message",
        {"turn": number, "step": 1, "message": message},
        surface_op="append",
        source_event_seqs=list(range(first, session.next_seq)) or None,
    )
    todos = [{"content": f"task {k}", "status": "completed"} for k in range(number % 5)]
    todos.append({"content": f"task {number}", "status": "in_progress"})
    session.append("todo/write", {"todos": todos})
    session.append("step/end", {"turn": number, "step": 1})
    session.append("turn/end", {"turn": number, "reason": {"kind": "completed"}})


async def build(url: str, session_id: str, turns: int) -> int:
    async with SessionService(SessionStore(url), flush_interval=None) as service:
        session = await service.new(session_id)
        for number in range(1, turns + 1):
            turn(session, number)
            await service.checkpoint(session_id, "turn-end")
        return session.next_seq


async def resume_once(url: str, session_id: str) -> tuple[float, float, int, int]:
    """Seconds of one resume and of the first ``derive_messages()`` after it, and the
    tracemalloc peak and retained bytes of the resume (timed without tracemalloc running:
    tracing slows allocation-heavy code several times; the memory comes from a second
    resume)."""
    async with SessionService(SessionStore(url), flush_interval=None) as service:
        await service.store.open()
        t = time.perf_counter()
        session = await service.resume(session_id)
        elapsed = time.perf_counter() - t
        t = time.perf_counter()
        messages = session.derive_messages()
        first_messages = time.perf_counter() - t
        assert session.next_seq > 0 and len(messages) > 0
        await service.close(session_id)
        del session, messages
        tracemalloc.start()
        session = await service.resume(session_id)
        retained, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert session.next_seq > 0  # alive while measured
        await service.close(session_id)
    return elapsed, first_messages, peak, retained


async def copy_without_checkpoints(url: str, source: str, target: str) -> None:
    async with SessionStore(url) as store:
        log = await store.fork(source, None, target)
        assert log.header.id == target
        await store.delete_checkpoints(target)


async def size_rows(url: str, backend: str, turns: int, rounds: int, fold: bool) -> None:
    sid = f"long-{turns}-{secrets.token_hex(3)}"
    events = await build(url, sid, turns)
    bare = sid + "-bare"
    labels = ["checkpoints", "fold"] if fold else ["checkpoints"]
    if fold:
        await copy_without_checkpoints(url, sid, bare)
    resume: dict[str, list[float]] = {label: [] for label in labels}
    first: dict[str, list[float]] = {label: [] for label in labels}
    memory: dict[str, list[tuple[int, int]]] = {label: [] for label in labels}
    derive: dict[str, list[float]] = {label: [] for label in labels}
    rng = random.Random(turns)
    async with SessionStore(url) as store:
        for r in range(rounds):
            order = [("checkpoints", sid), ("fold", bare)][: len(labels)]
            for label, session_id in order if r % 2 == 0 else order[::-1]:
                elapsed, messages, peak, retained = await resume_once(url, session_id)
                resume[label].append(elapsed * 1000)
                first[label].append(messages * 1000)
                memory[label].append((peak, retained))
                n = rng.randrange(events)
                t = time.perf_counter()
                await store.derive_messages(session_id, upto_seq=n)
                derive[label].append((time.perf_counter() - t) * 1000)
                if label == "fold":  # the fold copy must stay without checkpoints
                    assert not await store.checkpoints(session_id)
    mib = 1024 * 1024
    for label in labels:
        peak = statistics.median(p for p, _ in memory[label]) / mib
        kept = statistics.median(k for _, k in memory[label]) / mib
        print(
            f"{backend:<10} {events:>9,} {turns:>5} {label:<12} resume ms "
            f"{quartiles(resume[label])}  then messages ms {quartiles(first[label])}  "
            f"derive@N ms {quartiles(derive[label])}  peak {peak:6.1f} MiB  kept {kept:5.1f} MiB"
        )


FOLLOWER = """
import asyncio, json, sys, time
from todo_sessions import SessionStore
async def main():
    async with SessionStore(sys.argv[1]) as store:
        print("READY", flush=True)
        async for e in store.follow(sys.argv[2], poll_interval=0.02):
            if e.type == "assistant/chunk":
                print(json.dumps([e.time, time.time() * 1000]), flush=True)
            if e.type == "turn/end":
                return
asyncio.run(main())
"""


async def live_tail(url: str, backend: str, chunks: int) -> None:
    sid = f"tail-{secrets.token_hex(3)}"
    async with SessionService(SessionStore(url), flush_interval=0.1) as service:
        session = await service.new(sid)
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        await service.flush(sid)
        follower = subprocess.Popen(  # noqa: ASYNC220 - started once, before timing
            [sys.executable, "-c", FOLLOWER, url, sid], stdout=subprocess.PIPE, text=True
        )
        assert follower.stdout is not None
        assert follower.stdout.readline().strip() == "READY"
        for i in range(chunks):
            chunk = {"type": "text-delta", "index": 0, "text": f"t{i} "}
            session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
            await asyncio.sleep(0.05)
        session.append("step/end", {"turn": 1, "step": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await service.flush(sid)
        out, _ = await asyncio.to_thread(follower.communicate, timeout=120)
    lags = sorted(arrived - made for made, arrived in (json.loads(x) for x in out.splitlines()))
    p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
    print(
        f"{backend:<10} follow latency, flush_interval 0.1 s: median {statistics.median(lags):.0f}"
        f" ms, p99 {p99:.0f} ms, worst {lags[-1]:.0f} ms ({len(lags)} chunks)"
    )


async def writer_cost(url: str, backend: str, rounds: int, chunks: int = 20_000) -> None:
    async def stream(interval: float | None) -> float:
        sid = f"cost-{secrets.token_hex(3)}"
        async with SessionService(SessionStore(url), flush_interval=interval) as service:
            session = await service.new(sid)
            session.append("turn/start", {"turn": 1})
            session.append("step/start", {"turn": 1, "step": 1})
            t = time.perf_counter()
            for i in range(chunks):
                chunk = {"type": "text-delta", "index": 0, "text": f"t{i} "}
                session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
                if i % 100 == 0:
                    await asyncio.sleep(0)  # a model stream yields to the loop
            session.append("step/end", {"turn": 1, "step": 1})
            session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
            await service.checkpoint(sid, "turn-end")
            return time.perf_counter() - t

    timed: dict[str, list[float]] = {"timer 0.1 s": [], "checkpoints only": []}
    for r in range(rounds):
        both = [("timer 0.1 s", 0.1), ("checkpoints only", None)]
        for label, interval in both if r % 2 == 0 else both[::-1]:
            timed[label].append(chunks / await stream(interval))
    a = statistics.median(timed["timer 0.1 s"])
    b = statistics.median(timed["checkpoints only"])
    print(
        f"{backend:<10} streaming {chunks:,} chunks: timer 0.1 s {a:,.0f} ev/s, checkpoints only "
        f"{b:,.0f} ev/s ({a / b:.2f}x)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default=os.environ.get("TODO_SESSIONS_PG_URL"))
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tail-chunks", type=int, default=200)
    parser.add_argument(
        "--fold-upto",
        type=int,
        default=100_000,
        help="sizes above this get no fold row (folding 1M events takes about 20 s a round)",
    )
    parser.add_argument("--no-tail", action="store_true", help="skip the live-tail rows")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"python {platform.python_version()}, {platform.platform()}, {os.cpu_count()} CPUs")
    print(
        "backend       events turns from         resume / first session.derive_messages() "
        "after it / store.derive_messages(upto_seq=N) / memory of the resume"
    )

    async def all_rows(url: str, backend: str) -> None:
        for size in sizes:
            turns = max(1, size // (CHUNKS + 6))
            await size_rows(url, backend, turns, args.rounds, size <= args.fold_upto)

    with tempfile.TemporaryDirectory() as tmp:
        sqlite_url = f"sqlite:///{tmp}/long.db"
        await all_rows(sqlite_url, "sqlite")
        if args.pg:
            await with_scratch_database(args.pg, lambda url: all_rows(url, "postgresql"))
        if args.no_tail:
            return
        print()
        await live_tail(sqlite_url, "sqlite", args.tail_chunks)
        if args.pg:
            await with_scratch_database(
                args.pg, lambda url: live_tail(url, "postgresql", args.tail_chunks)
            )
        await writer_cost(sqlite_url, "sqlite", max(3, args.rounds // 2))


if __name__ == "__main__":
    asyncio.run(main())
