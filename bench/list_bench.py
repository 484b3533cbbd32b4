"""`SessionStore.list` with each filter over 10,000 sessions of 100 events each.

Run (from the repository root)::

    .venv/bin/python bench/list_bench.py                       # SQLite, 11 rounds
    .venv/bin/python bench/list_bench.py --quick               # 1,000 sessions, 3 rounds
    .venv/bin/python bench/list_bench.py --keep /tmp/list.db   # build once, reuse the file
    TODO_SESSIONS_PG_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/list_bench.py --backend all     # SQLite, then PostgreSQL

The population (built once, untimed, through ``store.append``: one append of 100 events per
session, 200 sessions at a time): 10,000 sessions of 100 events each (a turn with a user
message, chunks, assistant messages, tool calls and results, three ``todo/write`` events, a
``session/meta``), so 1,000,000 event rows. Session i has cwd ``/src/project-{i % 20}``; 0 to
3 of 12 tags; a parent (one of 50 sessions) for every 10th; open todos for 2 in 5; a title with
one of 40 words. Appends run concurrently, so their ``updated_at`` are real times, with ties.

Rows: each filter alone (cwd, tag, since, until, since+until, parent, open todos, no open todos,
text) and a few combinations, against no filter. For each, "first page" is ``list(limit=100,
**filter)``; "deeper page" is the page after the filter's 1,000th session (``before=`` that
summary; the filter's last page when it matches fewer). Method: every round times each row
once, as the median of 5 calls, in an order that alternates (forward, then backward) from
round to round, after one untimed warm-up call; ``gc.collect()`` before each timing. A row
reports the median over the rounds, the p25-p75 spread, and how many sessions the filter
matches. Target: at most 20 ms per page of 100 on SQLite (median).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from todo_sessions import SessionEvent, SessionHeader, SessionStore, SessionSummary

T0 = 1_764_000_000_000
WORDS = [f"word{k}" for k in range(38)] + ["Refactor", "Straße"]
TAGS = [f"tag-{k}" for k in range(12)]
TARGET_MS = 20.0
CALLS = 5


def session_events(i: int, size: int) -> list[SessionEvent]:
    """``size`` events of one session: a turn of messages, tool calls and todo writes."""
    status = "in_progress" if i % 5 in (1, 3) else "completed"
    out: list[SessionEvent] = []

    def add(kind: str, data: dict[str, Any], **extra: Any) -> None:
        out.append(SessionEvent(kind, len(out), T0 + len(out), data, **extra))

    add("turn/start", {"turn": 1})
    user = {"id": f"u{i}", "role": "user", "source": {"kind": "user"}}
    add("user/message", {**user, "content": [{"type": "text", "text": "go"}]}, surface_op="append")
    add("todo/write", {"todos": [{"content": "plan", "status": "in_progress"}]})
    add("session/meta", {"tags": [TAGS[(i + k) % 12] for k in range(i % 4)]})
    step = 0
    while len(out) < size - 4:
        step += 1
        add("step/start", {"turn": 1, "step": step})
        for _ in range(6):
            chunk = {"type": "text-delta", "index": 0, "text": "some streamed text " * 2}
            add("assistant/chunk", {"turn": 1, "step": step, "chunk": chunk})
        message = {
            "id": f"a{i}.{step}",
            "role": "assistant",
            "content": [{"type": "text", "text": "done with this step"}],
            "source": {"kind": "model", "provider": "p", "model": "m"},
        }
        usage = {"input_tokens": 100, "output_tokens": 20}
        add(
            "assistant/message",
            {"turn": 1, "step": step, "message": message, "usage": usage},
            surface_op="append",
        )
        add("step/end", {"turn": 1, "step": step})
    while len(out) < size - 2:
        add("todo/write", {"todos": [{"content": "plan", "status": "in_progress"}]})
    add("todo/write", {"todos": [{"content": "plan", "status": status}]})
    add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return out


def session_header(i: int) -> SessionHeader:
    parent = f"s{(i // 10) % 50 * 10:05d}" if i % 10 == 5 else None
    return SessionHeader(
        id=f"s{i:05d}",
        created_at=T0 + i,
        cwd=f"/src/project-{i % 20}",
        parent_session=parent,
        title=f"Session {i}: {WORDS[i % len(WORDS)]} the parser",
    )


async def build(store: SessionStore, count: int, size: int) -> None:
    async def one(i: int) -> None:
        await store.create(session_header(i))
        await store.append(f"s{i:05d}", session_events(i, size))

    started = time.perf_counter()
    for start in range(0, count, 200):
        await asyncio.gather(*(one(i) for i in range(start, min(count, start + 200))))
        if start % 2000 == 0:
            print(f"  built {start + 200:,} sessions ({time.perf_counter() - started:.0f} s)")


async def rows_for(store: SessionStore) -> dict[str, dict[str, Any]]:
    times = []
    before = None
    while page := await store.list(limit=1000, before=before):
        times += [s.updated_at for s in page]
        before = page[-1]
    times.sort()
    early, late = times[len(times) // 4], times[3 * len(times) // 4]
    return {
        "no filter": {},
        "cwd": {"cwd": "/src/project-7"},
        "tag": {"tag": "tag-3"},
        "since (newest 3/4)": {"since": early},
        "until (oldest 3/4)": {"until": late},
        "since + until (middle half)": {"since": early, "until": late},
        "parent": {"parent": "s00120"},
        "open todos": {"has_open_todos": True},
        "no open todos": {"has_open_todos": False},
        "text (1 title in 40)": {"text": "STRASSE"},
        "text (no match)": {"text": "no such title"},
        "cwd + tag + open todos": {"cwd": "/src/project-3", "tag": "tag-1", "has_open_todos": True},
        "tag + text": {"tag": "tag-5", "text": "refactor"},
        "all seven": {
            "cwd": "/src/project-1",
            "tag": "tag-2",
            "since": early,
            "until": late,
            "parent": "s00010",
            "has_open_todos": False,
            "text": "parser",
        },
    }


async def deeper_before(store: SessionStore, filters: dict[str, Any]) -> SessionSummary | None:
    """The summary the "deeper page" starts after: the filter's 1,000th session, or the one
    before its last page."""
    found: list[SessionSummary] = []
    before = None
    while len(found) < 1000:
        page = await store.list(limit=100, before=before, **filters)
        if not page:
            break
        found += page
        before = page[-1]
        if len(page) < 100:
            break
    if len(found) >= 1000:
        return found[999]
    if len(found) > 100:
        return found[(len(found) - 1) // 100 * 100 - 1]
    return None


async def count_of(store: SessionStore, filters: dict[str, Any]) -> int:
    total, before = 0, None
    while page := await store.list(limit=1000, before=before, **filters):
        total += len(page)
        before = page[-1]
    return total


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    samples = []
    for _ in range(CALLS):
        gc.collect()
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.2f}"
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):7.2f} [{q[0]:.2f}-{q[2]:.2f}]"


async def run(url: str, label: str, count: int, size: int, rounds: int, build_it: bool) -> bool:
    async with SessionStore(url, synchronous="NORMAL") as builder:
        if build_it:
            print(f"building {count:,} sessions of {size} events on {label} ...")
            await build(builder, count, size)
    async with SessionStore(url) as store:
        rows = await rows_for(store)
        cases: list[tuple[str, Callable[[], Awaitable[Any]]]] = []
        matched: dict[str, int] = {}
        for name, filters in rows.items():
            matched[name] = await count_of(store, filters)
            cases.append((f"{name}: first page", lambda f=filters: store.list(limit=100, **f)))
            deeper = await deeper_before(store, filters)
            if deeper is not None:
                cases.append(
                    (
                        f"{name}: deeper page",
                        lambda f=filters, b=deeper: store.list(limit=100, before=b, **f),
                    )
                )
        for _, call in cases:  # warm-up
            await call()
        results: dict[str, list[float]] = {name: [] for name, _ in cases}
        for r in range(rounds):
            order = cases if r % 2 == 0 else cases[::-1]
            for name, call in order:
                results[name].append(await timed(call))
            print(".", end="", flush=True)
        print()
    print(f"\n== {label}: list(limit=100) over {count:,} sessions of {size} events ==")
    width = max(len(name) for name in results)
    print(f"{'row':<{width}}  {'matches':>7}  {'ms per page: median [p25-p75]':>30}  target")
    print(f"{'-' * width}  -------  {'-' * 30}  ------")
    ok = True
    for name, values in results.items():
        median = statistics.median(values)
        verdict = "PASS" if median <= TARGET_MS else "MISS"
        ok = ok and median <= TARGET_MS
        base = name.rsplit(":", 1)[0]
        print(f"{name:<{width}}  {matched[base]:>7,}  {spread(values):>30}  {verdict}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "all"), default="sqlite")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--quick", action="store_true", help="1,000 sessions, 3 rounds")
    parser.add_argument("--keep", type=Path, help="SQLite file to build once and reuse")
    args = parser.parse_args()
    count, rounds = (1000, 3) if args.quick else (args.sessions, args.rounds)
    print(
        f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, "
        f"{platform.platform()}, {os.cpu_count()} CPUs"
    )
    started = time.perf_counter()
    ok = True
    if args.backend in ("sqlite", "all"):
        with tempfile.TemporaryDirectory() as tmp:
            path = args.keep or Path(tmp) / "list.db"
            fresh = not path.exists()
            ok &= asyncio.run(
                run(f"sqlite:///{path}", "SQLite file", count, args.events, rounds, fresh)
            )
    if args.backend in ("postgres", "all"):
        server = os.environ.get(
            "TODO_SESSIONS_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        )
        name = f"todo_sessions_list_bench_{uuid.uuid4().hex[:8]}"
        admin = make_url(server)
        asyncio.run(_admin(admin, f'CREATE DATABASE "{name}"'))
        try:
            url = admin.set(database=name).render_as_string(hide_password=False)
            ok &= asyncio.run(run(url, "PostgreSQL", count, args.events, rounds, True))
        finally:
            asyncio.run(_admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    sys.exit(0 if ok else 1)


async def _admin(url: Any, statement: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(
        url.set(drivername="postgresql").render_as_string(hide_password=False)
    )
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


if __name__ == "__main__":
    main()
