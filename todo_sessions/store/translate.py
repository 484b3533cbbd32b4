"""The one place where driver exceptions become todo_sessions errors (docs/design.md, Errors).

Most specific first: lock/busy → `StoreBusyError`; missing tables → `SchemaError`; a database
that cannot be reached or a connection that died → `StoreUnavailableError`; everything else
from the database → `StoreError`. The original exception is always chained.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc as sa_exc

from ..errors import (
    SchemaError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    TodoSessionsError,
)

__all__ = ["is_connection_lost", "is_unique_violation", "translate_errors", "translated"]

_BUSY_SQLSTATES = {"40001", "40P01", "55P03", "57014"}
_MISSING_SQLSTATES = {"42P01", "3F000"}


def _driver_error(exc: BaseException) -> BaseException:
    """The innermost driver exception (SQLAlchemy wraps; the asyncpg adapter wraps again)."""
    if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None:
        exc = exc.orig
    cause = exc.__cause__
    if cause is not None and type(cause).__module__.startswith("asyncpg"):
        return cause
    return exc


def _sqlstate(exc: BaseException) -> str | None:
    return getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)


_LOST_SQLSTATE_PREFIXES = ("08", "57P01", "57P02", "57P03")
"""Connection exceptions (class 08) and the server shutting the session down (admin shutdown,
crash shutdown, cannot connect now)."""

_LOST_ASYNCPG = frozenset(
    {
        "ConnectionDoesNotExistError",
        "ConnectionFailureError",
        "InternalClientError",  # "cannot switch to state ...": the protocol state is broken
    }
)


def is_connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` says the connection is dead (or never came up): the connection must
    be discarded, and the operation's outcome on the server is unknown if it was a commit."""
    driver = _driver_error(exc)
    if isinstance(driver, ConnectionError | TimeoutError):
        return True
    if isinstance(driver, OSError) and not isinstance(driver, sqlite3.Error):
        return True
    state = _sqlstate(driver)
    if state is not None and str(state).startswith(_LOST_SQLSTATE_PREFIXES):
        return True
    if type(driver).__module__.startswith("asyncpg"):
        if type(driver).__name__ == "InterfaceError":  # "connection is closed", ...
            return "closed" in str(driver)
        return type(driver).__name__ in _LOST_ASYNCPG
    return False


def is_unique_violation(exc: BaseException) -> bool:
    """True for a primary-key / unique violation from either backend."""
    driver = _driver_error(exc)
    if isinstance(driver, sqlite3.IntegrityError):
        text = str(driver)
        return "UNIQUE constraint failed" in text or "that seq already exists" in text
    return _sqlstate(driver) == "23505"


def translated(exc: BaseException, *, what: str) -> TodoSessionsError:
    """The todo_sessions error for a driver or SQLAlchemy exception raised while doing ``what``."""
    driver = _driver_error(exc)
    message = str(driver).strip().splitlines()[0] if str(driver).strip() else type(driver).__name__
    state = _sqlstate(driver)
    if isinstance(driver, sqlite3.OperationalError):
        lowered = message.lower()
        if "locked" in lowered or "busy" in lowered:
            return StoreBusyError(
                f"{what}: the database stayed locked past the busy timeout ({message})"
            )
        if "no such table" in lowered:
            return SchemaError(f"{what}: the database is not migrated ({message})")
    if state in _BUSY_SQLSTATES:
        return StoreBusyError(f"{what}: the database is busy ({message})")
    if state in _MISSING_SQLSTATES:
        return SchemaError(f"{what}: the database is not migrated ({message})")
    if is_connection_lost(driver):
        return StoreUnavailableError(
            f"{what}: cannot reach the database, or the connection to it was lost ({message})"
        )
    return StoreError(f"{what}: {type(driver).__name__}: {message}")


@contextmanager
def translate_errors(what: str) -> Iterator[None]:
    """Re-raise driver and SQLAlchemy errors as todo_sessions errors; ours pass through."""
    try:
        yield
    except TodoSessionsError:
        raise
    except (sa_exc.SQLAlchemyError, sqlite3.Error, OSError) as exc:
        raise translated(exc, what=what) from exc
    except UnicodeDecodeError as exc:  # SQLite text that is not UTF-8: a damaged file
        raise StoreError(
            f"{what}: the database holds text that is not valid UTF-8 ({exc.reason} at byte "
            f"{exc.start}); the file is damaged: run `todo-sessions verify`"
        ) from exc
    except Exception as exc:
        if type(exc).__module__.startswith("asyncpg"):
            raise translated(exc, what=what) from exc
        raise
