"""`SessionStore` against its baselines, measured in alternating rounds.

Run (from the repository root)::

    .venv/bin/python bench/store_bench.py                   # SQLite, 11 rounds, a few minutes
    .venv/bin/python bench/store_bench.py --quick           # smoke run: 3 short rounds
    .venv/bin/python bench/store_bench.py --rounds 15 --only single,tasks
    .venv/bin/python bench/store_bench.py --stack           # only the stack row
    TODO_SESSIONS_PG_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/store_bench.py --backend all # SQLite, then PostgreSQL

Method. Every row runs the store ("product") and its baseline in alternating rounds: product,
baseline, product, baseline, ... (one untimed warm-up of each first). Every round works on
fresh sessions. A row reports, for both sides, the MEDIAN over the rounds with the p25-p75
spread, the ratio of the two medians (store speed / baseline speed, so above 1 the store is
faster; for the latency row, baseline µs / store µs) and, as a check, the median of the
per-round ratios ("paired"). Never the best run: these machines drift 2-4x within seconds, and
the two runs of a round share most of that drift. Before each timed run the collector is run
once (``gc.collect()``, both sides); it is never paused.

SQLite (the default backend). Three file databases in a temp directory (store, baseline,
aiosqlite), each migrated by ``todo_sessions.migrate`` (identical schema, indexes, triggers);
every connection has journal_mode=WAL, synchronous=FULL, foreign_keys=ON, busy_timeout=5000.
The baseline is plain ``sqlite3`` on the event-loop thread, with the store's exact append
transaction: BEGIN IMMEDIATE; SELECT next_seq, revision, incarnation FROM sessions WHERE id=?;
(seq check); executemany INSERT INTO session_events (all 8 columns); UPDATE sessions SET
revision, next_seq, updated_at; COMMIT. Payloads are dicts built before timing; ``MESSAGE`` is
an ``assistant/message`` with one text block (about 295 bytes of JSON). Per round and side:

- single (500 appends): appends of one event, each durable on its own. Store: ``await
  store.append(id, [SessionEvent(MESSAGE, seq, time, data)])``, which is building the event
  from the dict, the store's validation and the commit. Baseline: ``json.dumps(data,
  separators=(",", ":"), ensure_ascii=False)`` and the transaction, per event.
- batch100 (60 appends): appends of 100 events, the 100 events built from dicts inside the
  timing. Baseline: json.dumps of each, then one transaction.
- tasks N (640 events in all; N = 1, 2, 4, 8, 16): N asyncio tasks, each appending single
  events (built from dicts) to its own session of one store; total events/s. The store commits
  appends that queue up together (group commit: one fsync for the group). Baseline: the same
  events through plain sqlite3, each committed on its own, one after the other.
- read 10k / read 100k: ``await store.read_from(id)`` of a whole session of that many events
  (messages and ``tool/call`` events, a ``todo/write`` every 100th). Baseline: one read
  transaction (BEGIN; the session row's SELECT; the events' SELECT; ROLLBACK, as the store
  does) and ``json.loads`` of each row's data. Each round first seeds a fresh session of each
  size on both sides, untimed (store: ``append`` in batches of 2,000; baseline: one
  executemany of the same rows); they are left in place, so these rows run last.
- current_todos @100k: latency (µs per call; median of 300 calls a round) of ``await
  store.current_todos(id)`` on that round's 100k session. Baseline: ``SELECT seq, data FROM
  session_events WHERE session_id=? AND type='todo/write' ORDER BY seq DESC LIMIT 1`` (the
  same index) and json.loads.
- stack, "store vs aiosqlite statement-by-statement" (500 appends): why store/sqlite/ runs
  whole transactions on threads of its own. Single appends through the store, against
  ``aiosqlite.connect(path, isolation_level=None)`` with the same PRAGMAs running the same
  five statements one ``await`` each (BEGIN IMMEDIATE, ``execute_fetchall`` of the state,
  executemany, UPDATE, COMMIT), as an aiosqlite-based store would, after building and
  validating the same ``SessionEvent`` (``validate_event``). Informational (no target).

PostgreSQL (``--backend postgres|all``): ``TODO_SESSIONS_PG_URL`` (default
postgresql://postgres@127.0.0.1:5432/postgres); the bench creates two scratch databases (store,
baseline), migrates them, and drops them at the end. Rows single, batch100, read 10k/100k as
above; the baseline is plain ``asyncpg`` on one connection with the store's statements
(``SELECT ... FOR UPDATE`` for the state, executemany, UPDATE, in one transaction; reads in
one REPEATABLE READ READ ONLY transaction; seeding by COPY).

Targets (ratio of medians; the same ratios are applied to PostgreSQL): single >= 0.7x,
batch100 >= 0.67x, tasks 8 >= 2x, read >= 1.0x; current_todos @100k < 300 µs (store median).
``--quick`` shrinks every count (reads of 1k and 10k events) and runs 3 rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite
import asyncpg
from sqlalchemy.engine import make_url

from todo_sessions import FORMAT_VERSION, SessionEvent, SessionHeader, SessionStore, migrate
from todo_sessions.core.catalog import validate_event

T0 = 1_764_000_000_000
MESSAGE = "assistant/message"
TEXT = (
    "The fixture opens the database before the migration runs, so the first query sees no "
    "tables; migrate first."
)
SEP = (",", ":")
PRAGMAS = ("busy_timeout = 5000", "journal_mode = WAL", "synchronous = FULL", "foreign_keys = ON")
SQL = {
    "state": "SELECT next_seq, revision, incarnation FROM sessions WHERE id = ?",
    "insert": "INSERT INTO session_events (session_id, seq, type, time, data, surface_op, "
    "source_event_seqs, ignorable) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "update": "UPDATE sessions SET revision = ?, next_seq = ?, updated_at = ? WHERE id = ?",
    "session": "INSERT INTO sessions (id, format_version, created_at, cwd, delegation_depth, "
    "incarnation, revision, next_seq, updated_at) VALUES (?, ?, ?, ?, 0, ?, 0, 0, ?)",
    "header": "SELECT id, format_version, created_at, cwd, parent_session, seed_length, origin, "
    "delegation_depth, title, incarnation, revision, next_seq, updated_at "
    "FROM sessions WHERE id = ?",
    "events": "SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable "
    "FROM session_events WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq",
    "todos": "SELECT seq, data FROM session_events WHERE session_id = ? AND type = 'todo/write' "
    "ORDER BY seq DESC LIMIT 1",
}
NEXT_SEQ = 11  # column of next_seq in SQL["header"]
EVENT_COLUMNS = (
    *("session_id", "seq", "type", "time", "data"),
    *("surface_op", "source_event_seqs", "ignorable"),
)


def _pg(sql: str) -> str:
    """The statement with asyncpg's $1, $2, ... placeholders."""
    parts = sql.split("?")
    return "".join(p + (f"${i}" if i < len(parts) else "") for i, p in enumerate(parts, 1))


PG_SQL = {key: _pg(sql) for key, sql in SQL.items()}
PG_SQL["state"] += " FOR UPDATE"  # the row lock that BEGIN IMMEDIATE gives on SQLite


# -- payloads -----------------------------------------------------------------------------------


def message(i: int) -> dict[str, Any]:
    """An ``assistant/message`` payload with one text block (~300 bytes of JSON)."""
    return {
        "turn": 1 + i // 64,
        "step": 1 + i % 64,
        "message": {
            "id": f"msg_{i:010d}",
            "role": "assistant",
            "content": [{"type": "text", "text": TEXT}],
            "source": {"kind": "model", "provider": "anthropic", "model": "claude-sonnet-4"},
        },
    }


def tool_call(i: int) -> dict[str, Any]:
    args = {"path": "tests/conftest.py", "old": "db = open_db(url)", "new": "await migrate(url)"}
    return {
        "turn": 1 + i // 64,
        "step": 1 + i % 64,
        "callId": f"call_{i:010d}",
        "name": "edit_file",
        "arguments": json.dumps(args),
    }


def todo_write(i: int) -> dict[str, Any]:
    done = i // 100 % 6
    states = ["completed"] * done + ["in_progress"] + ["pending"] * (5 - done)
    return {"todos": [{"content": f"task {k}", "status": s} for k, s in enumerate(states)]}


def log_events(size: int) -> list[SessionEvent]:
    """A session to read: messages and tool calls, a todo/write every 100th event."""
    out = []
    for i in range(size):
        if i % 100 == 99:
            kind, data = "todo/write", todo_write(i)
        elif i % 2:
            kind, data = "tool/call", tool_call(i)
        else:
            kind, data = MESSAGE, message(i)
        op = "append" if kind == MESSAGE else None  # a message is on the surface
        out.append(SessionEvent(kind, i, T0 + i, data, surface_op=op))
    return out


def new_id(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:16]}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def clock() -> float:
    """Start a timed run: the same collector state for every run (the GC stays enabled)."""
    gc.collect()
    return time.perf_counter()


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


# -- the store ----------------------------------------------------------------------------------


class StoreSide:
    """The product: one `SessionStore` (SQLite or PostgreSQL)."""

    def __init__(self, store: SessionStore, payloads: Sequence[dict[str, Any]]) -> None:
        self.store = store
        self.payloads = payloads

    async def session(self) -> str:
        """A fresh, materialised session whose next seq is 1 (untimed)."""
        sid = new_id("s")
        await self.store.create(SessionHeader(id=sid, created_at=T0, cwd="/bench"))
        await self.store.append(
            sid, [SessionEvent(MESSAGE, 0, T0, self.payloads[0], surface_op="append")]
        )
        return sid

    async def single(self, count: int) -> float:
        sid, append, payloads = await self.session(), self.store.append, self.payloads
        t = clock()
        for seq in range(1, count + 1):
            await append(
                sid, [SessionEvent(MESSAGE, seq, T0 + seq, payloads[seq], surface_op="append")]
            )
        return count / (time.perf_counter() - t)

    async def batches(self, count: int, per: int) -> float:
        sid, append, payloads = await self.session(), self.store.append, self.payloads
        t = clock()
        for first in range(1, count * per + 1, per):
            seqs = range(first, first + per)
            await append(
                sid,
                [SessionEvent(MESSAGE, s, T0 + s, payloads[s], surface_op="append") for s in seqs],
            )
        return count * per / (time.perf_counter() - t)

    async def tasks(self, tasks: int, per: int) -> float:
        sids = [await self.session() for _ in range(tasks)]
        append, payloads = self.store.append, self.payloads

        async def writer(sid: str) -> None:
            for seq in range(1, per + 1):
                await append(
                    sid, [SessionEvent(MESSAGE, seq, T0 + seq, payloads[seq], surface_op="append")]
                )

        t = clock()
        await asyncio.gather(*(writer(sid) for sid in sids))
        return tasks * per / (time.perf_counter() - t)

    async def seed(self, events: Sequence[SessionEvent]) -> str:
        sid = new_id("r")
        await self.store.create(SessionHeader(id=sid, created_at=T0, cwd="/bench"))
        for i in range(0, len(events), 2000):
            await self.store.append(sid, events[i : i + 2000])
        return sid

    async def read(self, sid: str, size: int) -> float:
        t = clock()
        events = await self.store.read_from(sid)
        elapsed = time.perf_counter() - t
        if len(events) != size:
            raise RuntimeError(f"store read {len(events)} events, expected {size}")
        return size / elapsed

    async def todos(self, sid: str, calls: int) -> float:
        current_todos, samples = self.store.current_todos, []
        clock()
        for _ in range(calls):
            t = time.perf_counter()
            found = await current_todos(sid)
            samples.append(time.perf_counter() - t)
        if not found:
            raise RuntimeError("store found no todo list")
        return median_us(samples)


# -- plain sqlite3 ------------------------------------------------------------------------------


def sqlite_connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    for pragma in PRAGMAS:
        conn.execute(f"PRAGMA {pragma}")
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        raise RuntimeError(f"{path} is not in WAL mode")
    return conn


class SQLiteSide:
    """The SQLite baseline: plain sqlite3, synchronous, on the event-loop thread."""

    def __init__(self, path: Path, payloads: Sequence[dict[str, Any]]) -> None:
        self.conn = sqlite_connect(path)
        self.payloads = payloads

    def close(self) -> None:
        self.conn.close()

    def append(self, sid: str, first: int, events: Sequence[tuple[str, int, int, Any]]) -> None:
        """The store's append transaction for ``(type, seq, time, data dict)`` events."""
        dumps = json.dumps
        rows = [
            (sid, seq, kind, at, dumps(data, separators=SEP, ensure_ascii=False), None, None, 0)
            for kind, seq, at, data in events
        ]
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            next_seq, revision, _ = conn.execute(SQL["state"], (sid,)).fetchone()
            if next_seq != first:
                raise RuntimeError(f"seq conflict: {first} != {next_seq}")
            conn.executemany(SQL["insert"], rows)
            conn.execute(SQL["update"], (revision + 1, next_seq + len(rows), now_ms(), sid))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def new_session(self) -> str:
        sid = new_id("b")
        self.conn.execute(SQL["session"], (sid, FORMAT_VERSION, T0, "/bench", str(uuid.uuid4()), 0))
        return sid

    async def session(self) -> str:
        sid = self.new_session()
        self.append(sid, 0, [(MESSAGE, 0, T0, self.payloads[0])])
        return sid

    async def single(self, count: int) -> float:
        sid, append, payloads = await self.session(), self.append, self.payloads
        t = clock()
        for seq in range(1, count + 1):
            append(sid, seq, [(MESSAGE, seq, T0 + seq, payloads[seq])])
        return count / (time.perf_counter() - t)

    async def batches(self, count: int, per: int) -> float:
        sid, append, payloads = await self.session(), self.append, self.payloads
        t = clock()
        for first in range(1, count * per + 1, per):
            append(
                sid, first, [(MESSAGE, s, T0 + s, payloads[s]) for s in range(first, first + per)]
            )
        return count * per / (time.perf_counter() - t)

    async def tasks(self, tasks: int, per: int) -> float:
        """The same events as the store's N tasks, each committed on its own, serially."""
        sids = [await self.session() for _ in range(tasks)]
        append, payloads = self.append, self.payloads
        t = clock()
        for seq in range(1, per + 1):
            for sid in sids:
                append(sid, seq, [(MESSAGE, seq, T0 + seq, payloads[seq])])
        return tasks * per / (time.perf_counter() - t)

    async def seed(self, events: Sequence[SessionEvent]) -> str:
        sid = self.new_session()
        rows = [(sid, e.seq, e.type, e.time, e.data_json, None, None, 0) for e in events]
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(SQL["insert"], rows)
            self.conn.execute(SQL["update"], (1, len(rows), now_ms(), sid))
        return sid

    async def read(self, sid: str, size: int) -> float:
        conn, loads = self.conn, json.loads
        t = clock()
        conn.execute("BEGIN")
        try:
            head = conn.execute(SQL["header"], (sid,)).fetchone()
            rows = conn.execute(SQL["events"], (sid, 0, head[NEXT_SEQ])).fetchall()
        finally:
            conn.execute("ROLLBACK")
        events = [(s, k, at, loads(d), op, ss, ig) for s, k, at, d, op, ss, ig in rows]
        elapsed = time.perf_counter() - t
        if len(events) != size:
            raise RuntimeError(f"baseline read {len(events)} events, expected {size}")
        return size / elapsed

    async def todos(self, sid: str, calls: int) -> float:
        execute, loads, query, samples = self.conn.execute, json.loads, SQL["todos"], []
        clock()
        for _ in range(calls):
            t = time.perf_counter()
            _, data = execute(query, (sid,)).fetchone()
            found = loads(data)["todos"]
            samples.append(time.perf_counter() - t)
        if not found:
            raise RuntimeError("baseline found no todo list")
        return median_us(samples)


# -- aiosqlite, statement by statement ------------------------------------------------------


class AiosqliteSide:
    """What an aiosqlite-based store would do: one ``await`` (one thread hop) per statement."""

    def __init__(self, conn: aiosqlite.Connection, payloads: Sequence[dict[str, Any]]) -> None:
        self.conn = conn
        self.payloads = payloads

    @classmethod
    async def open(cls, path: Path, payloads: Sequence[dict[str, Any]]) -> AiosqliteSide:
        conn = await aiosqlite.connect(path, isolation_level=None, timeout=5.0)
        for pragma in PRAGMAS:
            await conn.execute(f"PRAGMA {pragma}")
        return cls(conn, payloads)

    async def append(self, sid: str, event: SessionEvent) -> None:
        conn = self.conn
        await conn.execute("BEGIN IMMEDIATE")
        try:
            ((next_seq, revision, _),) = await conn.execute_fetchall(SQL["state"], (sid,))
            if next_seq != event.seq:
                raise RuntimeError(f"seq conflict: {event.seq} != {next_seq}")
            row = (sid, event.seq, event.type, event.time, event.data_json, None, None, 0)
            await conn.executemany(SQL["insert"], [row])
            await conn.execute(SQL["update"], (revision + 1, next_seq + 1, now_ms(), sid))
            await conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                await conn.execute("ROLLBACK")
            raise

    async def session(self) -> str:
        sid = new_id("a")
        args = (sid, FORMAT_VERSION, T0, "/bench", str(uuid.uuid4()), 0)
        await self.conn.execute(SQL["session"], args)
        await self.append(sid, SessionEvent(MESSAGE, 0, T0, self.payloads[0], surface_op="append"))
        return sid

    async def single(self, count: int) -> float:
        sid, append, payloads = await self.session(), self.append, self.payloads
        t = clock()
        for seq in range(1, count + 1):
            event = SessionEvent(MESSAGE, seq, T0 + seq, payloads[seq], surface_op="append")
            validate_event(event)
            await append(sid, event)
        return count / (time.perf_counter() - t)


# -- plain asyncpg --------------------------------------------------------------------------


class PGSide:
    """The PostgreSQL baseline: plain asyncpg on one connection, the store's statements."""

    def __init__(self, conn: asyncpg.Connection, payloads: Sequence[dict[str, Any]]) -> None:
        self.conn = conn
        self.payloads = payloads

    async def append(
        self, sid: str, first: int, events: Sequence[tuple[str, int, int, Any]]
    ) -> None:
        dumps = json.dumps
        rows = [
            (sid, seq, kind, at, dumps(data, separators=SEP, ensure_ascii=False), None, None, False)
            for kind, seq, at, data in events
        ]
        conn = self.conn
        async with conn.transaction():
            next_seq, revision, _ = await conn.fetchrow(PG_SQL["state"], sid)
            if next_seq != first:
                raise RuntimeError(f"seq conflict: {first} != {next_seq}")
            await conn.executemany(PG_SQL["insert"], rows)
            await conn.execute(PG_SQL["update"], revision + 1, next_seq + len(rows), now_ms(), sid)

    async def new_session(self) -> str:
        sid = new_id("b")
        args = (sid, FORMAT_VERSION, T0, "/bench", str(uuid.uuid4()), 0)
        await self.conn.execute(PG_SQL["session"], *args)
        return sid

    async def session(self) -> str:
        sid = await self.new_session()
        await self.append(sid, 0, [(MESSAGE, 0, T0, self.payloads[0])])
        return sid

    async def single(self, count: int) -> float:
        sid, append, payloads = await self.session(), self.append, self.payloads
        t = clock()
        for seq in range(1, count + 1):
            await append(sid, seq, [(MESSAGE, seq, T0 + seq, payloads[seq])])
        return count / (time.perf_counter() - t)

    async def batches(self, count: int, per: int) -> float:
        sid, append, payloads = await self.session(), self.append, self.payloads
        t = clock()
        for first in range(1, count * per + 1, per):
            seqs = range(first, first + per)
            await append(sid, first, [(MESSAGE, s, T0 + s, payloads[s]) for s in seqs])
        return count * per / (time.perf_counter() - t)

    async def seed(self, events: Sequence[SessionEvent]) -> str:
        sid = await self.new_session()
        rows = [(sid, e.seq, e.type, e.time, e.data_json, None, None, False) for e in events]
        async with self.conn.transaction():
            await self.conn.copy_records_to_table(
                "session_events",
                records=rows,
                columns=EVENT_COLUMNS,
            )
            await self.conn.execute(PG_SQL["update"], 1, len(rows), now_ms(), sid)
        return sid

    async def read(self, sid: str, size: int) -> float:
        conn, loads = self.conn, json.loads
        t = clock()
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            head = await conn.fetchrow(PG_SQL["header"], sid)
            rows = await conn.fetch(PG_SQL["events"], sid, 0, head["next_seq"])
        events = [(s, k, at, loads(d), op, ss, ig) for s, k, at, d, op, ss, ig in rows]
        elapsed = time.perf_counter() - t
        if len(events) != size:
            raise RuntimeError(f"baseline read {len(events)} events, expected {size}")
        return size / elapsed


# -- rounds and rows ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    label: str
    check: Callable[[Result], bool]


@dataclass
class Result:
    name: str
    unit: str  # "ev/s" (higher is better) or "µs" (lower is better)
    product: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)
    target: Target | None = None

    def speedup(self, product: float, baseline: float) -> float:
        """Store speed / baseline speed."""
        return baseline / product if self.unit == "µs" else product / baseline

    @property
    def ratio(self) -> float:
        return self.speedup(statistics.median(self.product), statistics.median(self.baseline))

    @property
    def paired(self) -> float:
        pairs = zip(self.product, self.baseline, strict=True)
        return statistics.median(self.speedup(p, b) for p, b in pairs)


def at_least(ratio: float) -> Target:
    return Target(f">= {ratio:.2f}x", lambda r: r.ratio >= ratio)


def under_us(limit: float) -> Target:
    return Target(f"< {limit:.0f} µs", lambda r: statistics.median(r.product) < limit)


TARGETS = {
    "single": at_least(0.7),
    "batch100": at_least(0.67),
    "tasks 8": at_least(2.0),
    "read": at_least(1.0),
    "current_todos": under_us(300),
}

Timed = Callable[[], Awaitable[float]]


def progress(text: str) -> None:
    print(text, end="", file=sys.stderr, flush=True)


async def alternate(result: Result, rounds: int, product: Timed, baseline: Timed) -> Result:
    """One untimed warm-up of each side, then ``rounds`` x (product, baseline)."""
    started = time.perf_counter()
    await product()
    await baseline()
    for _ in range(rounds):
        result.product.append(await product())
        result.baseline.append(await baseline())
        progress(".")
    progress(f" {result.name} ({time.perf_counter() - started:.0f} s)\n")
    return result


@dataclass(frozen=True)
class Sizes:
    single: int
    batches: int
    tasks_total: int
    reads: tuple[int, ...]
    todo_calls: int

    @classmethod
    def of(cls, quick: bool) -> Sizes:
        if quick:
            return cls(
                single=100, batches=10, tasks_total=160, reads=(1_000, 10_000), todo_calls=50
            )
        return cls(single=500, batches=60, tasks_total=640, reads=(10_000, 100_000), todo_calls=300)

    @property
    def payload_count(self) -> int:
        return 1 + max(self.single, self.batches * 100, self.tasks_total)


TASKS = (1, 2, 4, 8, 16)


async def append_rows(
    product: Any, baseline: Any, sizes: Sizes, rounds: int, only: set[str], tasks: bool
) -> list[Result]:
    """single, batch100 and (``tasks``) tasks N; ``product`` and ``baseline`` are sides above."""
    plan: list[tuple[str, Timed, Timed]] = []
    if "single" in only:
        count = sizes.single
        plan.append(("single", lambda: product.single(count), lambda: baseline.single(count)))
    if "batch100" in only:
        batches = sizes.batches
        plan.append(
            (
                "batch100",
                lambda: product.batches(batches, 100),
                lambda: baseline.batches(batches, 100),
            )
        )
    if tasks and "tasks" in only:
        for n in TASKS:
            per = sizes.tasks_total // n
            plan.append(
                (
                    f"tasks {n}",
                    lambda n=n, per=per: product.tasks(n, per),
                    lambda n=n, per=per: baseline.tasks(n, per),
                )
            )
    return [
        await alternate(Result(name, "ev/s", target=TARGETS.get(name)), rounds, p, b)
        for name, p, b in plan
    ]


def size_label(size: int) -> str:
    return f"{size // 1000}k"


async def read_rows(
    product: Any, baseline: Any, sizes: Sizes, rounds: int, todos: bool
) -> list[Result]:
    """Reads, and current_todos on the largest session. Each round both sides first seed a fresh
    session of every size (untimed), then each row runs product, baseline. The sessions are
    left in place (deleting 100k rows costs more than the reads; the temp files go at the end).
    """
    started = time.perf_counter()
    largest = max(sizes.reads)
    reads = {
        size: Result(f"read {size_label(size)}", "ev/s", target=TARGETS["read"])
        for size in sizes.reads
    }
    latest = Result(f"current_todos @{size_label(largest)}", "µs", target=TARGETS["current_todos"])
    warm = log_events(1_000)
    for side in (product, baseline):  # warm-up: connections, statement caches, code paths
        sid = await side.seed(warm)
        await side.read(sid, len(warm))
        if todos:
            await side.todos(sid, 10)
    logs = {size: log_events(size) for size in sizes.reads}
    for _ in range(rounds):
        sids = {}
        for size, log in logs.items():
            sids[size] = (await product.seed(log), await baseline.seed(log))
        for size, (p_sid, b_sid) in sids.items():
            reads[size].product.append(await product.read(p_sid, size))
            reads[size].baseline.append(await baseline.read(b_sid, size))
        if todos:
            p_sid, b_sid = sids[largest]
            latest.product.append(await product.todos(p_sid, sizes.todo_calls))
            latest.baseline.append(await baseline.todos(b_sid, sizes.todo_calls))
        progress(".")
    progress(f" reads ({time.perf_counter() - started:.0f} s)\n")
    return [*reads.values(), *([latest] if todos else [])]


ROWS = ("single", "batch100", "tasks", "read", "todos", "stack")


async def bench_sqlite(sizes: Sizes, rounds: int, only: set[str]) -> list[Result]:
    """All SQLite rows; the reads run last, as they leave big sessions behind."""
    payloads = [message(i) for i in range(sizes.payload_count)]
    with tempfile.TemporaryDirectory(prefix="todo-sessions-bench-") as tmp:
        paths = {side: Path(tmp, f"{side}.db") for side in ("store", "base", "aio")}
        for path in paths.values():
            await migrate(f"sqlite:///{path}")
        store = SessionStore(paths["store"], migrate=False, journal_mode="WAL", synchronous="FULL")
        async with store:
            product, baseline = StoreSide(store, payloads), SQLiteSide(paths["base"], payloads)
            try:
                out = await append_rows(product, baseline, sizes, rounds, only, tasks=True)
                stack: list[Result] = []
                if "stack" in only:
                    aio = await AiosqliteSide.open(paths["aio"], payloads)
                    try:
                        run = Result("stack: store vs aiosqlite statement-by-statement", "ev/s")
                        count = sizes.single
                        single, aio_single = product.single, aio.single
                        await alternate(
                            run, rounds, lambda: single(count), lambda: aio_single(count)
                        )
                        stack.append(run)
                    finally:
                        await aio.conn.close()
                if only & {"read", "todos"}:
                    reads = await read_rows(product, baseline, sizes, rounds, "todos" in only)
                    out += [r for r in reads if "read" in only or not r.name.startswith("read")]
            finally:
                baseline.close()
    return out + stack


async def bench_postgres(sizes: Sizes, rounds: int, only: set[str]) -> tuple[str, list[Result]]:
    payloads = [message(i) for i in range(sizes.payload_count)]
    default = "postgresql://postgres@127.0.0.1:5432/postgres"
    url = make_url(os.environ.get("TODO_SESSIONS_PG_URL", default)).set(drivername="postgresql")
    names = [f"ts_bench_{os.getpid()}_{side}" for side in ("store", "base")]
    store_url, base_url = (url.set(database=n).render_as_string(False) for n in names)
    admin = await asyncpg.connect(url.render_as_string(hide_password=False))
    try:
        for name in names:
            await admin.execute(f'CREATE DATABASE "{name}"')
        for db_url in (store_url, base_url):
            await migrate(db_url)
        async with SessionStore(store_url, migrate=False) as store:
            conn = await asyncpg.connect(base_url)
            try:
                version = await conn.fetchval("SHOW server_version")
                product, baseline = StoreSide(store, payloads), PGSide(conn, payloads)
                out = await append_rows(product, baseline, sizes, rounds, only, tasks=False)
                if "read" in only:
                    out += await read_rows(product, baseline, sizes, rounds, todos=False)
            finally:
                await conn.close()
    finally:
        for name in names:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    return f"postgresql {version}, asyncpg {asyncpg.__version__}", out


# -- report -------------------------------------------------------------------------------------


def spread(values: list[float], unit: str) -> str:
    p25, p50, p75 = (
        statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    )
    fmt = "{:,.1f}" if unit == "µs" else "{:,.0f}"
    return f"{fmt.format(p50)} [{fmt.format(p25)}-{fmt.format(p75)}]"


def print_table(title: str, baseline: str, results: list[Result]) -> None:
    head = ("row", "unit", "store median [p25-p75]", f"{baseline} median [p25-p75]")
    lines = [(*head, "ratio", "paired", "target")]
    for r in results:
        if r.target is None:
            target = "(info)"
        else:
            target = f"{r.target.label}  {'PASS' if r.target.check(r) else 'MISS'}"
        lines.append(
            (
                r.name,
                r.unit,
                spread(r.product, r.unit),
                spread(r.baseline, r.unit),
                f"{r.ratio:.2f}x",
                f"{r.paired:.2f}x",
                target,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) + 3)]
    lines.insert(1, tuple("-" * w for w in widths))
    print(f"\n== {title} ==")
    for line in lines:
        cells = (f"{c:{a}{w}}" for c, a, w in zip(line, "<<>>>><", widths, strict=True))
        print("  ".join(cells).rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("sqlite", "postgres", "all"), default="sqlite")
    parser.add_argument("--rounds", type=int, help="alternating rounds per row (11; --quick: 3)")
    parser.add_argument("--quick", action="store_true", help="small counts, 3 rounds (smoke run)")
    parser.add_argument(
        "--only", help=f"comma-separated rows to run, of: {','.join(ROWS)} (default: all)"
    )
    parser.add_argument("--stack", action="store_true", help="only the stack row (--only stack)")
    args = parser.parse_args()
    rounds = args.rounds or (3 if args.quick else 11)
    only = {"stack"} if args.stack else set(args.only.split(",")) if args.only else set(ROWS)
    if unknown := only - set(ROWS):
        parser.error(f"unknown rows {sorted(unknown)}; choose from {','.join(ROWS)}")
    sizes = Sizes.of(args.quick)
    print(
        f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, "
        f"aiosqlite {aiosqlite.__version__}, {platform.platform()}, {os.cpu_count()} CPUs, "
        f"temp dir {tempfile.gettempdir()}"
    )
    print(
        f"{'quick' if args.quick else 'full'} run: median of {rounds} alternating rounds "
        "(store, baseline, store, ...), fresh sessions each round; "
        "ratio = store speed / baseline speed of the medians, paired = median of per-round ratios"
    )
    started = time.perf_counter()
    if args.backend in ("sqlite", "all"):
        results = asyncio.run(bench_sqlite(sizes, rounds, only))
        print_table(
            "SQLite file, WAL, synchronous=FULL: store vs plain sqlite3", "baseline", results
        )
    if args.backend in ("postgres", "all"):
        versions, results = asyncio.run(bench_postgres(sizes, rounds, only))
        print_table(f"PostgreSQL ({versions}): store vs plain asyncpg", "baseline", results)
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
