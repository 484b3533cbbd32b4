"""Throughput of `SessionStore` against a plain-driver baseline running the same SQL.

Run:  python bench/store_bench.py [--backend sqlite|postgres|all] [--quick] [--reps N]

PostgreSQL: ``TODO_SESSIONS_PG_URL`` (default postgresql://postgres@127.0.0.1:5432/postgres),
in two scratch databases the bench creates and drops; SQLite: two files in a temp directory. Store
and baseline get one database each, migrated by ``todo_sessions.migrate`` (identical schema,
indexes, triggers). Events/second, best of ``--reps`` interleaved runs, each on a fresh session:

- single: one ``assistant/chunk`` event (~60 chars of text) per append, one commit each;
- batch100: 100 events per append;
- read_from Nk: ``read_from(id)`` of a whole N-event session (10k/100k; 1k/10k with --quick).

Baselines: plain ``sqlite3`` with the store's settings (WAL, synchronous=FULL, foreign_keys=ON,
busy_timeout) and transaction shape (BEGIN IMMEDIATE; SELECT next_seq, revision, incarnation;
executemany INSERT; UPDATE sessions; COMMIT), or plain ``asyncpg`` with the same statements
(SELECT ... FOR UPDATE) per append. Both write the same pre-built events' ``data_json`` unchecked,
so append ratios are all the store's overhead beyond the SQL. Reads run the same two SELECTs in one
transaction and ``json.loads`` each row's data (the least that yields usable events); a second,
informational ratio is against the raw fetch alone. Everything is warmed up before timing.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import os
import platform
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

from todo_sessions import FORMAT_VERSION, SessionEvent, SessionHeader, SessionStore, migrate

T0 = 1_764_000_000_000
TEXT = "The quick brown fox jumps over the lazy dog, then naps. 0123"  # 60 chars
TARGETS = {"single": (0.6, "0.6x (aim 0.7x)"), "batch100": (0.5, "0.5x"), "read": (0.75, "0.75x")}
PRAGMAS = ("busy_timeout=5000", "journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON")
SQL = {
    "state": "SELECT next_seq, revision, incarnation FROM sessions WHERE id = ?",
    "insert": "INSERT INTO session_events (session_id, seq, type, time, data, surface_op, "
    "source_event_seqs, ignorable) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "update": "UPDATE sessions SET next_seq = ?, revision = ?, updated_at = ? WHERE id = ?",
    "session": "INSERT INTO sessions (id, format_version, created_at, cwd, delegation_depth, "
    "incarnation, revision, next_seq, updated_at) VALUES (?, ?, ?, ?, 0, ?, 0, 0, ?)",
    "header": "SELECT * FROM sessions WHERE id = ?",
    "events": "SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable "
    "FROM session_events WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq",
}
# asyncpg placeholders are $1, $2...; PostgreSQL takes the row lock that BEGIN IMMEDIATE gives
PG_SQL = {k: v.replace("?", "{}").format(*(f"${i}" for i in range(1, 9))) for k, v in SQL.items()}
PG_SQL["state"] += " FOR UPDATE"


def chunk_events(start: int, count: int) -> list[SessionEvent]:
    """Realistic streaming chunks: ``assistant/chunk`` with ~60 characters of text."""
    data = {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": TEXT}}
    return [SessionEvent("assistant/chunk", s, T0 + s, data) for s in range(start, start + count)]


def rows_of(session_id: str, events: Sequence[SessionEvent]) -> list[tuple[Any, ...]]:
    return [(session_id, e.seq, e.type, e.time, e.data_json, None, None, False) for e in events]


def session_args(session_id: str) -> tuple[Any, ...]:
    return (session_id, FORMAT_VERSION, T0, "/bench", str(uuid.uuid4()), time.time_ns() // 10**6)


def decoded(rows: Sequence[Sequence[Any]], decode: bool) -> list[Any]:
    """A baseline's read result: the rows with ``data`` JSON-decoded (or just as fetched)."""
    if not decode:
        return list(rows)
    loads = json.loads
    return [(s, t, tm, loads(d), op, ss, ig) for s, t, tm, d, op, ss, ig in rows]


class StoreSide:
    def __init__(self, store: SessionStore) -> None:
        self.store = store

    async def start(self, session_id: str) -> None:
        await self.store.create(SessionHeader(id=session_id, created_at=T0, cwd="/bench"))

    async def append(self, session_id: str, events: Sequence[SessionEvent]) -> None:
        await self.store.append(session_id, events)

    async def read(self, session_id: str) -> list[Any]:
        return await self.store.read_from(session_id)


class SQLiteSide:
    """Plain sqlite3 (synchronous, on the event loop thread) with the store's settings."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
        for pragma in PRAGMAS:
            self.conn.execute(f"PRAGMA {pragma}")
        self.decode = True

    async def start(self, session_id: str) -> None:
        self.conn.execute(SQL["session"], session_args(session_id))

    async def append(self, session_id: str, events: Sequence[SessionEvent]) -> None:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        with conn:  # COMMIT, or ROLLBACK on error
            next_seq, revision, _ = conn.execute(SQL["state"], (session_id,)).fetchone()
            conn.executemany(SQL["insert"], rows_of(session_id, events))
            args = (next_seq + len(events), revision + 1, time.time_ns() // 10**6, session_id)
            conn.execute(SQL["update"], args)

    async def read(self, session_id: str) -> list[Any]:
        conn = self.conn
        conn.execute("BEGIN")
        with conn:
            cur = conn.execute(SQL["header"], (session_id,))
            head = dict(zip((d[0] for d in cur.description), cur.fetchone(), strict=True))
            rows = conn.execute(SQL["events"], (session_id, 0, head["next_seq"])).fetchall()
        return decoded(rows, self.decode)


class PGSide:
    """Plain asyncpg on one connection, the store's statements."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.decode = True

    async def start(self, session_id: str) -> None:
        await self.conn.execute(PG_SQL["session"], *session_args(session_id))

    async def append(self, session_id: str, events: Sequence[SessionEvent]) -> None:
        conn = self.conn
        async with conn.transaction():
            next_seq, revision, _ = await conn.fetchrow(PG_SQL["state"], session_id)
            await conn.executemany(PG_SQL["insert"], rows_of(session_id, events))
            args = (next_seq + len(events), revision + 1, time.time_ns() // 10**6, session_id)
            await conn.execute(PG_SQL["update"], *args)

    async def read(self, session_id: str) -> list[Any]:
        conn = self.conn
        async with conn.transaction():
            head = await conn.fetchrow(PG_SQL["header"], session_id)
            rows = await conn.fetch(PG_SQL["events"], session_id, 0, head["next_seq"])
        return decoded(rows, self.decode)


Side = StoreSide | SQLiteSide | PGSide  # each: start(id), append(id, events), read(id)


def clock() -> float:
    gc.collect()  # every timed run starts from the same collector state (GC stays enabled)
    return time.perf_counter()


async def seeded(side: Side, tag: str, total: int, batch: int = 1000) -> str:
    sid = f"{tag}-{uuid.uuid4().hex[:12]}"
    await side.start(sid)
    for start in range(0, total, batch):
        await side.append(sid, chunk_events(start, min(batch, total - start)))
    return sid


async def append_rate(side: Side, events: list[SessionEvent], per: int) -> float:
    """Events/s appending ``events[1:]``, ``per`` each, to a fresh session (materialised first)."""
    sid = await seeded(side, "w", 1)
    batches = [events[i : i + per] for i in range(1, len(events), per)]
    t = clock()
    for batch in batches:
        await side.append(sid, batch)
    return (len(events) - 1) / (time.perf_counter() - t)


async def read_rate(side: Side, sid: str, size: int) -> float:
    t = clock()
    n = len(await side.read(sid))
    elapsed = time.perf_counter() - t
    if n != size:
        raise RuntimeError(f"read {n} events, expected {size}")
    return size / elapsed


Row = tuple[str, float, float, str]  # scenario, store ev/s, baseline ev/s, target key


async def compare(store: Side, base: SQLiteSide | PGSide, quick: bool, reps: int) -> list[Row]:
    """All scenarios; ``raw`` is the baseline on its connection reading without JSON decoding."""
    raw = copy.copy(base)
    raw.decode = False
    k = 1 if quick else 10  # scale: 200 single appends, 2k batched events, 1k/10k-event reads
    for side in (store, base):  # warm-up: connections, statement caches, code paths
        await append_rate(side, chunk_events(0, 51), 1)
        await append_rate(side, chunk_events(0, 501), 100)
        warm = await seeded(side, "warm", 1_000)
        await side.read(warm)
    await raw.read(warm)
    out: list[Row] = []
    for name, count, per in (("single", 200 * k, 1), ("batch100", 2_000 * k, 100)):
        events = chunk_events(0, count + 1)
        best = [0.0, 0.0]
        for _ in range(reps):
            for i, side in enumerate((store, base)):
                best[i] = max(best[i], await append_rate(side, events, per))
        out.append((f"{name} ({count:,} ev)", best[0], best[1], name))
    for size in (1_000 * k, 10_000 * k):
        sids = [await seeded(store, "r", size), await seeded(base, "r", size)]
        best = [0.0, 0.0, 0.0]
        for _ in range(reps):
            for i, (side, sid) in enumerate(zip((store, base, raw), sids + sids[1:], strict=True)):
                best[i] = max(best[i], await read_rate(side, sid, size))
        label = f"read_from {size // 1000}k"
        out.append((f"{label} vs fetch+json.loads", best[0], best[1], "read"))
        out.append((f"{label} vs raw fetch (no json)", best[0], best[2], ""))
    return out


async def bench_sqlite(quick: bool, reps: int) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="todo-sessions-bench-") as tmp:
        store_db, base_db = Path(tmp, "store.db"), Path(tmp, "base.db")
        for db in (store_db, base_db):
            await migrate(f"sqlite:///{db}")
        async with SessionStore(store_db, migrate=False) as store:
            base = SQLiteSide(base_db)
            with closing(base.conn):
                return await compare(StoreSide(store), base, quick, reps)


async def bench_postgres(quick: bool, reps: int) -> list[Row]:
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
            base = PGSide(await asyncpg.connect(base_url))
            try:
                version = await base.conn.fetchval("SHOW server_version")
                print(f"postgresql {version}, asyncpg {asyncpg.__version__}")
                return await compare(StoreSide(store), base, quick, reps)
            finally:
                await base.conn.close()
    finally:
        for name in names:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def print_table(title: str, rows: list[Row]) -> None:
    lines: list[tuple[str, ...]] = [("scenario", "store ev/s", "baseline ev/s", "ratio", "target")]
    for name, store, base, key in rows:
        floor, label = TARGETS.get(key, (0.0, ""))
        ratio = store / base
        status = "" if not key else "  ok" if ratio >= floor else "  BELOW"
        target = f">={label:<15}" if key else "(info)"
        lines.append((name, f"{store:,.0f}", f"{base:,.0f}", f"{ratio:.2f}x", target + status))
    widths = [max(len(line[i]) for line in lines) for i in range(5)]
    lines.insert(1, tuple("-" * w for w in widths))
    print(f"\n== {title} ==")
    for line in lines:
        cells = (f"{c:{a}{w}}" for c, a, w in zip(line, "<>>><", widths, strict=True))
        print("  ".join(cells).rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "all"), default="all")
    parser.add_argument("--quick", action="store_true", help="small counts (smoke run)")
    parser.add_argument("--reps", type=int, default=3, help="timed runs per row (best kept)")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, ", end="")
    print(f"{os.cpu_count()} CPUs, {platform.platform()}, temp dir {tempfile.gettempdir()}")
    print(f"{'quick' if args.quick else 'full'} run, best of {args.reps}")
    for backend, bench, title in (
        ("sqlite", bench_sqlite, "SQLite: store vs plain sqlite3"),
        ("postgres", bench_postgres, "PostgreSQL: store vs plain asyncpg"),
    ):
        if args.backend in (backend, "all"):
            print_table(title, asyncio.run(bench(args.quick, args.reps)))


if __name__ == "__main__":
    main()
