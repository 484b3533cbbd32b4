"""Search: first-page latency over many sessions, and what the index costs an append.

``python bench/search_bench.py [--backend sqlite|postgres|all] [--sessions N] [--events N]
[--rounds N] [--quick]``

- **search**: a store of ``--sessions`` sessions (10,000) of ``--events`` events (100) each:
  a user message, then assistant messages, tool calls and results, a ``todo/write`` every 25th
  event, their text drawn from a vocabulary of 2,000 words. Timed: ``store.search(q,
  limit=20)``, the first page, median (and spread: min-max of the round medians) of 25 calls a
  round, for a **common** word (in every session), a **rare** one (in one session), a **prefix**
  (``fix*``, hundreds of words) and a **phrase**; each alone, and the common one with a ``cwd``
  filter. Seeding is untimed (appends of 100 events, 50 sessions at a time: group commit).
- **batch100 index cost**: `store_bench`'s batch100 row (60 appends of 100 ``assistant/message``
  events built from dicts inside the timing) on a store with the index and one with
  ``search_index=False``, alternating in each round; events/s, median of the rounds; target: the
  indexed store at >= 0.9x. The index is deferred (docs/design.md, "Search"), so each indexed
  round is followed by a timed search that brings it up to date: the deferred work's rate.
- **catchup**: ``--backlog`` events (100,000: sessions of 100 events, appended 100 and 10 at a
  time) left to the index (the background catch-up held off), then a fresh store's
  first search, which indexes them all first, and a second search; seconds. Target (SQLite):
  the first search under 5 s.

PostgreSQL: ``TODO_SESSIONS_PG_URL`` (default postgresql://postgres@127.0.0.1:5432/postgres);
scratch databases are created and dropped. ``--quick``: 1,000 sessions, 3 rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_bench import MESSAGE, T0, clock, message

from todo_sessions import SessionEvent, SessionHeader, SessionStore

PG_URL = os.environ.get("TODO_SESSIONS_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
RARE = "zyzzyvaquartz"
COMMON = "migration"
RARE_SESSION = 421
"""The one session whose prompt has the rare word."""


def vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"fix" + "".join(rng.choice(letters) for _ in range(4)) for _ in range(300)}
    while len(words) < 2000:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(words)


def sentence(rng: random.Random, words: list[str], n: int = 12) -> str:
    return " ".join(rng.choice(words) for _ in range(n))


def session_events(n: int, size: int, rng: random.Random, words: list[str]) -> list[SessionEvent]:
    text = f"please look at the {COMMON} of module {sentence(rng, words, 8)}"
    if n == RARE_SESSION:
        text += f" {RARE}"
    events = [
        SessionEvent("turn/start", 0, T0, {"turn": 1}),
        SessionEvent(
            "user/message",
            1,
            T0 + 1,
            {
                "id": "u1",
                "role": "user",
                "content": [{"type": "text", "text": text}],
                "source": {"kind": "user"},
            },
            surface_op="append",
        ),
    ]
    step = 0
    seq = 2
    while seq < size - 1:
        step += 1
        events.append(SessionEvent("step/start", seq, T0 + seq, {"turn": 1, "step": step}))
        seq += 1
        call = f"c{seq}"
        args = '{"pattern": "' + sentence(rng, words, 3) + '"}'
        msg = {
            "turn": 1,
            "step": step,
            "message": {
                "id": f"a{seq}",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": sentence(rng, words)},
                    {"type": "tool-call", "id": call, "name": "grep", "arguments": args},
                ],
                "source": {"kind": "model", "provider": "p", "model": "m"},
            },
        }
        events.append(SessionEvent(MESSAGE, seq, T0 + seq, msg, surface_op="append"))
        seq += 1
        events.append(
            SessionEvent(
                "tool/call",
                seq,
                T0 + seq,
                {"turn": 1, "step": step, "callId": call, "name": "grep", "arguments": args},
            )
        )
        seq += 1
        result = {
            "turn": 1,
            "step": step,
            "message": {
                "id": f"r{seq}",
                "role": "user",
                "source": {"kind": "tool", "callId": call},
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": call,
                        "content": [{"type": "text", "text": sentence(rng, words, 20)}],
                    }
                ],
            },
        }
        events.append(SessionEvent("tool/result", seq, T0 + seq, result, surface_op="append"))
        seq += 1
        if step % 6 == 0:
            todos = [{"content": sentence(rng, words, 4), "status": "pending"}]
            events.append(SessionEvent("todo/write", seq, T0 + seq, {"todos": todos}))
            seq += 1
        events.append(SessionEvent("step/end", seq, T0 + seq, {"turn": 1, "step": step}))
        seq += 1
    end = {"turn": 1, "reason": {"kind": "completed"}}
    events.append(SessionEvent("turn/end", seq, T0 + seq, end))
    return events


async def seed(store: SessionStore, sessions: int, size: int) -> None:
    rng = random.Random(29)
    words = vocabulary(rng)
    for start in range(0, sessions, 50):
        batch = range(start, min(sessions, start + 50))
        for n in batch:
            await store.create(SessionHeader(id=f"s{n:05d}", created_at=T0, cwd=f"/repo{n % 10}"))
        await asyncio.gather(
            *(store.append(f"s{n:05d}", session_events(n, size, rng, words)) for n in batch)
        )
        if start % 1000 == 0:
            print(f"  seeded {start + len(batch)}", file=sys.stderr, flush=True)


QUERIES = {
    "common word": (COMMON, {}),
    "rare word": (RARE, {}),
    "prefix fix*": ("fix*", {}),
    "phrase": (f'"the {COMMON}"', {}),
    "common + cwd": (COMMON, {"cwd": "/repo3"}),
}


async def time_queries(store: SessionStore, calls: int) -> dict[str, float]:
    out = {}
    for name, (query, filters) in QUERIES.items():
        await store.search(query, **filters)  # warm
        samples = []
        for _ in range(calls):
            t = time.perf_counter()
            await store.search(query, limit=20, **filters)
            samples.append(time.perf_counter() - t)
        out[name] = statistics.median(samples) * 1000
    return out


async def batch100(store: SessionStore, count: int = 60, per: int = 100) -> float:
    sid = f"b-{uuid.uuid4().hex[:12]}"
    payloads = [message(i) for i in range(count * per + 1)]
    await store.create(SessionHeader(id=sid, created_at=T0, cwd="/bench"))
    await store.append(sid, [SessionEvent(MESSAGE, 0, T0, payloads[0], surface_op="append")])
    t = clock()
    for first in range(1, count * per + 1, per):
        await store.append(
            sid,
            [
                SessionEvent(MESSAGE, s, T0 + s, payloads[s], surface_op="append")
                for s in range(first, first + per)
            ],
        )
    return count * per / (time.perf_counter() - t)


async def pg_scratch(name: str) -> str:
    admin = await asyncpg.connect(PG_URL.replace("postgresql://", "postgres://"))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return make_url(PG_URL).set(database=name).render_as_string(hide_password=False)


async def pg_drop(name: str) -> None:
    admin = await asyncpg.connect(PG_URL.replace("postgresql://", "postgres://"))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.2f} ({min(values):.2f}-{max(values):.2f})"


async def run_backend(backend: str, args: argparse.Namespace, tmp: Path) -> None:
    names: list[str] = []

    async def url(tag: str) -> str:
        if backend == "sqlite":
            return f"sqlite:///{tmp}/{tag}.db"
        name = f"search_bench_{tag}_{uuid.uuid4().hex[:6]}"
        names.append(name)
        return await pg_scratch(name)

    try:
        if "search" in args.only:
            await search_part(backend, args, url)
        if "cost" in args.only:
            await cost_part(backend, args, url)
        if "catchup" in args.only:
            await catchup_part(backend, args, url)
    finally:
        for name in names:
            await pg_drop(name)


async def search_part(backend: str, args: argparse.Namespace, url: Any) -> None:
    """First-page latencies over ``--sessions`` sessions."""
    big = await url("big")
    print(f"[{backend}] seeding {args.sessions} x {args.events} events", file=sys.stderr)
    t = time.perf_counter()
    async with SessionStore(big) as store:
        await seed(store, args.sessions, args.events)
    if backend == "postgres":  # the statistics autovacuum would gather on a live database
        conn = await asyncpg.connect(big.replace("postgresql://", "postgres://"))
        try:
            await conn.execute("ANALYZE")
        finally:
            await conn.close()
    print(f"[{backend}] seeded in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    rounds: dict[str, list[float]] = {name: [] for name in QUERIES}
    async with SessionStore(big) as store:
        hits = {name: len(await store.search(q, **f)) for name, (q, f) in QUERIES.items()}
        for _ in range(args.rounds):
            for name, ms in (await time_queries(store, 25)).items():
                rounds[name].append(ms)
    print(f"\n{backend}: search, first page (limit 20), ms: median (spread of rounds)")
    for name, values in rounds.items():
        print(f"  {name:14} {spread(values)}   hits on the page: {hits[name]}")


async def cost_part(backend: str, args: argparse.Namespace, url: Any) -> None:
    """batch100 with the index and without, alternating."""
    on, off = await url("on"), await url("off")
    with_index: list[float] = []
    without: list[float] = []
    caught_up: list[float] = []
    async with SessionStore(on) as indexed, SessionStore(off, search_index=False) as plain:
        for _ in range(args.rounds):
            without.append(await batch100(plain))
            with_index.append(await batch100(indexed))
            t = time.perf_counter()
            await indexed.search(COMMON)  # the index brought up to date (what is left of it)
            caught_up.append(6000 / (time.perf_counter() - t))
    ratio = statistics.median(with_index) / statistics.median(without)
    print(f"\n{backend}: batch100 (60 appends of 100 events), events/s")
    print(f"  index off  {spread(without)}")
    print(f"  index on   {spread(with_index)}")
    verdict = "ok" if ratio >= 0.9 else "MISSED"
    print(f"  ratio on/off {ratio:.2f}x (target >= 0.90x: {verdict})")
    print(f"  then a search catching up the round's 6,000 events: {spread(caught_up)} ev/s")


def hold_off_idle_indexing(held: bool) -> None:
    """Keep the stores from catching up in the background (a backlog to measure), or not:
    SQLite's writer thread and PostgreSQL's `IdleIndexer`."""
    from todo_sessions.store import idle_index
    from todo_sessions.store.sqlite import writer as sqlite_writer

    for module in (sqlite_writer, idle_index):
        module.INDEX_IDLE = 1e9 if held else 0.1  # type: ignore[attr-defined]
        module.INDEX_BACKLOG = 1 << 62 if held else 20_000  # type: ignore[attr-defined]


async def append_in(
    store: SessionStore, session_id: str, log: list[SessionEvent], per: int
) -> None:
    """``log`` appended ``per`` events at a time."""
    for i in range(0, len(log), per):
        await store.append(session_id, log[i : i + per])


async def catchup_part(backend: str, args: argparse.Namespace, url: Any) -> None:
    """A first search after ``--backlog`` events left to the index."""
    sessions = args.backlog // 100
    print(f"\n{backend}: first search after {sessions * 100:,} unindexed events, s")
    for per in (100, 10):
        target = await url(f"catchup{per}")
        hold_off_idle_indexing(True)
        rng = random.Random(29)
        words = vocabulary(rng)
        try:
            async with SessionStore(target) as store:
                for start in range(0, sessions, 50):
                    batch = range(start, min(sessions, start + 50))
                    logs = {n: session_events(n, 100, rng, words) for n in batch}
                    for n in batch:
                        await store.create(SessionHeader(id=f"s{n:05d}", created_at=T0, cwd="/r"))

                    await asyncio.gather(
                        *(append_in(store, f"s{n:05d}", logs[n], per) for n in batch)
                    )
        finally:
            hold_off_idle_indexing(False)
        async with SessionStore(target) as store:
            t = time.perf_counter()
            hits = await store.search(COMMON)
            first = time.perf_counter() - t
            t = time.perf_counter()
            await store.search(COMMON)
            second = time.perf_counter() - t
        verdict = "" if backend != "sqlite" else " (target < 5 s: ok)" if first < 5 else " MISSED"
        print(
            f"  appended {per:3} at a time ({sessions * 100 // per:,} appends): first search "
            f"{first:.2f} s{verdict}, the next {second * 1000:.1f} ms, {len(hits)} hits"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--backlog", type=int, default=100_000, help="catchup: events left")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only",
        default="search,cost",
        help="search (the queries), cost (the index's cost), catchup (a first search's)",
    )
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.rounds = min(args.sessions, 1000), 3
    backends = ["sqlite", "postgres"] if args.backend == "all" else [args.backend]
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            await run_backend(backend, args, Path(tmp))


if __name__ == "__main__":
    asyncio.run(main())
