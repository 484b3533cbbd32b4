"""The SQLite hot paths: one writer connection, one thread hop per append; reader threads.

Why: an append is four statements in one transaction. Through SQLAlchemy over aiosqlite each
statement is a separate hop to the driver's thread plus Core's per-call work, which measured at
about a fifth of plain ``sqlite3``'s rate (see ``bench/store_bench.py``). Here the whole
transaction runs as one function on a dedicated writer thread, with the statements compiled
once from the same Core definitions. Appends from one store are serialised on that thread
(SQLite has one writer anyway); other processes are kept out by ``BEGIN IMMEDIATE`` and the
busy timeout.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy.dialects import sqlite as sqlite_dialect

from ..errors import SeqConflictError, SessionNotFoundError
from .engine import SQLiteOptions, connect_sqlite
from .gcpause import paused_gc
from .queries import append_state, compile_positional, insert_events, update_after_append
from .queries import insert_session as insert_session_for
from .reads import SQLiteRows
from .schema import session_events, sessions

__all__ = ["AppendOutcome", "SQLiteReader", "SQLiteWriter", "check_batch_start"]

T = TypeVar("T")

AppendOutcome = tuple[str, int, int]
"""``(incarnation, revision, next_seq)`` after a committed append."""

_DIALECT = sqlite_dialect.dialect(paramstyle="qmark")
_STATE_SQL, _STATE_ARGS = compile_positional(append_state, _DIALECT)
_UPDATE_SQL, _UPDATE_ARGS = compile_positional(update_after_append, _DIALECT)
_EVENT_COLUMNS = tuple(c.name for c in session_events.columns)
_INSERT_EVENTS_SQL, _ = compile_positional(
    insert_events.values({c: None for c in _EVENT_COLUMNS}), _DIALECT
)
_SESSION_COLUMNS = tuple(c.name for c in sessions.columns)
_INSERT_SESSION_SQL, _ = compile_positional(
    insert_session_for("sqlite").values({c: None for c in _SESSION_COLUMNS}), _DIALECT
)


def check_batch_start(session_id: str, first_seq: int, next_seq: int) -> None:
    if first_seq != next_seq:
        raise SeqConflictError(session_id, first_seq, next_seq)


def new_session_values(header: dict[str, Any], now: int) -> dict[str, Any]:
    return {
        **header,
        "incarnation": str(uuid.uuid4()),
        "revision": 0,
        "next_seq": 0,
        "updated_at": now,
    }


class SQLiteWriter:
    """Runs appends on one dedicated sqlite3 connection in one thread."""

    def __init__(self, path: Path, options: SQLiteOptions) -> None:
        self._path = path
        self._options = options
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="todo-sessions-writer")
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = connect_sqlite(self._path, self._options)
        return self._conn

    async def append(
        self,
        session_id: str,
        rows: Sequence[dict[str, Any]],
        header: dict[str, Any] | None,
        now: int,
    ) -> AppendOutcome:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, self._append, session_id, rows, header, now
        )

    def _append(
        self,
        session_id: str,
        rows: Sequence[dict[str, Any]],
        header: dict[str, Any] | None,
        now: int,
    ) -> AppendOutcome:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            state = conn.execute(_STATE_SQL, (session_id,)).fetchone()
            if state is None:
                if header is None:
                    raise SessionNotFoundError(session_id, "create it before the first append")
                values = new_session_values(header, now)
                conn.execute(_INSERT_SESSION_SQL, tuple(values[c] for c in _SESSION_COLUMNS))
                state = (0, 0, values["incarnation"])
            next_seq, revision, incarnation = state
            check_batch_start(session_id, rows[0]["seq"], next_seq)
            conn.executemany(
                _INSERT_EVENTS_SQL, [tuple(row[c] for c in _EVENT_COLUMNS) for row in rows]
            )
            new_next = next_seq + len(rows)
            params = {
                "b_next_seq": new_next,
                "b_revision": revision + 1,
                "b_updated_at": now,
                "b_id": session_id,
            }
            conn.execute(_UPDATE_SQL, tuple(params[name] for name in _UPDATE_ARGS))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return incarnation, revision + 1, new_next

    async def close(self) -> None:
        def _close() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, _close)
        self._executor.shutdown(wait=True)


class SQLiteReader:
    """Runs read operations on plain sqlite3 connections in a small pool of reader threads.

    Each read is one thread hop: the queries and the decoding of rows into events happen in the
    worker, inside one read transaction (a consistent WAL snapshot). Every worker thread has its
    own connection with the store's settings.
    """

    def __init__(self, path: Path, options: SQLiteOptions, *, workers: int = 2) -> None:
        self._path = path
        self._options = options
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="todo-sessions-reader")
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect_sqlite(self._path, self._options)
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _call(self, op: Callable[..., T], args: tuple[Any, ...]) -> T:
        conn = self._connection()
        conn.execute("BEGIN")
        try:
            with paused_gc():
                return op(SQLiteRows(conn), *args)
        finally:
            conn.execute("ROLLBACK")

    async def run(self, op: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, op, args)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._executor.shutdown, True)
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
