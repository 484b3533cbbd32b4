"""The floors under the store's appends: what the design costs before any of the store's code.

Three sides for `peers_bench.py` (``--sides limit,limit-thread,store-sql,store-sql-thread,store``),
each the least that one part of the store's design costs, so that a ratio of the store can be
split into what its schema and its thread cost and what its own Python costs:

- ``limit-thread``: the limit's schema and statements, run on a thread of their own the way the
  store's writer runs an append (a job on a ``queue.SimpleQueue``, the result handed back with
  ``loop.call_soon_threadsafe``; jobs that queued together commit in one transaction). Against
  ``limit``: what keeping the host's loop free of the write costs, and nothing else.
- ``store-sql``: the store's schema (made by `todo_sessions.migrate`: its indexes, triggers,
  foreign keys, the search index's tables) and the statements one append runs there, as the
  store runs them (`plans.append`: the session's state with the previous chain value and the
  search index's mark, the event rows, the session row's update, which sets the mark when it
  finds it NULL), with ``json.dumps`` and a BLAKE2b link per event as the only Python. On the
  loop thread, like ``limit``. Against ``limit``: what the schema and its statements cost.
- ``store-sql-thread``: ``store-sql`` on the thread of ``limit-thread``: the floor of the store's
  design as specified (its schema, its statements, its writer thread). The store above it is
  the cost of its own code: validation, the event objects, rows, chain, the plan, the futures.

None of them validates anything or keeps any guarantee the store gives beyond what its schema
does (triggers and foreign keys included); they are floors, not alternatives.
"""

from __future__ import annotations

import asyncio
import json
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from hashlib import blake2b
from pathlib import Path
from typing import Any

from peers_workload import SEP, Event, new_id, workload

from todo_sessions import SessionStore

STATE = (
    "SELECT sessions.next_seq, sessions.revision, sessions.incarnation, "
    "(SELECT session_events.chain FROM session_events WHERE session_events.session_id = "
    "sessions.id AND session_events.seq = sessions.next_seq - 1) AS anon_1, "
    "sessions.index_from FROM sessions WHERE sessions.id = ?"
)
INSERT_EVENT = (
    "INSERT INTO session_events (session_id, seq, type, time, data, surface_op, "
    "source_event_seqs, ignorable, chain) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
UPDATE_SESSION = "UPDATE sessions SET revision=?, next_seq=?, updated_at=? WHERE sessions.id = ?"
UPDATE_MARKING = (
    "UPDATE sessions SET revision=?, next_seq=?, updated_at=?, index_from=? WHERE sessions.id = ?"
)
INSERT_SESSION = (
    "INSERT INTO sessions (id, format_version, created_at, cwd, delegation_depth, incarnation, "
    "revision, next_seq, updated_at) VALUES (?, 1, ?, '/bench', 0, ?, 0, 0, ?)"
)
GENESIS = b"\0" * 32

Write = Callable[[sqlite3.Connection], None]


class Hop:
    """A thread that owns a connection and runs writes queued from event loops: each job alone
    in ``BEGIN IMMEDIATE`` ... ``COMMIT``, or every job that queued behind it in one."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.jobs: queue.SimpleQueue[tuple[Write, asyncio.Future[None]] | None] = (
            queue.SimpleQueue()
        )
        self.thread = threading.Thread(target=self.serve, name="floor-writer", daemon=True)
        self.thread.start()

    async def run(self, write: Write) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.jobs.put((write, future))
        await future

    def serve(self) -> None:
        jobs, conn = self.jobs, self.conn
        while (job := jobs.get()) is not None:
            group = [job]
            stop = False
            while not jobs.empty():
                more = jobs.get()
                if more is None:
                    stop = True
                    break
                group.append(more)
            error: BaseException | None = None
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for write, _ in group:
                        write(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            except BaseException as exc:
                error = exc
            for _, future in group:
                future.get_loop().call_soon_threadsafe(_settle, future, error)
            if stop:
                return

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join()
        self.conn.close()


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if not future.done():
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0, check_same_thread=False)
    for pragma in ("journal_mode = WAL", "synchronous = FULL", "foreign_keys = ON"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


def limit_write(handle: str, events: Sequence[Event]) -> Write:
    dumps = json.dumps
    rows = [(handle, s, k, t, dumps(d, separators=SEP)) for k, s, t, d, _ in events]

    def write(conn: sqlite3.Connection) -> None:
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", rows)

    return write


def store_write(handle: str, events: Sequence[Event], now: int) -> Write:
    """One append of the store's statements (`plans.append`) on its schema."""

    def write(conn: sqlite3.Connection) -> None:
        state = conn.execute(STATE, (handle,)).fetchone()
        next_seq, revision, _incarnation, previous, index_from = state
        link = previous or GENESIS
        rows = []
        for k, s, t, d, op in events:
            text = json.dumps(d, separators=SEP)
            link = blake2b(link + text.encode(), digest_size=32).digest()
            rows.append((handle, s, k, t, text, None if op is None else '"append"', None, 0, link))
        conn.executemany(INSERT_EVENT, rows)
        end = next_seq + len(rows)
        if index_from is None:  # the search index's mark, set by the first append it covers
            conn.execute(UPDATE_MARKING, (revision + 1, end, now, next_seq, handle))
        else:
            conn.execute(UPDATE_SESSION, (revision + 1, end, now, handle))

    return write


class FloorSide:
    """The common part: sessions of the store's or the limit's schema, appends on the loop
    thread or through `Hop`."""

    name = "floor"
    on_thread = False
    store_schema = False

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.hop = Hop(conn) if self.on_thread else None
        self.sessions = 0
        self.now = 1_764_000_000_000

    @classmethod
    async def open(cls, path: Path) -> FloorSide:
        if cls.store_schema:
            async with SessionStore(path):  # the store's own schema, migrated
                pass
        conn = connect(path)
        if not cls.store_schema:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS events (session_id TEXT NOT NULL, seq INTEGER NOT "
                "NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL, "
                "PRIMARY KEY (session_id, seq))"
            )
            conn.execute(
                "CREATE INDEX IF NOT EXISTS events_by_type ON events (session_id, type, seq)"
            )
        return cls(conn)

    async def session(self) -> str:
        sid = new_id(self.name[:2])
        if self.store_schema:
            self.conn.execute(INSERT_SESSION, (sid, self.now, sid, self.now))
        await self.append(sid, workload(1))
        return sid

    async def append(self, handle: str, events: Sequence[Event]) -> None:
        self.now += 1
        write = (
            store_write(handle, events, self.now)
            if self.store_schema
            else limit_write(handle, events)
        )
        if self.hop is not None:
            await self.hop.run(write)
            return
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            write(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    async def load(self, handle: str) -> int:
        raise NotImplementedError("the floors are append sides")

    async def todo(self, handle: str) -> Any:
        raise NotImplementedError("the floors are append sides")

    async def settle(self) -> None:
        return None

    async def close(self) -> None:
        if self.hop is not None:
            self.hop.close()
        else:
            self.conn.close()


class LimitThreadSide(FloorSide):
    name = "limit-thread"
    on_thread = True


class StoreSQLSide(FloorSide):
    name = "store-sql"
    store_schema = True


class StoreSQLThreadSide(FloorSide):
    name = "store-sql-thread"
    on_thread = True
    store_schema = True


FLOORS: dict[str, type[FloorSide]] = {
    side.name: side for side in (LimitThreadSide, StoreSQLSide, StoreSQLThreadSide)
}
