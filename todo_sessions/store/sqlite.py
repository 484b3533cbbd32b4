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
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy.dialects import sqlite as sqlite_dialect

from ..errors import SessionNotFoundError
from .append import AppendOutcome, check_batch_start, new_session_values
from .engine import SQLiteOptions, connect_sqlite
from .gcpause import paused_gc
from .queries import compile_append
from .reads import SQLiteRows

__all__ = ["SQLiteReader", "SQLiteWriter"]

T = TypeVar("T")

_SQL = compile_append(sqlite_dialect.dialect(paramstyle="qmark"))


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the awaiting task was cancelled; the work itself still ran
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


class _Worker:
    """One thread that runs calls in order and hands results back to the event loop.

    Leaner than a one-thread ``ThreadPoolExecutor`` (no work items, no concurrent futures to
    chain): measured about 15 µs less per call, which is a tenth of a single-event append.
    """

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            future, fn, args = call
            try:
                result, error = fn(*args), None
            except BaseException as exc:
                result, error = None, exc
            # A closed loop (RuntimeError) means nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                future.get_loop().call_soon_threadsafe(_settle, future, result, error)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._calls.put((future, fn, args))
        return await future

    def stop(self) -> None:
        """Finish the calls already queued, then end the thread."""
        self._calls.put(None)
        self._thread.join()


class SQLiteWriter:
    """Runs appends on one dedicated sqlite3 connection in one thread."""

    def __init__(self, path: Path, options: SQLiteOptions) -> None:
        self._path = path
        self._options = options
        self._worker = _Worker("todo-sessions-writer")
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
        return await self._worker.run(self._append, session_id, rows, header, now)

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
            state = conn.execute(_SQL.state.sql, (session_id,)).fetchone()
            if state is None:
                if header is None:
                    raise SessionNotFoundError(session_id, "create it before the first append")
                values = new_session_values(header, now)
                conn.execute(_SQL.insert_session.sql, _SQL.insert_session.args(values))
                state = (0, 0, values["incarnation"])
            next_seq, revision, incarnation = state
            check_batch_start(session_id, rows[0]["seq"], next_seq)
            conn.executemany(_SQL.insert_events.sql, [_SQL.insert_events.args(r) for r in rows])
            new_next = next_seq + len(rows)
            params = {
                "b_next_seq": new_next,
                "b_revision": revision + 1,
                "b_updated_at": now,
                "b_id": session_id,
            }
            conn.execute(_SQL.update.sql, _SQL.update.args(params))
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

        await self._worker.run(_close)
        await asyncio.get_running_loop().run_in_executor(None, self._worker.stop)


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
