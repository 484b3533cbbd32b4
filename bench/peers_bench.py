"""`SessionStore` beside other session stores on SQLite, one workload, alternating rounds.

Run (from the repository root)::

    .venv/bin/python bench/peers_bench.py                  # 5 rounds, several minutes
    .venv/bin/python bench/peers_bench.py --quick          # smoke run: 3 short rounds
    .venv/bin/python bench/peers_bench.py --only batch100,load,todo --rounds 7
    .venv/bin/python bench/peers_bench.py --sides limit,store

Sides, each through its own public API, each on its own SQLite file in one temp directory
(WAL, synchronous=FULL everywhere but where a peer decides otherwise):

- ``limit``: plain ``sqlite3`` on the event-loop thread with a minimal schema: one table
  ``events(session_id, seq, type, time, data)``, primary key ``(session_id, seq)``, one index
  ``(session_id, type, seq)``; an append is BEGIN IMMEDIATE, executemany INSERT, COMMIT; a
  load is one SELECT and ``json.loads`` per row; busy_timeout 5000 (SQLite's own busy handler).
  Every ratio is against this side.
- ``store``: todo-sessions' `SessionStore` (its schema, validation, projections, threads),
  the search index on as by default; ``store-noindex``: the same with ``search_index=False``
  (what the index costs each column).
- ``aiosqlite``: the store's design by hand on aiosqlite (the store's schema, migrated by
  ``todo_sessions.migrate``, and its append transaction: BEGIN IMMEDIATE, the session row,
  the seq check, executemany INSERT of the 8 columns, UPDATE of the session row, COMMIT, one
  ``await`` per statement; ``json.dumps`` per event, no catalog validation). Concurrent tasks
  share its one connection under an ``asyncio.Lock``.
- ``agents``: openai-agents' ``SQLiteSession`` (its own schema and threads; its items are
  ``{"type", "seq", "time", "data"}`` dicts of the same events). It keeps SQLite's default
  ``synchronous`` (FULL) and sets WAL itself.
- ``limit-thread``, ``store-sql``, ``store-sql-thread`` (only when named in ``--sides``; append
  columns only): the floors under the store's appends (`floor_sides`): the limit's statements
  on a writer thread, the store's statements on its schema on the loop thread, and both.

The workload (`workload`): a coding-agent session of ``assistant/message`` events (one text
block, ~300 bytes), ``tool/call`` events (an ``edit_file`` call) in turn, and a
``todo/write`` (six items) every 100th event; payloads are dicts built before timing, turned
into each side's form (the store: a `SessionEvent`; the others: ``json.dumps``) inside it.

Columns (per round and side; fresh sessions for every append column):

- append 1/tx: single-event appends, each durable on its own (events/s).
- append 100/tx: appends of 100 events (events/s).
- load 10k / load 100k: a whole session of that many events read into the side's objects
  (events/s). Sessions are seeded once per side, untimed, before the rounds.
- latest todo @100k: µs per call (median of the calls of a round) for the current todo list
  of the 100k session (its last event is a ``todo/write``). Store: ``current_todos``;
  limit and aiosqlite: the indexed SELECT of the latest ``todo/write`` and ``json.loads``;
  agents: ``get_items(limit=1)`` (it has no index by type; this is its best case).
- 4 tasks: four asyncio tasks appending single events, each to its own session (the limit
  commits the same events one after the other on the loop thread).
- 2 processes / 4 processes: that many processes, each appending single durable events to its
  own session of one shared file (per side), started together at a barrier after opening;
  total events/s from the first start to the last finish. The lock waits are each side's:
  SQLite's busy handler for limit, aiosqlite and agents.

The store's search index is written after the appends' commits (docs/design.md, "The deferred
index"): after each timed append run of the store, untimed, a search brings it up to date
(``settle``), so none of that work runs inside another side's timing (what it costs:
``bench/search_bench.py --only cost,catchup``). The process columns' writers exit with their
appends left to the index (the next search takes them).

Method: one untimed warm-up of each side, then per round every side once, in an order that
rotates each round (limit, store, aiosqlite, agents; then store, aiosqlite, agents, limit;
...). Before each timed run ``gc.collect()`` runs once; the collector is never paused. Each
cell is the side's MEDIAN over the rounds [p25-p75], and its ratio = the limit's median
speed / the side's median speed (above 1 slower than the limit; for latency side µs / limit
µs), with the median of the per-round ratios as a check ("paired").
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
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
from importlib.metadata import version
from pathlib import Path
from typing import Any

import aiosqlite
from floor_sides import FLOORS  # the floors under the store's appends
from peers_workload import SEP, T0, Event, new_id, workload

from todo_sessions import SessionEvent, SessionHeader, SessionStore, migrate

__all__ = ["SEP", "T0", "Event", "new_id", "workload"]  # the workload, for the other benches

SIDES = ("limit", "store", "store-noindex", "aiosqlite", "agents")
"""The sides of a run without ``--sides``; the floors (`floor_sides`) run when named."""
COLUMNS = ("single", "batch100", "load", "todo", "tasks", "processes")


def clock() -> float:
    """Start a timed run: the same collector state for every run (the GC stays enabled)."""
    gc.collect()
    return time.perf_counter()


# -- sides ----------------------------------------------------------------------------------------


class Side:
    """What every side gives: sessions, appends of n per transaction, loads, the latest todo."""

    name: str

    async def session(self) -> Any:
        """A fresh session holding event 0 (untimed)."""
        raise NotImplementedError

    async def append(self, handle: Any, events: Sequence[Event]) -> None:
        raise NotImplementedError

    async def load(self, handle: Any) -> int:
        raise NotImplementedError

    async def todo(self, handle: Any) -> Any:
        raise NotImplementedError

    async def close(self) -> None:
        return None

    async def settle(self) -> None:
        """Untimed, after each timed run: finish what the side deferred (the store's search
        index), so none of it runs inside another side's timing."""
        return None

    async def seed(self, events: Sequence[Event]) -> Any:
        handle = await self.session()
        for i in range(1, len(events), 2000):
            await self.append(handle, events[i : i + 2000])
        return handle


def _limit_connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    for pragma in ("journal_mode = WAL", "synchronous = FULL"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


LIMIT_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
    "type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL, "
    "PRIMARY KEY (session_id, seq))",
    "CREATE INDEX IF NOT EXISTS events_by_type ON events (session_id, type, seq)",
)


class LimitSide(Side):
    name = "limit"

    def __init__(self, path: Path) -> None:
        self.conn = _limit_connect(path)
        for ddl in LIMIT_SCHEMA:
            self.conn.execute(ddl)

    async def session(self) -> str:
        sid = new_id("l")
        await self.append(sid, workload(1))
        return sid

    async def append(self, handle: str, events: Sequence[Event]) -> None:
        dumps, conn = json.dumps, self.conn
        rows = [(handle, s, k, t, dumps(d, separators=SEP)) for k, s, t, d, _ in events]
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    async def load(self, handle: str) -> int:
        loads = json.loads
        rows = self.conn.execute(
            "SELECT seq, type, time, data FROM events WHERE session_id = ? ORDER BY seq",
            (handle,),
        ).fetchall()
        return len([(s, k, t, loads(d)) for s, k, t, d in rows])

    async def todo(self, handle: str) -> Any:
        (data,) = self.conn.execute(
            "SELECT data FROM events WHERE session_id = ? AND type = 'todo/write' "
            "ORDER BY seq DESC LIMIT 1",
            (handle,),
        ).fetchone()
        return json.loads(data)["todos"]

    async def close(self) -> None:
        self.conn.close()


class StoreSide(Side):
    name = "store"

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    @classmethod
    async def open(cls, path: Path, *, search_index: bool = True) -> StoreSide:
        store = SessionStore(
            path, journal_mode="WAL", synchronous="FULL", search_index=search_index
        )
        await store.__aenter__()
        side = cls(store)
        if not search_index:
            side.name = "store-noindex"
        return side

    async def session(self) -> str:
        sid = new_id("s")
        await self.store.create(SessionHeader(id=sid, created_at=T0, cwd="/bench"))
        await self.append(sid, workload(1))
        return sid

    async def append(self, handle: str, events: Sequence[Event]) -> None:
        await self.store.append(
            handle, [SessionEvent(k, s, t, d, surface_op=op) for k, s, t, d, op in events]
        )

    async def load(self, handle: str) -> int:
        return len(await self.store.read_from(handle))

    async def todo(self, handle: str) -> Any:
        return await self.store.current_todos(handle)

    async def close(self) -> None:
        await self.store.__aexit__(None, None, None)

    async def settle(self) -> None:
        await self.store.search("settle")  # brings the deferred search index up to date


AIO_SQL = {
    "state": "SELECT next_seq, revision FROM sessions WHERE id = ?",
    "insert": "INSERT INTO session_events (session_id, seq, type, time, data, surface_op, "
    "source_event_seqs, ignorable) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "update": "UPDATE sessions SET revision = ?, next_seq = ?, updated_at = ? WHERE id = ?",
    "session": "INSERT INTO sessions (id, format_version, created_at, cwd, delegation_depth, "
    "incarnation, revision, next_seq, updated_at) VALUES (?, 1, ?, '/bench', 0, ?, 0, 0, ?)",
    "header": "SELECT next_seq FROM sessions WHERE id = ?",
    "events": "SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable "
    "FROM session_events WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq",
    "todo": "SELECT seq, data FROM session_events WHERE session_id = ? AND type = 'todo/write' "
    "AND seq < ? ORDER BY seq DESC LIMIT 1",
}


class AiosqliteSide(Side):
    """The store's design by hand: its schema and transaction, one ``await`` per statement."""

    name = "aiosqlite"

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn
        self.lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path) -> AiosqliteSide:
        if not await asyncio.to_thread(path.exists):  # the writer processes find it migrated
            await migrate(f"sqlite:///{path}")
        conn = await aiosqlite.connect(path, isolation_level=None, timeout=5.0)
        for pragma in ("journal_mode = WAL", "synchronous = FULL", "foreign_keys = ON"):
            await conn.execute(f"PRAGMA {pragma}")
        return cls(conn)

    async def session(self) -> str:
        sid = new_id("a")
        now = time.time_ns() // 1_000_000
        await self.conn.execute(AIO_SQL["session"], (sid, T0, str(uuid.uuid4()), now))
        await self.append(sid, workload(1))
        return sid

    async def append(self, handle: str, events: Sequence[Event]) -> None:
        dumps = json.dumps
        rows = [
            (handle, s, k, t, dumps(d, separators=SEP, ensure_ascii=False), op, None, 0)
            for k, s, t, d, op in events
        ]
        conn = self.conn
        async with self.lock:
            await conn.execute("BEGIN IMMEDIATE")
            try:
                ((next_seq, revision),) = await conn.execute_fetchall(AIO_SQL["state"], (handle,))
                if next_seq != rows[0][1]:
                    raise RuntimeError(f"seq conflict: {rows[0][1]} != {next_seq}")
                await conn.executemany(AIO_SQL["insert"], rows)
                params = (revision + 1, next_seq + len(rows), time.time_ns() // 1_000_000, handle)
                await conn.execute(AIO_SQL["update"], params)
                await conn.execute("COMMIT")
            except BaseException:
                await conn.execute("ROLLBACK")
                raise

    async def load(self, handle: str) -> int:
        loads, conn = json.loads, self.conn
        async with self.lock:
            await conn.execute("BEGIN")
            try:
                ((upto,),) = await conn.execute_fetchall(AIO_SQL["header"], (handle,))
                rows = await conn.execute_fetchall(AIO_SQL["events"], (handle, 0, upto))
            finally:
                await conn.execute("ROLLBACK")
        return len([(s, k, t, loads(d), op, ss, ig) for s, k, t, d, op, ss, ig in rows])

    async def todo(self, handle: str) -> Any:
        conn = self.conn
        async with self.lock:
            await conn.execute("BEGIN")
            try:
                ((upto,),) = await conn.execute_fetchall(AIO_SQL["header"], (handle,))
                ((_, data),) = await conn.execute_fetchall(AIO_SQL["todo"], (handle, upto))
            finally:
                await conn.execute("ROLLBACK")
        return json.loads(data)["todos"]

    async def close(self) -> None:
        await self.conn.close()


class AgentsSide(Side):
    """openai-agents' ``SQLiteSession``: one session object per session id, one file."""

    name = "agents"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sessions: list[Any] = []

    async def session(self) -> Any:
        from agents.memory import SQLiteSession

        session = SQLiteSession(new_id("g"), self.path)
        self.sessions.append(session)
        await self.append(session, workload(1))
        return session

    async def append(self, handle: Any, events: Sequence[Event]) -> None:
        items = [{"type": k, "seq": s, "time": t, "data": d} for k, s, t, d, _ in events]
        await handle.add_items(items)

    async def load(self, handle: Any) -> int:
        return len(await handle.get_items())

    async def todo(self, handle: Any) -> Any:
        (item,) = await handle.get_items(limit=1)
        if item["type"] != "todo/write":
            raise RuntimeError("the agents session's last item is not a todo/write")
        return item["data"]["todos"]

    async def close(self) -> None:
        for session in self.sessions:
            session.close()


async def open_side(name: str, path: Path) -> Side:
    if name == "limit":
        return LimitSide(path)
    if name == "store":
        return await StoreSide.open(path)
    if name == "store-noindex":
        return await StoreSide.open(path, search_index=False)
    if name == "aiosqlite":
        return await AiosqliteSide.open(path)
    if name in FLOORS:
        return await FLOORS[name].open(path)  # type: ignore[return-value]
    return AgentsSide(path)


# -- timed runs -----------------------------------------------------------------------------------


async def appends(side: Side, count: int, per: int) -> float:
    handle = await side.session()
    chunks = [workload(per, first) for first in range(1, count * per + 1, per)]
    append = side.append
    t = clock()
    for chunk in chunks:
        await append(handle, chunk)
    rate = count * per / (time.perf_counter() - t)
    await side.settle()
    return rate


async def tasks(side: Side, n: int, per: int) -> float:
    handles = [await side.session() for _ in range(n)]
    events = workload(per, 1)
    append = side.append
    if isinstance(side, LimitSide):  # one after the other on the loop thread

        async def run() -> None:
            for event in events:
                for handle in handles:
                    await append(handle, [event])

        t = clock()
        await run()
    else:

        async def writer(handle: Any) -> None:
            for event in events:
                await append(handle, [event])

        t = clock()
        await asyncio.gather(*(writer(h) for h in handles))
    rate = n * per / (time.perf_counter() - t)
    await side.settle()
    return rate


async def load(side: Side, handle: Any, size: int) -> float:
    t = clock()
    got = await side.load(handle)
    elapsed = time.perf_counter() - t
    if got != size:
        raise RuntimeError(f"{side.name} loaded {got} events, expected {size}")
    return size / elapsed


async def latest_todo(side: Side, handle: Any, calls: int) -> float:
    todo, samples = side.todo, []
    clock()
    for _ in range(calls):
        t = time.perf_counter()
        found = await todo(handle)
        samples.append(time.perf_counter() - t)
    if not found:
        raise RuntimeError(f"{side.name} found no todo list")
    return statistics.median(samples) * 1e6


def _worker_main(commands: Any, barrier: Any, out: Any) -> None:
    """One writer process, kept for all rounds: for each ``(side, count)`` command, make a
    session of that side, wait at the barrier with the other writers, append ``count`` single
    events and report the span. Each side is opened once per process (imports and connections
    stay out of the timing)."""

    async def serve() -> None:
        opened: dict[str, Side] = {}
        try:
            while (command := commands.get()) is not None:
                name, path, count = command
                if name not in opened:
                    opened[name] = await open_side(name, Path(path))
                side = opened[name]
                handle = await side.session()
                events = workload(count, 1)
                append = side.append
                gc.collect()
                barrier.wait()
                start = time.perf_counter()  # CLOCK_MONOTONIC: one clock for all processes
                for event in events:
                    await append(handle, [event])
                out.put((start, time.perf_counter()))
        finally:
            for side in opened.values():
                await side.close()

    asyncio.run(serve())


class Writers:
    """``n`` writer processes (spawned once) that append together on command."""

    def __init__(self, n: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.barrier, self.out = ctx.Barrier(n), ctx.Queue()
        self.commands = [ctx.Queue() for _ in range(n)]
        self.procs = [
            ctx.Process(target=_worker_main, args=(q, self.barrier, self.out))
            for q in self.commands
        ]
        for proc in self.procs:
            proc.start()

    def run(self, name: str, path: Path, per: int) -> float:
        for q in self.commands:
            q.put((name, str(path), per))
        spans = [self.out.get(timeout=600) for _ in self.commands]
        total = len(spans) * per
        return total / (max(e for _, e in spans) - min(s for s, _ in spans))

    def close(self) -> None:
        for q in self.commands:
            q.put(None)
        for proc in self.procs:
            proc.join()
            if proc.exitcode:
                raise RuntimeError(f"a writer process failed ({proc.exitcode})")


# -- rounds and the report ------------------------------------------------------------------------


@dataclass
class Cell:
    unit: str  # "ev/s" (higher is better) or "µs"
    runs: dict[str, list[float]] = field(default_factory=dict)

    def slowdown(self, side: float, limit: float) -> float:
        return side / limit if self.unit == "µs" else limit / side

    def ratio(self, side: str) -> float:
        runs = self.runs
        return self.slowdown(statistics.median(runs[side]), statistics.median(runs["limit"]))

    def paired(self, side: str) -> float:
        pairs = zip(self.runs[side], self.runs["limit"], strict=True)
        return statistics.median(self.slowdown(s, b) for s, b in pairs)


def progress(text: str) -> None:
    print(text, end="", file=sys.stderr, flush=True)


Run = Callable[[str], Awaitable[float]]


async def alternate(cell: Cell, sides: Sequence[str], rounds: int, run: Run, title: str) -> Cell:
    started = time.perf_counter()
    for name in sides:  # warm-up
        await run(name)
    for r in range(rounds):
        order = [*sides[r % len(sides) :], *sides[: r % len(sides)]]
        for name in order:
            cell.runs.setdefault(name, []).append(await run(name))
        progress(".")
    progress(f" {title} ({time.perf_counter() - started:.0f} s)\n")
    return cell


@dataclass(frozen=True)
class Sizes:
    single: int
    batches: int
    loads: tuple[int, ...]
    todo_calls: int
    tasks_per: int
    process_per: int

    @classmethod
    def of(cls, quick: bool) -> Sizes:
        if quick:
            return cls(60, 5, (1_000, 10_000), 50, 40, 40)
        return cls(300, 30, (10_000, 100_000), 300, 100, 150)


def label(size: int) -> str:
    return f"{size // 1000}k"


async def bench(
    tmp: Path, sides: Sequence[str], sizes: Sizes, rounds: int, only: set[str]
) -> dict[str, Cell]:
    paths = {name: tmp / f"{name}.db" for name in sides}
    opened = {name: await open_side(name, paths[name]) for name in sides}
    cells: dict[str, Cell] = {}
    try:
        if "single" in only:
            cells["append 1/tx"] = await alternate(
                Cell("ev/s"), sides, rounds, lambda s: appends(opened[s], sizes.single, 1),
                "append 1/tx",
            )  # fmt: skip
        if "batch100" in only:
            cells["append 100/tx"] = await alternate(
                Cell("ev/s"), sides, rounds, lambda s: appends(opened[s], sizes.batches, 100),
                "append 100/tx",
            )  # fmt: skip
        if "tasks" in only:
            cells["4 tasks"] = await alternate(
                Cell("ev/s"), sides, rounds, lambda s: tasks(opened[s], 4, sizes.tasks_per),
                "4 tasks",
            )  # fmt: skip
        if only & {"load", "todo"}:
            readers = [s for s in sides if s not in FLOORS]  # the floors only append
            started = time.perf_counter()
            seeded: dict[int, dict[str, Any]] = {}
            for size in sizes.loads:
                log = workload(size)
                seeded[size] = {name: await opened[name].seed(log) for name in readers}
            for side in opened.values():
                await side.settle()
            progress(f"seeded ({time.perf_counter() - started:.0f} s)\n")
            if "load" in only:
                for size in sizes.loads:
                    handles = seeded[size]
                    cells[f"load {label(size)}"] = await alternate(
                        Cell("ev/s"), readers, rounds,
                        lambda s, h=handles, n=size: load(opened[s], h[s], n),
                        f"load {label(size)}",
                    )  # fmt: skip
            if "todo" in only:
                largest = max(sizes.loads)
                handles = seeded[largest]
                cells[f"latest todo @{label(largest)}"] = await alternate(
                    Cell("µs"), readers, rounds,
                    lambda s: latest_todo(opened[s], handles[s], sizes.todo_calls),
                    f"latest todo @{label(largest)}",
                )  # fmt: skip
    finally:
        for side in opened.values():
            await side.close()
    if "processes" in only:
        for n in (2, 4):
            writers = Writers(n)
            try:

                async def run(name: str, w: Writers = writers) -> float:
                    return await asyncio.to_thread(w.run, name, paths[name], sizes.process_per)

                cells[f"{n} processes"] = await alternate(
                    Cell("ev/s"), sides, rounds, run, f"{n} processes"
                )
            finally:
                writers.close()
    return cells


def spread(values: list[float], unit: str) -> str:
    p25, p50, p75 = (
        statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    )
    fmt = "{:,.1f}" if unit == "µs" else "{:,.0f}"
    return f"{fmt.format(p50)} [{fmt.format(p25)}-{fmt.format(p75)}]"


def report(cells: dict[str, Cell], sides: Sequence[str]) -> None:
    print("\nmedians [p25-p75] (ev/s, or µs for latency):")
    head = ("column", *sides)
    lines = [head] + [
        (name, *(f"{spread(c.runs[s], c.unit)} {c.unit}" if s in c.runs else "-" for s in sides))
        for name, c in cells.items()
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for line in lines:
        print("  ".join(f"{v:<{w}}" for v, w in zip(line, widths, strict=True)).rstrip())
    others = [s for s in sides if s != "limit"]
    print("\nslowdown against limit: ratio of medians (paired median); >1 slower")
    print("| | " + " | ".join(cells) + " |")
    print("|---" * (len(cells) + 1) + "|")
    for side in others:
        row = [
            f"{c.ratio(side):.2f} ({c.paired(side):.2f})" if side in c.runs else "-"
            for c in cells.values()
        ]
        print(f"| {side} | " + " | ".join(row) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, help="alternating rounds per column (5; quick: 3)")
    parser.add_argument("--quick", action="store_true", help="small counts, 3 rounds")
    parser.add_argument("--only", help=f"comma-separated columns of: {','.join(COLUMNS)}")
    parser.add_argument(
        "--sides",
        help=f"comma-separated of: {','.join((*SIDES, *FLOORS))} (limit always; default: "
        f"{','.join(SIDES)})",
    )
    args = parser.parse_args()
    rounds = args.rounds or (3 if args.quick else 5)
    only = set(args.only.split(",")) if args.only else set(COLUMNS)
    if unknown := only - set(COLUMNS):
        parser.error(f"unknown columns {sorted(unknown)}; choose from {','.join(COLUMNS)}")
    sides = ["limit", *(s for s in (args.sides or ",".join(SIDES)).split(",") if s != "limit")]
    if unknown := set(sides) - {*SIDES, *FLOORS}:
        parser.error(f"unknown sides {sorted(unknown)}; choose from {','.join((*SIDES, *FLOORS))}")
    print(
        f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, aiosqlite "
        f"{version('aiosqlite')}, openai-agents {version('openai-agents')}, "
        f"{platform.platform()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    print(f"median of {rounds} alternating rounds, rotating order: {', '.join(sides)}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="todo-sessions-peers-") as tmp:
        cells = asyncio.run(bench(Path(tmp), sides, Sizes.of(args.quick), rounds, only))
    report(cells, sides)
    print(f"\n({time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
