"""Reader threads, and the short reads run inline on the caller's thread."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .. import reads
from ..engine import SQLiteOptions, StoreURL
from ..read_sql import CompiledRead
from .driver import (
    connect_sqlite,
    immutable,
)

T = TypeVar("T")

READERS = 2
"""Reader threads of a file database."""
THREADS = 1 + READERS
"""Most threads one SQLite store ever runs: the writer and the readers."""


class SQLiteRows:
    """`reads.Rows` on a plain sqlite3 connection, with its namespace's compiled reads."""

    __slots__ = ("_conn", "_reads")

    def __init__(self, conn: sqlite3.Connection, reads: Mapping[str, CompiledRead]) -> None:
        self._conn = conn
        self._reads = reads

    def fetch(self, name: str, params: Mapping[str, Any]) -> list[Any]:
        read = self._reads[name]
        return self._conn.execute(read.sql, read.args(params)).fetchall()


def read_on(
    conn: sqlite3.Connection,
    reads: Mapping[str, CompiledRead],
    op: Callable[..., T],
    args: tuple[Any, ...],
) -> T:
    conn.execute("BEGIN")
    try:
        return op(SQLiteRows(conn, reads), *args)
    finally:
        conn.execute("ROLLBACK")


WAIT: Any = object()
"""`Readers.inline`'s answer when the read would have to wait: run it on a reader thread."""


class Readers:
    """Reader threads, each with its own connection, created as reads need them; and the
    short reads run inline on the caller's thread (`inline`, see the module docstring)."""

    def __init__(
        self,
        target: StoreURL,
        options: SQLiteOptions,
        reads: Mapping[str, CompiledRead],
        writer: threading.Thread,
    ) -> None:
        self._target = target
        self._options = options
        self._reads = reads
        self._executor = ThreadPoolExecutor(READERS, thread_name_prefix="todo-sessions-reader")
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._writer = writer
        self._inline_ok = options.journal_mode.upper() == "WAL"
        self._inline_lock = threading.Lock()
        """Held by an inline read, and by `close` (an inline read never waits for it)."""
        self._inline_local = threading.local()
        self._inline_conns: list[sqlite3.Connection] = []

    def inline(self, op: Callable[..., T], args: tuple[Any, ...]) -> T:
        """``op`` in a read transaction on this thread's own inline connection (WAL, busy
        timeout 0), or `WAIT` where it would have to wait: SQLite answered busy (a WAL
        recovery, a connection in exclusive locking mode), the file is not in WAL mode, the
        store is closing, or this is the writer's thread (never a read beside its write
        transaction on the same thread)."""
        if not self._inline_ok or threading.current_thread() is self._writer:
            return WAIT
        if not self._inline_lock.acquire(blocking=False):
            return WAIT
        try:
            conn: sqlite3.Connection | None = getattr(self._inline_local, "conn", None)
            if conn is None:
                conn = self._open_inline()
                if conn is None:
                    return WAIT
            if op in reads.ONE_STATEMENT:  # its own snapshot: no BEGIN ... ROLLBACK around it
                return op(SQLiteRows(conn, self._reads), *args)
            return read_on(conn, self._reads, op, args)
        except sqlite3.Error:  # busy, or anything else: a reader thread tries (and tells)
            return WAIT
        finally:
            self._inline_lock.release()

    def _open_inline(self) -> sqlite3.Connection | None:
        """This thread's inline connection: no busy timeout, no writes, and only on a file in
        WAL mode (else None, and no inline reads from then on). Opening it sets nothing that
        needs a lock (the writer has set WAL on the file already)."""
        target = self._target
        if target.path is None:
            self._inline_ok = False
            return None
        if self._options.read_only:
            uri, name = True, f"{target.path.as_uri()}?mode=ro{immutable(target.path)}"
        else:
            uri, name = False, str(target.path)
        conn = sqlite3.connect(
            name, uri=uri, isolation_level=None, check_same_thread=False, timeout=0
        )
        try:
            conn.execute("PRAGMA query_only = ON")
            mode = conn.execute("PRAGMA journal_mode").fetchone()
        except BaseException:  # busy: try again next time
            conn.close()
            raise
        if mode is None or str(mode[0]).lower() != "wal":
            conn.close()
            self._inline_ok = False
            return None
        self._inline_local.conn = conn
        self._inline_conns.append(conn)
        return conn

    def _call(self, op: Callable[..., T], args: tuple[Any, ...]) -> T:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect_sqlite(self._target, self._options)
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return read_on(conn, self._reads, op, args)

    async def run(self, op: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self._call, op, args
        )

    def close(self) -> None:
        """Wait for running reads, then close every reader connection."""
        self._executor.shutdown(wait=True)
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        with self._inline_lock:
            self._inline_ok = False
            for conn in self._inline_conns:
                conn.close()
            self._inline_conns.clear()


def close_readers(_conn: None, readers: Readers) -> None:
    readers.close()
