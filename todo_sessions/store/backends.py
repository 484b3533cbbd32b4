"""The backends, and the one place that picks one: `open_recorder` (a store's or a
migration's recorder), `run_locked_on_engine` and `lock_host_connection` (a host's own
engine or connection), `classify_error` (each driver's half of error translation).

A backend is one package that owns everything of its driver: ``store/sqlite/`` (``sqlite3``)
and ``store/postgres/`` (asyncpg). Each gives a recorder (`recorder.Recorder`) with the
migrations' hatch below (`BackendRecorder.run_locked`), its migration lock, and its
``classify_error``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Protocol, TypeVar

from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from . import postgres, sqlite
from .engine import SQLiteOptions, StoreURL, parse_url, replica_url
from .namespace import DEFAULT, Namespace
from .options import PostgresOptions
from .recorder import Recorder

__all__ = [
    "BackendRecorder",
    "check_listen_target",
    "classify_error",
    "is_driver_error",
    "lock_host_connection",
    "open_recorder",
    "replica_target",
    "run_locked_on_engine",
]

T = TypeVar("T")

_BACKENDS = {"sqlite": sqlite, "postgresql": postgres}


class BackendRecorder(Recorder, Protocol):
    """A backend's recorder: the contract, plus the migrations' hatch outside it (a sync
    SQLAlchemy connection under the migration lock, for alembic's ``env.py``). Nothing else
    is run on a store's connection but the contract's named operations; tests that must
    write what the store never would use a connection of their own."""

    async def run_locked(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(connection)`` in one transaction under the migration lock."""
        ...


def open_recorder(
    target: StoreURL,
    *,
    sqlite: SQLiteOptions | None = None,
    postgres: PostgresOptions | None = None,
    namespace: Namespace | None = None,
) -> BackendRecorder:
    """The recorder for ``target``'s backend (not yet connected) with that backend's options
    (None: the defaults), for the tables of ``namespace`` (None: the default namespace)."""
    namespace = DEFAULT if namespace is None else namespace
    namespace.check_dialect(target.dialect)
    if target.dialect == "postgresql":
        return _postgres.PostgresRecorder(target, postgres or PostgresOptions(), namespace)
    return _sqlite.SQLiteRecorder(target, sqlite or SQLiteOptions(), namespace)


_sqlite, _postgres = sqlite, postgres  # the modules (``open_recorder``'s parameters' names)


def check_listen_target(listen: StoreURL) -> None:
    """A store's ``listen_url`` must name a PostgreSQL database (a direct connection)."""
    if listen.dialect != "postgresql":
        raise ValueError("listen_url must be a PostgreSQL URL (a direct connection)")


def replica_target(target: StoreURL, read_url: str | URL | None) -> StoreURL | None:
    """A store's read replica: ``read_url``, else the URL's ``replica=`` hosts (`replica_url`);
    PostgreSQL only, and only one of the two."""
    from_url = replica_url(target)
    if read_url is None:
        return from_url
    if from_url is not None:
        raise ValueError("give a read replica once: read_url or the URL's replica=, not both")
    replica = parse_url(read_url)
    if replica.dialect != "postgresql" or target.dialect != "postgresql":
        raise ValueError("read_url needs a PostgreSQL store and a PostgreSQL URL (a replica)")
    return replica


def _backend(dialect_name: str) -> ModuleType:
    found = _BACKENDS.get(dialect_name)
    if found is None:
        raise ValueError(f"unsupported database {dialect_name!r}: use sqlite or postgresql")
    return found


async def run_locked_on_engine(engine: AsyncEngine, fn: Callable[[Connection], T]) -> T:
    """Run ``fn(sync connection)`` on one of a host's `AsyncEngine` connections, in one
    transaction holding its backend's migration lock."""
    return await _backend(engine.dialect.name).run_locked_on_engine(engine, fn)


def lock_host_connection(connection: Connection, *, began: bool) -> None:
    """Take the migration lock on a host's connection (``began``: in the transaction we just
    began on it; else in the host's own)."""
    _backend(connection.dialect.name).lock_host_connection(connection, began=began)


def classify_error(exc: BaseException) -> str | None:
    """What kind of driver failure ``exc`` is (``locked``, ``busy``, ``missing``, ``lost``,
    ``unique``), by the backend whose driver raised it; None when neither knows it."""
    for backend in (sqlite, postgres):
        kind = backend.classify_error(exc)
        if kind is not None:
            return kind
    return None


def is_driver_error(exc: BaseException) -> bool:
    """Whether ``exc`` is an exception of one of the drivers."""
    return sqlite.is_driver_error(exc) or postgres.is_driver_error(exc)
