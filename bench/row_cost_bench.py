"""What one ``session_events`` row pays in SQL: every B-tree and trigger, one at a time.

Run (from the repository root)::

    .venv/bin/python bench/row_cost_bench.py                       # SQLite and PostgreSQL
    .venv/bin/python bench/row_cost_bench.py --backend sqlite --rounds 9
    .venv/bin/python bench/row_cost_bench.py --backend sqlite --only current,no-trigger
    .venv/bin/python bench/row_cost_bench.py --reads               # and the raw reads

Each variant is the store's own schema as the migrations create it (`todo_sessions.migrate`
on a fresh file or database), with one change made by plain DDL (the variant's ``setup``),
seeded untimed with ``--seed`` events (``--seed-sessions`` sessions). Then, through the plain
driver (``sqlite3`` / ``asyncpg``, no store code), appends of 100 rows to a fresh session:
one transaction each (``BEGIN IMMEDIATE`` / a transaction, ``executemany`` of the 9-column
insert the store makes, the session row's ``next_seq`` update, ``COMMIT``), with
``synchronous=OFF`` / ``synchronous_commit=off`` so the fsync (the same for every variant)
stays out of the figure. The store's connections settings otherwise: WAL, foreign keys on.

The rows are bench/peers_bench.py's coding-agent workload: every other event an
``assistant/message`` (~300 bytes, a surface row), a ``tool/call`` between, a ``todo/write``
every 100th, a 32-byte chain value each.

Method: per round every variant once, in an order that rotates each round; a round's figures
are the median µs of its ``--batches`` appends, wall-clock and CPU (SQLite: the thread's CPU
time, the SQL runs on it; PostgreSQL: the server backend's, from ``/proc/<pid>/schedstat``,
so the server must run on this machine; on a loaded machine the CPU figures are the
steadier); a variant's figure is the median of its round figures [min-max], and its ratio
is against the first variant's. Before each run ``gc.collect()``; the collector stays enabled.

After the timing each variant is tried for its guarantees from a raw connection (foreign keys
off, as ``sqlite3`` and ``psql`` connect by default): ``INSERT OR REPLACE`` and ``REPLACE
INTO`` over a stored row (SQLite), ``INSERT ... ON CONFLICT DO UPDATE`` (PostgreSQL), an
``UPDATE``: ``held`` when the database refused it, ``OPEN`` when a stored row changed.

``--reads`` adds the raw reads on a ``--read-size`` session of each variant (µs, medians):
the whole session in seq order, the latest ``todo/write`` (the type index), the surface rows
(the partial index).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store_bench import message, todo_write, tool_call  # bench/peers_bench.py's payloads

from todo_sessions import migrate

T0 = 1_764_000_000_000
SEP = (",", ":")
Row = tuple[Any, ...]
COLUMNS = "session_id, seq, type, time, data, surface_op, source_event_seqs, ignorable, chain"

# -- rows ---------------------------------------------------------------------------------------


def rows(session_id: str, start: int, size: int) -> list[Row]:
    """Events ``start .. start+size-1`` of the workload as ``session_events`` rows."""
    out = []
    for i in range(start, start + size):
        if i % 100 == 99:
            kind, data, op = "todo/write", todo_write(i), None
        elif i % 2:
            kind, data, op = "tool/call", tool_call(i), None
        else:
            kind, data, op = "assistant/message", message(i), '"append"'
        text = json.dumps(data, separators=SEP, ensure_ascii=False)
        out.append((session_id, i, kind, T0 + i, text, op, None, False, os.urandom(32)))
    return out


def new_id(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:16]}"


def clock() -> float:
    gc.collect()
    return time.perf_counter()


# -- SQLite variants ----------------------------------------------------------------------------

SQLITE_TABLE = """
CREATE TABLE session_events (
    session_id VARCHAR(200) NOT NULL,
    seq BIGINT NOT NULL,
    type VARCHAR(200) NOT NULL,
    time BIGINT NOT NULL,
    data TEXT NOT NULL,
    surface_op TEXT,
    source_event_seqs TEXT,
    ignorable BOOLEAN DEFAULT 0 NOT NULL,
    chain BLOB,
    CONSTRAINT pk_session_events PRIMARY KEY (session_id, seq){pk_clause}{fk}
    CONSTRAINT ck_session_events_seq_non_negative CHECK (seq >= 0)
){options}
"""
SQLITE_FK = (
    ",\n    CONSTRAINT fk_session_events_session_id_sessions FOREIGN KEY(session_id) "
    "REFERENCES sessions (id) ON DELETE CASCADE,"
)
TYPE_INDEX = (
    "CREATE INDEX ix_session_events_session_id_type_seq ON session_events (session_id, type, seq)"
)
SURFACE_INDEX = (
    "CREATE INDEX ix_session_events_surface ON session_events (session_id, seq) "
    "WHERE surface_op IS NOT NULL"
)
NO_UPDATE = """CREATE TRIGGER trg_session_events_no_update BEFORE UPDATE ON session_events
BEGIN SELECT RAISE(ABORT, 'session_events rows are append-only: UPDATE is not allowed'); END"""
NO_DELETE = """CREATE TRIGGER trg_session_events_no_delete BEFORE DELETE ON session_events
WHEN EXISTS (SELECT 1 FROM sessions WHERE id = OLD.session_id AND next_seq > OLD.seq)
BEGIN SELECT RAISE(ABORT, 'session_events rows are append-only: delete the session instead'); END"""
GUARD_EXISTS = """CREATE TRIGGER trg_session_events_no_replace BEFORE INSERT ON session_events
WHEN EXISTS (SELECT 1 FROM session_events WHERE session_id = NEW.session_id AND seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'session_events rows are append-only: that seq already exists'); END"""
GUARD_END = """CREATE TRIGGER trg_session_events_no_replace BEFORE INSERT ON session_events
WHEN NEW.seq < (SELECT next_seq FROM sessions WHERE id = NEW.session_id)
BEGIN SELECT RAISE(ABORT, 'session_events rows are append-only: that seq already exists'); END"""
GUARD_NOOP = """CREATE TRIGGER trg_session_events_no_replace BEFORE INSERT ON session_events
WHEN NEW.seq < 0
BEGIN SELECT RAISE(ABORT, 'session_events rows are append-only: that seq already exists'); END"""
GUARD_BODY = """CREATE TRIGGER trg_session_events_no_replace BEFORE INSERT ON session_events
BEGIN SELECT RAISE(ABORT, 'session_events rows are append-only: that seq already exists')
FROM session_events WHERE session_id = NEW.session_id AND seq = NEW.seq; END"""
GUARD_ORPHAN = """CREATE TRIGGER trg_session_events_no_replace BEFORE INSERT ON session_events
WHEN (SELECT NEW.seq >= next_seq FROM sessions WHERE id = NEW.session_id) IS NOT 1
BEGIN SELECT RAISE(ABORT, 'session_events rows are append-only: that seq already exists'); END"""


def sqlite_rebuild(
    *,
    without_rowid: bool = False,
    pk_clause: str = "",
    fk: bool = True,
    guard: str | None = GUARD_EXISTS,
    type_index: bool = True,
    surface_index: bool = True,
) -> list[str]:
    """DDL that replaces the (empty) migrated table by this layout (the sessions triggers that
    name ``session_events`` find the new table by its name)."""
    table = SQLITE_TABLE.format(
        pk_clause=pk_clause,
        fk=SQLITE_FK if fk else ",",
        options=" WITHOUT ROWID" if without_rowid else "",
    )
    ddl = ["DROP TABLE session_events", table, NO_UPDATE, NO_DELETE]
    ddl += [TYPE_INDEX] if type_index else []
    ddl += [SURFACE_INDEX] if surface_index else []
    ddl += [guard] if guard else []
    return ddl


@dataclass(frozen=True)
class Variant:
    name: str
    what: str
    setup: list[str] = field(default_factory=list)
    foreign_keys: bool = True
    unnest: bool = False
    """PostgreSQL: the 100 rows as one ``INSERT ... SELECT FROM unnest(...)`` statement."""
    revision: str = "head"
    """PostgreSQL: the revision the variant's database is migrated to."""


SQLITE_VARIANTS = (
    Variant("current", "the schema the migrations create (0010 and 0012 alike on SQLite)"),
    Variant(
        "no-trigger",
        "without the no-replace trigger",
        ["DROP TRIGGER trg_session_events_no_replace"],
    ),
    Variant(
        "no-surface", "without the surface partial index", ["DROP INDEX ix_session_events_surface"]
    ),
    Variant(
        "no-type",
        "without the (session_id, type, seq) index",
        ["DROP INDEX ix_session_events_session_id_type_seq"],
    ),
    Variant(
        "no-fk-check", "foreign keys off on the connection (no per-row parent probe)", [], False
    ),
    Variant(
        "guard-noop",
        "a trigger that probes nothing (its call alone; guards nothing)",
        sqlite_rebuild(guard=GUARD_NOOP),
    ),
    Variant(
        "guard-body",
        "the probe in the trigger's body instead of its WHEN",
        sqlite_rebuild(guard=GUARD_BODY),
    ),
    Variant(
        "guard-end",
        "trigger: NEW.seq below the session's next_seq (probe of sessions)",
        sqlite_rebuild(guard=GUARD_END),
    ),
    Variant(
        "guard-end-no-fk",
        "guard-end, no foreign key on session_events",
        sqlite_rebuild(guard=GUARD_ORPHAN, fk=False),
    ),
    Variant(
        "pk-abort",
        "PRIMARY KEY ... ON CONFLICT ABORT, no trigger",
        sqlite_rebuild(pk_clause=" ON CONFLICT ABORT", guard=None),
    ),
    Variant("wr", "WITHOUT ROWID, the EXISTS trigger", sqlite_rebuild(without_rowid=True)),
    Variant(
        "wr-guard-end",
        "WITHOUT ROWID, trigger guard-end",
        sqlite_rebuild(without_rowid=True, guard=GUARD_END),
    ),
    Variant(
        "wr-no-trigger", "WITHOUT ROWID, no trigger", sqlite_rebuild(without_rowid=True, guard=None)
    ),
    Variant(
        "bare",
        "the store's columns, primary key only: no trigger, index, foreign key",
        sqlite_rebuild(fk=False, guard=None, type_index=False, surface_index=False),
    ),
)


def sqlite_connect(path: Path, foreign_keys: bool = True) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
    return conn


INSERT = f"INSERT INTO session_events ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
NEW_SESSION = (
    "INSERT INTO sessions (id, format_version, created_at, delegation_depth, incarnation, "
    "revision, next_seq, updated_at) VALUES (?, 1, 0, 0, 'x', 0, 0, 0)"
)
ADVANCE = "UPDATE sessions SET next_seq = ?, revision = revision + 1 WHERE id = ?"


def sqlite_append(conn: sqlite3.Connection, batch: list[Row], end: int) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(INSERT, batch)
    conn.execute(ADVANCE, (end, batch[0][0]))
    conn.execute("COMMIT")


class SQLiteVariant:
    def __init__(self, variant: Variant, path: Path) -> None:
        self.variant, self.path = variant, path
        self.conn = sqlite_connect(path, variant.foreign_keys)
        for statement in variant.setup:
            self.conn.execute(statement)

    def new_session(self, size: int) -> str:
        sid = new_id("s")
        self.conn.execute(NEW_SESSION, (sid,))
        for start in range(0, size, 100):
            sqlite_append(self.conn, rows(sid, start, min(100, size - start)), start + 100)
        return sid

    def appends(self, batches: int) -> tuple[float, float]:
        """Median µs of ``batches`` appends of 100 rows to a new session: wall-clock, and the
        CPU time of this thread (SQLite runs on it)."""
        sid = new_id("a")
        self.conn.execute(NEW_SESSION, (sid,))
        prepared = [rows(sid, b * 100, 100) for b in range(batches)]
        walls, cpus = [], []
        clock()
        for b, batch in enumerate(prepared):
            t, c = time.perf_counter(), time.thread_time()
            sqlite_append(self.conn, batch, (b + 1) * 100)
            cpus.append(time.thread_time() - c)
            walls.append(time.perf_counter() - t)
        return statistics.median(walls) * 1e6, statistics.median(cpus) * 1e6

    def reads(self, sid: str, size: int, repeat: int) -> dict[str, float]:
        c = self.conn
        whole = (
            "SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable "
            "FROM session_events WHERE session_id = ? AND seq >= 0 AND seq < ? ORDER BY seq"
        )
        latest = (
            "SELECT seq, data FROM session_events WHERE session_id = ? AND type = ? "
            "AND seq < ? ORDER BY seq DESC LIMIT 1"
        )
        surface = (
            "SELECT seq, type, time, data, surface_op, source_event_seqs, ignorable "
            "FROM session_events WHERE session_id = ? AND surface_op IS NOT NULL "
            "AND seq >= 0 AND seq < ? ORDER BY seq"
        )
        return {
            "whole": best_of(lambda: c.execute(whole, (sid, size)).fetchall(), repeat),
            "latest": best_of(
                lambda: c.execute(latest, (sid, "todo/write", size)).fetchone(), repeat * 50
            ),
            "surface": best_of(lambda: c.execute(surface, (sid, size)).fetchall(), repeat),
        }

    def guards(self) -> dict[str, str]:
        """What a raw connection (foreign keys off) can do to a stored row."""
        raw = sqlite3.connect(self.path, isolation_level=None)
        sid = raw.execute("SELECT session_id FROM session_events LIMIT 1").fetchone()[0]
        values = (sid, 0, "x/y", 0, "{}", None, None, False, None)
        attempts = {
            "or-replace": (
                f"INSERT OR REPLACE INTO session_events ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
                values,
            ),
            "replace-into": (
                f"REPLACE INTO session_events ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
                values,
            ),
            "update": (
                "UPDATE session_events SET data = '{}' WHERE session_id = ? AND seq = 0",
                (sid,),
            ),
            "orphan": (INSERT, ("no-such-session", 0, "x/y", 0, "{}", None, None, False, None)),
        }
        out = {}
        for name, (sql, args) in attempts.items():
            raw.execute("BEGIN")
            try:
                raw.execute(sql, args)
                out[name] = "OPEN"
            except sqlite3.DatabaseError:
                out[name] = "held"
            raw.execute("ROLLBACK")
        raw.close()
        return out

    def close(self) -> None:
        self.conn.close()


def on_cpu(schedstat: Path) -> float:
    """Seconds a process has run on a CPU (Linux ``schedstat``, nanoseconds)."""
    return int(schedstat.read_text().split()[0]) / 1e9


def best_of(run: Callable[[], Any], repeat: int) -> float:
    """Median µs of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


# -- PostgreSQL variants ------------------------------------------------------------------------

PG_CHECK = "DROP TRIGGER trg_session_events_have_sessions ON session_events"
PG_VARIANTS = (
    Variant("0010", "revision 0010: the foreign key's check per row, executemany", revision="0010"),
    Variant(
        "0010-unnest",
        "revision 0010, the rows in one INSERT ... unnest",
        revision="0010",
        unnest=True,
    ),
    Variant("0012", "revision 0012: one check per statement, one INSERT ... unnest", unnest=True),
    Variant("0012-no-check", "0012 without its statement check", [PG_CHECK], unnest=True),
    Variant("0012-executemany", "0012, the rows by executemany (the check once per row)"),
    Variant(
        "0012-no-surface",
        "0012 without the surface partial index",
        ["DROP INDEX ix_session_events_surface"],
        unnest=True,
    ),
    Variant(
        "0012-no-type",
        "0012 without the (session_id, type, seq) index",
        ["DROP INDEX ix_session_events_session_id_type_seq"],
        unnest=True,
    ),
    Variant(
        "bare",
        "the store's columns, primary key only, one INSERT ... unnest",
        [
            PG_CHECK,
            "DROP INDEX ix_session_events_surface",
            "DROP INDEX ix_session_events_session_id_type_seq",
        ],
        unnest=True,
    ),
)


class PGVariant:
    """One variant in a database of its own."""

    def __init__(self, variant: Variant, conn: Any, database: str) -> None:
        self.variant, self.conn, self.database = variant, conn, database

    @classmethod
    async def open(cls, variant: Variant, admin: Any, base_url: str) -> PGVariant:
        import asyncpg

        database = f"row_cost_{variant.name.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
        await admin.execute(f"CREATE DATABASE {database}")
        url = base_url.rsplit("/", 1)[0] + "/" + database
        await migrate(url, revision=variant.revision)
        conn = await asyncpg.connect(url)
        await conn.execute("SET synchronous_commit = off")
        for statement in variant.setup:
            await conn.execute(statement)
        return cls(variant, conn, database)

    async def append(self, batch: list[Row], end: int) -> None:
        async with self.conn.transaction():
            if self.variant.unnest:
                columns = [list(c) for c in zip(*batch, strict=True)]
                await self.conn.execute(PG_UNNEST, batch[0][0], *columns[1:])
            else:
                await self.conn.executemany(PG_INSERT, batch)
            await self.conn.execute(PG_ADVANCE, end, batch[0][0])

    async def new_session(self, size: int) -> str:
        sid = new_id("s")
        await self.conn.execute(PG_NEW_SESSION, sid)
        for start in range(0, size, 100):
            await self.append(rows(sid, start, min(100, size - start)), start + 100)
        return sid

    async def appends(self, batches: int) -> tuple[float, float]:
        """Median µs of ``batches`` appends: wall-clock, and the CPU time of the server's
        backend process (``/proc/<pid>/schedstat``: the server must be on this machine)."""
        sid = new_id("a")
        await self.conn.execute(PG_NEW_SESSION, sid)
        prepared = [rows(sid, b * 100, 100) for b in range(batches)]
        walls, cpus = [], []
        stat = Path(f"/proc/{self.conn.get_server_pid()}/schedstat")
        clock()
        for b, batch in enumerate(prepared):
            t, c = time.perf_counter(), on_cpu(stat)
            await self.append(batch, (b + 1) * 100)
            cpus.append(on_cpu(stat) - c)
            walls.append(time.perf_counter() - t)
        return statistics.median(walls) * 1e6, statistics.median(cpus) * 1e6

    async def guards(self) -> dict[str, str]:
        c = self.conn
        sid = await c.fetchval("SELECT session_id FROM session_events LIMIT 1")
        attempts = {
            "on-conflict-update": f"INSERT INTO session_events ({COLUMNS}) VALUES "
            "($1, 0, 'x/y', 0, '{}', NULL, NULL, false, NULL) "
            "ON CONFLICT (session_id, seq) DO UPDATE SET data = excluded.data",
            "update": "UPDATE session_events SET data = '{}' WHERE session_id = $1 AND seq = 0",
            "orphan": f"INSERT INTO session_events ({COLUMNS}) VALUES "
            "('no-such-session' || $1::text, 0, 'x/y', 0, '{}', NULL, NULL, false, NULL)",
        }
        out = {}
        for name, sql in attempts.items():
            try:
                async with c.transaction():
                    await c.execute(sql, sid)
                    out[name] = "OPEN"
                    raise _Undo
            except _Undo:
                pass
            except Exception:  # any refusal is the database holding
                out[name] = "held"
        return out

    async def close(self, admin: Any) -> None:
        await self.conn.close()
        await admin.execute(f"DROP DATABASE {self.database}")


class _Undo(Exception):
    pass


PG_INSERT = f"INSERT INTO session_events ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
PG_UNNEST = (  # the store's statement since revision 0012 (`queries.insert_events_statement`)
    f"INSERT INTO session_events ({COLUMNS}) SELECT $1::varchar, * FROM unnest($2::bigint[], "
    "$3::varchar[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::boolean[], $9::bytea[])"
)
PG_NEW_SESSION = NEW_SESSION.replace("?", "$1")
PG_ADVANCE = "UPDATE sessions SET next_seq = $1, revision = revision + 1 WHERE id = $2"


# -- the runs -----------------------------------------------------------------------------------


def rotate(items: Sequence[Any], k: int) -> list[Any]:
    k %= len(items)
    return [*items[k:], *items[:k]]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.0f} [{min(values):.0f}-{max(values):.0f}]"


def report(
    title: str,
    figures: dict[str, list[tuple[float, float]]],
    variants: Sequence[Variant],
    extra: dict[str, dict[str, str]],
    cpu: str,
) -> None:
    print(f"\n{title}: µs per append of 100 rows, median of round medians [min-max]")
    print(f"  {'variant':16} {'wall-clock':24} {'ratio':6} {cpu:24} {'ratio':6} guards")
    walls = {name: [w for w, _ in values] for name, values in figures.items()}
    cpus = {name: [c for _, c in values] for name, values in figures.items()}
    base_wall = statistics.median(walls[variants[0].name])
    base_cpu = statistics.median(cpus[variants[0].name])
    for v in variants:
        wall, on_cpu = walls[v.name], cpus[v.name]
        marks = " ".join(f"{k}:{s}" for k, s in extra.get(v.name, {}).items())
        print(
            f"  {v.name:16} {spread(wall):24} {statistics.median(wall) / base_wall:5.2f}x "
            f"{spread(on_cpu):24} {statistics.median(on_cpu) / base_cpu:5.2f}x {marks}"
        )
        print(f"  {'':16} {v.what}")


def bench_sqlite(args: argparse.Namespace, variants: Sequence[Variant]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="row_cost_"))
    try:
        template = tmp / "template.db"
        asyncio.run(migrate(f"sqlite:///{template}"))
        sides = {}
        for v in variants:
            path = tmp / f"{v.name}.db"
            shutil.copy(template, path)
            sides[v.name] = SQLiteVariant(v, path)
            for _ in range(args.seed_sessions):
                sides[v.name].new_session(args.seed // args.seed_sessions)
        readable = {}
        if args.reads:
            for v in variants:
                readable[v.name] = sides[v.name].new_session(args.read_size)
        figures: dict[str, list[tuple[float, float]]] = {v.name: [] for v in variants}
        reads: dict[str, dict[str, list[float]]] = {v.name: {} for v in variants}
        for r in range(args.rounds):
            for v in rotate(variants, r):
                figures[v.name].append(sides[v.name].appends(args.batches))
                if args.reads:
                    got = sides[v.name].reads(readable[v.name], args.read_size, 5)
                    for key, value in got.items():
                        reads[v.name].setdefault(key, []).append(value)
            print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr)
        extra = {v.name: sides[v.name].guards() for v in variants}
        report("SQLite", figures, variants, extra, "CPU (this thread)")
        if args.reads:
            print(f"\nSQLite raw reads of a {args.read_size}-event session, µs, median [min-max]:")
            for v in variants:
                line = "  ".join(f"{k} {spread(vals)}" for k, vals in reads[v.name].items())
                print(f"  {v.name:16} {line}")
        for side in sides.values():
            side.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def bench_postgres(args: argparse.Namespace, variants: Sequence[Variant]) -> None:
    import asyncpg

    url = os.environ.get("TODO_SESSIONS_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    admin = await asyncpg.connect(url)
    sides = {}
    try:
        for v in variants:
            sides[v.name] = await PGVariant.open(v, admin, url)
            for _ in range(args.seed_sessions):
                await sides[v.name].new_session(args.seed // args.seed_sessions)
            await sides[v.name].conn.execute("ANALYZE")
        figures: dict[str, list[tuple[float, float]]] = {v.name: [] for v in variants}
        for r in range(args.rounds):
            for v in rotate(variants, r):
                figures[v.name].append(await sides[v.name].appends(args.batches))
            print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr)
        extra = {v.name: await sides[v.name].guards() for v in variants}
        report("PostgreSQL", figures, variants, extra, "CPU (server backend)")
    finally:
        for side in sides.values():
            await side.close(admin)
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "all"), default="all")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--seed", type=int, default=20_000)
    parser.add_argument("--seed-sessions", type=int, default=20)
    parser.add_argument("--only", default="", help="variant names, comma-separated")
    parser.add_argument("--reads", action="store_true")
    parser.add_argument("--read-size", type=int, default=100_000)
    args = parser.parse_args()
    only = {name for name in args.only.split(",") if name}

    def chosen(variants: Sequence[Variant]) -> list[Variant]:
        return [v for v in variants if not only or v.name in only]

    print(f"load average {os.getloadavg()}, SQLite {sqlite3.sqlite_version}", file=sys.stderr)
    if args.backend in ("sqlite", "all"):
        bench_sqlite(args, chosen(SQLITE_VARIANTS))
    if args.backend in ("postgres", "all"):
        asyncio.run(bench_postgres(args, chosen(PG_VARIANTS)))
    print(f"\nload average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
