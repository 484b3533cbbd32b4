"""The ``sqlite3`` driver: connections with the store's settings, the write lock's wait, the
compiled statements, and this driver's half of error translation."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from ..engine import SQLiteOptions, StoreURL, sqlite_pragmas
from ..namespace import Namespace, Statements

T = TypeVar("T")

BEGIN_WRITE = "BEGIN IMMEDIATE"
"""How every write transaction starts: the write lock up front, so two processes never
deadlock upgrading a read lock."""

_DIALECT: Any = sqlite_dialect.dialect(paramstyle="qmark")

_FIRST_WAIT = 1e-3
"""The first wait for another process's write lock (seconds); each wait after it doubles, up
to `_LONGEST_WAIT`. Not shorter: every try is a read transaction begun and ended, and a
reader's mark taken while the holder commits keeps that commit's checkpoint from copying the
whole WAL, so the WAL cannot start over and every later commit past `wal_autocheckpoint`
runs a checkpoint of its own (two more fsyncs). Counted with 2 and 4 writer processes
(bench/RESULTS.md, "Store v4: the catch-up's fsync and the lock waits"): a first wait of
20 µs made 1.2-1.5 fsyncs an append and 2.8 tries, 1 ms 1.03-1.06 and 0.3-1.0."""
_LONGEST_WAIT = 2e-3


def begin_write(conn: sqlite3.Connection, patience: float) -> None:
    """``BEGIN IMMEDIATE`` on a connection whose busy timeout is 0 (the writer's, in WAL
    mode): while another process holds the write lock, try again after 1 ms, then every
    2 ms, until ``patience`` seconds have passed (then SQLite's own "database is locked"
    error, as a busy timeout would give).

    SQLite's own busy handler sleeps 1, 2, 5, 10, ... up to 100 ms between its tries; Python's
    ``sqlite3`` gives no way to install another one. Under steady contention (writer
    processes appending back to back) the lock is never idle while one waits, so a wait of a
    millisecond costs no throughput; a handler whose sleeps grow to 100 ms would leave it idle.
    """
    try:
        conn.execute(BEGIN_WRITE)
        return
    except sqlite3.OperationalError as exc:
        if classify_error(exc) != "locked":
            raise
    deadline = time.monotonic() + patience
    wait = _FIRST_WAIT
    while True:
        time.sleep(wait)
        try:
            conn.execute(BEGIN_WRITE)
            return
        except sqlite3.OperationalError as exc:
            if classify_error(exc) != "locked" or time.monotonic() >= deadline:
                raise
        wait = min(wait * 2, _LONGEST_WAIT)


def statements(namespace: Namespace) -> Statements:
    """The namespace's statements compiled for ``sqlite3`` (once per namespace)."""
    return namespace.compiled("sqlite", _DIALECT, sqlite_dialect.insert)


def connect_sqlite(target: StoreURL, options: SQLiteOptions) -> sqlite3.Connection:
    """A ``sqlite3`` connection with the store's settings and no implicit transactions."""
    timeout = options.busy_timeout_ms / 1000
    if target.path is not None and options.read_only:
        uri = f"{target.path.as_uri()}?mode=ro{immutable(target.path)}"
        conn = sqlite3.connect(
            uri, uri=True, isolation_level=None, check_same_thread=False, timeout=timeout
        )
    elif target.path is not None:
        conn = sqlite3.connect(
            target.path, isolation_level=None, check_same_thread=False, timeout=timeout
        )
    else:
        name = target.url.database
        if name and name != ":memory:":  # a named shared-cache memory database
            uri = f"file:{name}?mode=memory&cache=shared"
            conn = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False, timeout=timeout
            )
        else:
            conn = sqlite3.connect(
                ":memory:", isolation_level=None, check_same_thread=False, timeout=timeout
            )
    try:
        for pragma in sqlite_pragmas(options, memory=target.memory):
            if pragma.startswith("PRAGMA journal_mode"):
                _set_journal_mode(conn, pragma, options.busy_timeout_ms / 1000)
            else:
                conn.execute(pragma)
    except BaseException:
        conn.close()
        raise
    return conn


def own_lock_waits(target: StoreURL, options: SQLiteOptions) -> bool:
    """Whether the writer waits for other processes' write locks itself (`begin_write`), with
    a busy timeout of 0: a file in WAL mode, where a write transaction waits for a lock only
    at its BEGIN IMMEDIATE (readers never hold one a writer needs; a rollback journal's COMMIT
    waits for readers, so there SQLite's busy timeout stays)."""
    return target.path is not None and options.journal_mode.upper() == "WAL"


def immutable(path: Path) -> str:
    """``&immutable=1`` for a file in a directory this process may not write, with no WAL
    file beside it: SQLite cannot create the ``-shm`` file a WAL database needs even to be
    read, and nobody can change the file without creating its ``-wal`` in that directory
    first (docs/design.md, "Read-only databases")."""
    wal = path.with_name(path.name + "-wal")
    if os.access(path.parent, os.W_OK | os.X_OK) or wal.exists():
        return ""
    return "&immutable=1"


def _set_journal_mode(conn: sqlite3.Connection, pragma: str, patience: float) -> None:
    """Set the journal mode unless the file has it already. Changing it needs a lock that
    SQLite does not wait for (no busy handler): while another process holds one (opening a
    new file and migrating it), try again until the busy timeout has passed."""
    deadline = time.monotonic() + patience
    while not _already(conn, pragma):
        try:
            conn.execute(pragma)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _already(conn: sqlite3.Connection, pragma: str) -> bool:
    """Whether ``PRAGMA journal_mode = X`` would change nothing (reading it takes no lock;
    WAL, once set, is a property of the file)."""
    wanted = pragma.rsplit("=", 1)[1].strip().lower()
    current = conn.execute("PRAGMA journal_mode").fetchone()
    return current is not None and str(current[0]).lower() == wanted


# -- this driver's half of error translation, and a host's connections --------------------------


def is_driver_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error)


_LOCKED_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_UNIQUE_CODES = frozenset({sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE})
_SEQ_TAKEN = "that seq already exists"
"""The message of our own trigger that refuses a replaced event row (revision 0003)."""


def classify_error(exc: BaseException) -> str | None:
    """``locked`` (busy or locked past the busy timeout), ``missing`` (no such table),
    ``unique`` (a primary-key or unique violation), or None: by the ``sqlite3`` exception's
    class and (extended) error code; SQLite gives a missing table no code of its own."""
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    text = str(exc).lower()
    if isinstance(exc, sqlite3.OperationalError):
        if code is not None and code & 0xFF in _LOCKED_CODES:
            return "locked"
        if code is None and ("locked" in text or "busy" in text):  # raised without a code
            return "locked"
        if "no such table" in text:
            return "missing"
    if isinstance(exc, sqlite3.IntegrityError) and (code in _UNIQUE_CODES or _SEQ_TAKEN in text):
        return "unique"
    return None


def lock_host_connection(connection: Connection, *, began: bool) -> None:
    """A host's connection about to be migrated: in a transaction we just began, through the
    standard ``sqlite3`` driver (whose legacy transaction control would run each DDL
    statement on its own), take the write lock and make the migration one transaction. In the
    host's own transaction there is nothing to take: it holds its locks already."""
    if not began:
        return
    driver = connection.connection.driver_connection
    legacy = getattr(sqlite3, "LEGACY_TRANSACTION_CONTROL", -1)  # Python 3.12+
    if (
        isinstance(driver, sqlite3.Connection)
        and not driver.in_transaction
        and getattr(driver, "autocommit", legacy) == legacy
    ):
        connection.exec_driver_sql(BEGIN_WRITE)


async def run_locked_on_engine(engine: AsyncEngine, fn: Callable[[Connection], T]) -> T:
    """``fn(sync connection)`` on a host's SQLite `AsyncEngine` (aiosqlite), in one
    transaction that starts with ``BEGIN IMMEDIATE``."""
    async with engine.connect() as conn:
        await conn.exec_driver_sql(BEGIN_WRITE)
        try:
            result = await conn.run_sync(fn)
        except BaseException:
            await conn.rollback()
            raise
        await conn.commit()
        return result
