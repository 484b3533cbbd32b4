"""Running our alembic migrations from code: ``await migrate(url)``, or ``migrate_on(connection)``
on a connection a host application gives us (e.g. inside its own alembic ``env.py``).

Migrations run on a connection that first takes the database's write lock (``BEGIN IMMEDIATE``
on SQLite, a transaction-scoped advisory lock on PostgreSQL), then reads the current revision
and upgrades only if needed, all in one transaction. Several processes opening a brand-new
database at once therefore serialise, and all but the first find nothing to do.

The migration scripts ship inside the wheel as ``todo_sessions/_migrations``; in a checkout
they are the top-level ``migrations/`` folder.

Alembic keeps its "current environment" in module globals: the ``alembic.context`` and
``alembic.op`` proxies. A host application running its own ``alembic upgrade`` has them set
up for its history while it calls us, so every alembic run of ours saves both modules' globals
first and puts them back afterwards (`_alembic_globals_kept`): the host's ``context.config``,
``context.configure`` and ``op`` are exactly what they were. Our history has its own script
directory and version table (``todo_sessions_alembic_version``); it is never merged into the
host's. `alembic_include_object` / `alembic_include_name` keep the host's autogenerate away
from our tables.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..errors import SchemaError
from .engine import SQLiteOptions, StoreURL, parse_url
from .reads import read_store_id
from .recorder import Recorder, open_recorder
from .schema import VERSION_TABLE, metadata
from .translate import translate_errors

__all__ = [
    "alembic_include_name",
    "alembic_include_object",
    "current_revision",
    "downgrade",
    "head_revision",
    "migrate",
    "migrate_on",
    "migrations_dir",
    "prepare_schema",
    "run_locked",
]

T = TypeVar("T")


def migrations_dir() -> Path:
    """Where the migration scripts are: inside the installed package, or the checkout."""
    packaged = Path(__file__).resolve().parent.parent / "_migrations"
    if (packaged / "env.py").is_file():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / "migrations"
    if (checkout / "env.py").is_file():
        return checkout
    raise SchemaError("todo_sessions migrations are missing from this installation")


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("path_separator", "os")
    return config


@cache
def head_revision() -> str:
    """The newest revision this version of the package knows."""
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise SchemaError(f"expected one migration head, found {heads}")
    return heads[0]


@cache
def known_revisions() -> frozenset[str]:
    script = ScriptDirectory.from_config(alembic_config())
    return frozenset(rev.revision for rev in script.walk_revisions())


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at, or None if our migrations never ran on it."""
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    heads = context.get_current_heads()
    if len(heads) > 1:
        raise SchemaError(f"database has several todo_sessions schema heads: {heads}")
    return heads[0] if heads else None


def check_revision(connection: Connection) -> str | None:
    """Return the current revision; refuse one this version does not know (a newer schema)."""
    revision = current_revision(connection)
    if revision is not None and revision not in known_revisions():
        raise SchemaError(
            f"database schema revision {revision!r} is unknown to this version of "
            f"todo_sessions (newest known: {head_revision()!r}); it was migrated by a newer version"
        )
    return revision


def check_not_foreign(connection: Connection) -> None:
    """Refuse a database that has tables with our names that our migrations did not create."""
    existing = set(inspect(connection).get_table_names()) & set(metadata.tables)
    if existing and current_revision(connection) is None:
        raise SchemaError(
            f"the database already has table(s) {sorted(existing)} that todo_sessions did not "
            "create; use another database (or schema) for todo_sessions"
        )


async def run_locked(
    target: str | URL | StoreURL | AsyncEngine, fn: Callable[[Connection], T]
) -> T:
    """Run ``fn(sync_connection)`` in one transaction holding the migration lock.

    ``target`` is a URL (a recorder is opened for it and closed afterwards) or an application's
    own `AsyncEngine`.
    """
    with translate_errors("migrating the database"):
        if isinstance(target, AsyncEngine):
            from .postgres import run_locked_on

            return await run_locked_on(target, fn)
        recorder = open_recorder(
            target if isinstance(target, StoreURL) else parse_url(target), sqlite=SQLiteOptions()
        )
        try:
            await recorder.open()
            return await recorder.run_locked(fn)
        finally:
            await recorder.close()


def schema_revision(connection: Connection) -> str | None:
    """The current revision (None: never migrated), refusing a newer or foreign schema."""
    revision = check_revision(connection)
    if revision is None:
        check_not_foreign(connection)
    return revision


async def prepare_schema(
    recorder: Recorder, *, migrate: bool, url: str, read_only: bool = False
) -> str:
    """Check the schema of an open recorder's database, upgrade it if ``migrate`` (else a
    `SchemaError` when it is behind), and return the database's store id."""
    revision = await recorder.run_sync(schema_revision, write=False)
    if revision != head_revision():
        state = "not migrated" if revision is None else f"at revision {revision!r}"
        if read_only:
            raise SchemaError(
                f"{url} is {state} and open read-only; open it writable once to migrate it"
            )
        if not migrate:
            raise SchemaError(
                f"{url} is {state}; run `todo-sessions migrate` or open the store with migrate=True"
            )
        await recorder.run_locked(_upgrade)
    store_id = await recorder.read(read_store_id)
    if store_id is None:
        raise SchemaError(f"{url}: store_state has no store id; not our database")
    return store_id


_ALEMBIC_RUN = threading.RLock()
"""One alembic run of ours at a time in this process (they borrow alembic's module globals)."""


@contextmanager
def _alembic_globals_kept() -> Iterator[None]:
    """Leave ``alembic.context`` and ``alembic.op`` exactly as they were found.

    An alembic run installs its `EnvironmentContext` and `Operations` as module-level proxies
    and removes them at its end (``_proxy = None``, ``config`` and ``script`` deleted), which
    would pull the rug from under a host application's ``alembic upgrade`` that calls us from
    its ``env.py`` or from one of its revisions. Both modules' globals are saved here and put
    back afterwards, whatever happened in between.
    """
    from alembic import context as context_module
    from alembic import op as op_module

    with _ALEMBIC_RUN:
        saved = [(vars(m), dict(vars(m))) for m in (context_module, op_module)]
        try:
            yield
        finally:
            for namespace, before in saved:
                for key in set(namespace) - set(before):
                    del namespace[key]
                namespace.update(before)


def _alembic(connection: Connection, action: Callable[..., Any], revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    with _alembic_globals_kept():
        action(config, revision)


def _upgrade(connection: Connection, revision: str = "head") -> str | None:
    before = check_revision(connection)
    if before is None:
        check_not_foreign(connection)
    target = head_revision() if revision == "head" else revision
    if before != target:
        _alembic(connection, command.upgrade, revision)
    return before


async def migrate(
    url: str | URL | AsyncEngine | AsyncConnection, *, revision: str = "head"
) -> None:
    """Bring the database's todo_sessions schema up to ``revision`` (default: the newest).

    ``url`` is a database URL, or an application's own `AsyncEngine` or `AsyncConnection`
    (see `migrate_on` for how a connection's transaction is used). Safe to call from a
    running event loop and from several processes at once; a database already at the
    revision is left untouched. A synchronous `Connection` or `Engine` goes to `migrate_on`.
    """
    if isinstance(url, Connection | Engine):
        raise TypeError(
            "migrate() is async and takes a URL, an AsyncEngine or an AsyncConnection; for a "
            "synchronous Connection or Engine call todo_sessions.migrate_on(connection)"
        )
    if isinstance(url, AsyncConnection):
        with translate_errors("migrating the database"):
            await url.run_sync(lambda conn: migrate_on(conn, revision=revision))
        return
    await run_locked(url, lambda conn: _upgrade(conn, revision))


def migrate_on(connection: Connection | Engine, *, revision: str = "head") -> None:
    """Run our migrations on a synchronous SQLAlchemy ``connection`` (or ``Engine``) that a
    host application gives us, e.g. from its own alembic ``env.py``.

    * A connection already in a transaction (the host's) is migrated inside it; committing
      it is the host's business (alembic's ``context.begin_transaction()`` does).
    * Otherwise (a fresh connection, or an `Engine`) the migration runs in a transaction of
      its own, committed before this returns.

    On PostgreSQL the transaction first takes our migration lock (an advisory lock held until
    it ends); on SQLite, outside a transaction of the driver's, it starts with ``BEGIN
    IMMEDIATE``. Our version table is ``todo_sessions_alembic_version``, apart from the host's
    ``alembic_version``, and alembic's module globals (``alembic.context``, ``alembic.op``)
    are left exactly as they were, so the host's own ``alembic upgrade`` goes on unharmed,
    before or after this call. Raises `SchemaError` for a foreign or newer schema.
    """
    if isinstance(connection, AsyncConnection | AsyncEngine):
        raise TypeError(
            "migrate_on() takes a synchronous Connection or Engine; for an AsyncConnection or "
            "AsyncEngine use `await todo_sessions.migrate(connection)`"
        )
    if isinstance(connection, Engine):
        with connection.connect() as conn:
            migrate_on(conn, revision=revision)
        return
    if not isinstance(connection, Connection):
        raise TypeError(
            f"migrate_on() takes a SQLAlchemy Connection or Engine, got {type(connection).__name__}"
        )
    with translate_errors("migrating the database"):
        if connection.in_transaction():
            _lock(connection)
            _upgrade(connection, revision)
            return
        with connection.begin():
            _begin_immediate(connection)
            _lock(connection)
            _upgrade(connection, revision)


def _lock(connection: Connection) -> None:
    """PostgreSQL: take our migration lock for the rest of the transaction."""
    if connection.dialect.name == "postgresql":
        from .postgres import MIGRATION_LOCK

        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})


def _begin_immediate(connection: Connection) -> None:
    """SQLite through the standard ``sqlite3`` driver outside a transaction of its own (its
    legacy transaction control would run each DDL statement on its own): take the write lock
    and make the migration one transaction, as our own stores do."""
    if connection.dialect.name != "sqlite":
        return
    driver = connection.connection.driver_connection
    legacy = getattr(sqlite3, "LEGACY_TRANSACTION_CONTROL", -1)  # Python 3.12+
    if (
        isinstance(driver, sqlite3.Connection)
        and not driver.in_transaction
        and getattr(driver, "autocommit", legacy) == legacy
    ):
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _ours(name: str | None, schema: str | None) -> bool:
    """A table of todo_sessions: one of our tables, or our alembic version table (in the
    default schema, where our migrations create them)."""
    return (
        schema is None and name is not None and (name in metadata.tables or name == VERSION_TABLE)
    )


def alembic_include_name(name: str | None, type_: str, parent_names: Mapping[str, Any]) -> bool:
    """An ``include_name`` hook for a host application's alembic ``context.configure``: skip
    our tables (and their columns, indexes and constraints) and our version table, so the
    host's autogenerate never proposes to drop or change them."""
    if type_ == "table":
        return not _ours(name, parent_names.get("schema_name"))
    if "table_name" in parent_names:
        return not _ours(parent_names["table_name"], parent_names.get("schema_name"))
    return True


def alembic_include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """An ``include_object`` hook for a host application's alembic ``context.configure``:
    the same as `alembic_include_name`, judged on the objects (tables, and the indexes,
    columns and constraints of tables)."""
    table = obj if type_ == "table" else getattr(obj, "table", None)
    table_name = name if type_ == "table" else getattr(table, "name", None)
    return not _ours(table_name, getattr(table, "schema", None))


async def downgrade(url: str | URL | AsyncEngine, *, revision: str) -> None:
    """Step the schema back to ``revision`` (``"base"`` drops every table we own)."""
    await run_locked(url, lambda conn: _alembic(conn, command.downgrade, revision))
