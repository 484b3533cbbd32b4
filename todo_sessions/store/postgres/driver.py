"""The asyncpg driver: compiled statements, the migration lock, and this driver's half of
error translation."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from ..namespace import Namespace, Statements

T = TypeVar("T")

MIGRATION_LOCK = 0x746F646F5F736573
"""Any fixed 64-bit key: serialises our migrations across PostgreSQL sessions."""

_DIALECT: Any = None


def statements(namespace: Namespace) -> Statements:
    """The namespace's statements compiled for asyncpg (once per namespace)."""
    global _DIALECT
    if _DIALECT is None:  # the asyncpg dialect module loads on first use
        from sqlalchemy.dialects.postgresql import asyncpg

        _DIALECT = asyncpg.dialect()
    return namespace.compiled("postgresql", _DIALECT, pg_dialect.insert)


def unwrapped(exc: BaseException) -> BaseException:
    return exc.orig if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None else exc


def take_migration_lock(connection: Connection) -> None:
    """Take our migration lock for the rest of the connection's transaction."""
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})


def lock_host_connection(connection: Connection, *, began: bool) -> None:
    """A host's connection about to be migrated, in its transaction or ours: the lock."""
    take_migration_lock(connection)


async def run_locked_on_engine(engine: AsyncEngine, fn: Callable[[Connection], T]) -> T:
    """Run ``fn(sync connection)`` in one transaction under the migration lock."""

    def locked(connection: Connection) -> T:
        take_migration_lock(connection)
        return fn(connection)

    async with engine.connect() as conn, conn.begin():
        return await conn.run_sync(locked)


# -- this driver's half of error translation ----------------------------------------------------

_BUSY_SQLSTATES = frozenset({"40001", "40P01", "55P03", "57014"})
"""Serialization failure, deadlock, lock not available, statement cancelled (a lock timeout)."""
_MISSING_SQLSTATES = frozenset({"42P01", "3F000"})
"""Undefined table, invalid schema name."""
_READ_ONLY_SQLSTATE = "25006"
"""read_only_sql_transaction: a write on a hot standby (or a server in recovery, or one with
``default_transaction_read_only``)."""
_LOST_SQLSTATE_PREFIXES = ("08", "53300", "57P01", "57P02", "57P03")
"""Connection exceptions (class 08), the server refusing a new connection for now (too many
connections: every pool reconnecting at once after a failover; cannot connect now: starting up,
shutting down, in recovery) and the server shutting the session down (admin shutdown, crash
shutdown): each tried again (on the next host) within the reconnect timeout."""


def _asyncpg_error(exc: BaseException) -> BaseException | None:
    """``exc`` (or what SQLAlchemy's asyncpg adapter wrapped) when it is asyncpg's. Without
    asyncpg loaded, no exception can be one of its."""
    asyncpg = sys.modules.get("asyncpg")
    if asyncpg is None:
        return None
    errors = asyncpg.exceptions
    classes = (errors.PostgresError, errors.InterfaceError, errors.InternalClientError)
    for candidate in (exc, exc.__cause__):
        if isinstance(candidate, classes):
            return candidate
    return None


def is_driver_error(exc: BaseException) -> bool:
    return _asyncpg_error(exc) is not None


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (raw, or wrapped by SQLAlchemy) says the connection is dead, or never
    came up: asyncpg's kind, or a network error."""
    driver = exc.orig if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None else exc
    if classify_error(driver) in ("lost", "standby"):  # a standby's connection is no use either
        return True
    return any(isinstance(e, OSError) for e in (driver, driver.__cause__))


def classify_error(exc: BaseException) -> str | None:
    """``busy``, ``missing``, ``unique``, ``standby``, ``lost``, or None: by asyncpg's exception
    classes and the server's SQLSTATE."""
    driver = _asyncpg_error(exc)
    if driver is None:
        return None
    errors = sys.modules["asyncpg"].exceptions
    state = str(getattr(driver, "sqlstate", None) or "")
    if state in _BUSY_SQLSTATES:
        return "busy"
    if state in _MISSING_SQLSTATES:
        return "missing"
    if state == "23505":
        return "unique"
    if state == _READ_ONLY_SQLSTATE:
        return "standby"
    if state.startswith(_LOST_SQLSTATE_PREFIXES):
        return "lost"
    if isinstance(driver, errors.TargetServerAttributeNotMatched):
        return "standby"  # no host of the URL is what it asks for (mid-failover: no primary)
    if isinstance(driver, errors.InternalClientError):  # "cannot switch to state ..."
        return "lost"
    if isinstance(driver, errors.InterfaceError) and "closed" in str(driver):
        return "lost"  # "connection is closed", ...: the class has no finer kinds
    return None
