"""The one place where driver exceptions become todo_sessions errors (docs/design.md, Errors).

Each backend module knows its driver's exceptions by class (and, where the driver has them,
by error code or SQLSTATE): its half, ``classify_error``, says what kind of failure an
exception is (`backends.classify_error` asks each). This module turns the kind into our error,
most specific first: lock/busy → `StoreBusyError`; missing tables → `SchemaError`; a write on
a server that takes none (a standby) → `StandbyServerError`; a database that cannot be reached
or a connection that died → `StoreUnavailableError`; everything else
from the database → `StoreError`. The original exception is always chained.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from sqlalchemy import exc as sa_exc

from ..errors import (
    SchemaError,
    StandbyServerError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    TodoSessionsError,
)
from .backends import classify_error, is_driver_error

__all__ = [
    "is_connection_lost",
    "is_unique_violation",
    "raise_translated",
    "translate_errors",
    "translated",
]


def _unwrapped(exc: BaseException) -> BaseException:
    """The driver's exception under SQLAlchemy's wrapper (if any)."""
    if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None:
        return exc.orig
    return exc


def _kind(exc: BaseException) -> str | None:
    """What kind of failure ``exc`` is: a backend's ``classify_error``, else a network
    error (lost), else None."""
    driver = _unwrapped(exc)
    kind = classify_error(driver)
    if kind is not None:
        return kind
    for candidate in (driver, driver.__cause__):
        if isinstance(candidate, OSError | TimeoutError):
            return "lost"
    return None


def is_connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` says the connection is dead (or never came up): the connection must
    be discarded, and the operation's outcome on the server is unknown if it was a commit."""
    return _kind(exc) in ("lost", "standby")


def is_unique_violation(exc: BaseException) -> bool:
    """True for a primary-key / unique violation from either backend."""
    return _kind(exc) == "unique"


def translated(exc: BaseException, *, what: str) -> TodoSessionsError:
    """The todo_sessions error for a driver or SQLAlchemy exception raised while doing ``what``."""
    driver = _unwrapped(exc)
    cause = driver.__cause__
    if cause is not None and is_driver_error(cause):  # the asyncpg adapter wraps again
        driver = cause
    text = str(driver).strip()
    message = text.splitlines()[0] if text else type(driver).__name__
    kind = _kind(exc)
    if kind == "locked":
        return StoreBusyError(
            f"{what}: the database stayed locked past the busy timeout ({message})"
        )
    if kind == "busy":
        return StoreBusyError(f"{what}: the database is busy ({message})")
    if kind == "missing":
        return SchemaError(f"{what}: the database is not migrated ({message})")
    if kind == "standby":
        return StandbyServerError(
            f"{what}: the server does not take writes (a standby, or in recovery: a failover?); "
            f"no host of the URL took the write in time ({message})"
        )
    if kind == "lost":
        return StoreUnavailableError(
            f"{what}: cannot reach the database, or the connection to it was lost ({message})"
        )
    return StoreError(f"{what}: {type(driver).__name__}: {message}")


def raise_translated(exc: Exception, what: str) -> NoReturn:
    """Raise what `translate_errors` makes of ``exc``: for a hot path that catches the error
    itself, so that a call that succeeds pays for no context manager."""
    with translate_errors(what):
        raise exc
    raise AssertionError("unreachable: translate_errors re-raises what it catches")


@contextmanager
def translate_errors(what: str) -> Iterator[None]:
    """Re-raise driver and SQLAlchemy errors as todo_sessions errors; ours pass through."""
    try:
        yield
    except TodoSessionsError:
        raise
    except UnicodeDecodeError as exc:  # SQLite text that is not UTF-8: a damaged file
        raise StoreError(
            f"{what}: the database holds text that is not valid UTF-8 ({exc.reason} at byte "
            f"{exc.start}); the file is damaged: run `todo-sessions verify`"
        ) from exc
    except Exception as exc:
        if isinstance(exc, sa_exc.SQLAlchemyError | OSError) or is_driver_error(exc):
            raise translated(exc, what=what) from exc
        raise
