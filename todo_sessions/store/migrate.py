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

Every function takes a namespace (``schema=`` / ``table_prefix=``, or a URL's parameters of
those names; `namespace.resolve`): the revisions read it from ``config.attributes``
(`namespace.migration_namespace`) and create, change and drop that namespace's tables,
triggers and version table only.
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
from .namespace import DEFAULT, MIGRATION_ATTRIBUTE, Namespace, resolve
from .reads import read_store_id
from .recorder import Recorder, open_recorder
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


def current_revision(connection: Connection, namespace: Namespace = DEFAULT) -> str | None:
    """The revision the namespace is at, or None if our migrations never ran on it."""
    context = MigrationContext.configure(
        connection,
        opts={
            "version_table": namespace.version_table,
            "version_table_schema": namespace.schema,
        },
    )
    heads = context.get_current_heads()
    if len(heads) > 1:
        raise SchemaError(f"database has several todo_sessions schema heads: {heads}")
    return heads[0] if heads else None


def check_revision(connection: Connection, namespace: Namespace = DEFAULT) -> str | None:
    """Return the current revision; refuse one this version does not know (a newer schema)."""
    revision = current_revision(connection, namespace)
    if revision is not None and revision not in known_revisions():
        raise SchemaError(
            f"database schema revision {revision!r} is unknown to this version of "
            f"todo_sessions (newest known: {head_revision()!r}); it was migrated by a newer version"
        )
    return revision


def check_not_foreign(connection: Connection, namespace: Namespace = DEFAULT) -> None:
    """Refuse a database that has tables with our names (in the namespace) that our
    migrations did not create."""
    names = inspect(connection).get_table_names(schema=namespace.schema)
    existing = set(names) & namespace.table_names
    if existing and current_revision(connection, namespace) is None:
        where = "" if namespace.schema is None else f" in schema {namespace.schema!r}"
        raise SchemaError(
            f"the database already has table(s) {sorted(existing)}{where} that todo_sessions "
            "did not create; give todo_sessions a namespace of its own (schema= on PostgreSQL, "
            "table_prefix= on SQLite) or another database"
        )


def namespace_of(
    target: StoreURL, *, schema: str | None = None, table_prefix: str | None = None
) -> Namespace:
    """The namespace of a URL's parameters and the keyword arguments (`namespace.resolve`)."""
    return resolve(
        target.dialect,
        schema=schema,
        table_prefix=table_prefix,
        url_schema=target.schema,
        url_table_prefix=target.table_prefix,
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
        parsed = target if isinstance(target, StoreURL) else parse_url(target)
        recorder = open_recorder(parsed, sqlite=SQLiteOptions(), namespace=namespace_of(parsed))
        try:
            await recorder.open()
            return await recorder.run_locked(fn)
        finally:
            await recorder.close()


def schema_revision(connection: Connection, namespace: Namespace = DEFAULT) -> str | None:
    """The current revision (None: never migrated), refusing a newer or foreign schema."""
    revision = check_revision(connection, namespace)
    if revision is None:
        check_not_foreign(connection, namespace)
    return revision


async def prepare_schema(
    recorder: Recorder,
    *,
    migrate: bool,
    url: str,
    read_only: bool = False,
    namespace: Namespace = DEFAULT,
) -> str:
    """Check the schema of an open recorder's database (the namespace's tables), upgrade it
    if ``migrate`` (else a `SchemaError` when it is behind), and return the database's store
    id."""
    revision = await recorder.run_sync(lambda c: schema_revision(c, namespace), write=False)
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
        await recorder.run_locked(lambda c: _upgrade(c, "head", namespace))
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


def _alembic(
    connection: Connection,
    action: Callable[..., Any],
    revision: str,
    namespace: Namespace = DEFAULT,
) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    config.attributes[MIGRATION_ATTRIBUTE] = namespace
    with _alembic_globals_kept():
        action(config, revision)


def _upgrade(
    connection: Connection, revision: str = "head", namespace: Namespace = DEFAULT
) -> str | None:
    before = check_revision(connection, namespace)
    if before is None:
        check_not_foreign(connection, namespace)
    target = head_revision() if revision == "head" else revision
    if before != target:
        _alembic(connection, command.upgrade, revision, namespace)
    return before


def _resolved(
    dialect: str, schema: str | None, table_prefix: str | None, target: StoreURL | None = None
) -> Namespace:
    if target is not None:
        return namespace_of(target, schema=schema, table_prefix=table_prefix)
    return resolve(dialect, schema=schema, table_prefix=table_prefix)


async def migrate(
    url: str | URL | AsyncEngine | AsyncConnection,
    *,
    revision: str = "head",
    schema: str | None = None,
    table_prefix: str | None = None,
) -> None:
    """Bring the database's todo_sessions schema up to ``revision`` (default: the newest).

    ``url`` is a database URL, or an application's own `AsyncEngine` or `AsyncConnection`
    (see `migrate_on` for how a connection's transaction is used). Safe to call from a
    running event loop and from several processes at once; a database already at the
    revision is left untouched. A synchronous `Connection` or `Engine` goes to `migrate_on`.
    ``schema`` (PostgreSQL) or ``table_prefix`` (SQLite), or the URL's parameters of those
    names, migrate that namespace (docs/design.md, "Namespaces").
    """
    if isinstance(url, Connection | Engine):
        raise TypeError(
            "migrate() is async and takes a URL, an AsyncEngine or an AsyncConnection; for a "
            "synchronous Connection or Engine call todo_sessions.migrate_on(connection)"
        )
    if isinstance(url, AsyncConnection):
        namespace = _resolved(url.dialect.name, schema, table_prefix)
        with translate_errors("migrating the database"):
            await url.run_sync(lambda conn: _migrate_on(conn, revision, namespace))
        return
    if isinstance(url, AsyncEngine):
        namespace = _resolved(url.dialect.name, schema, table_prefix)
        await run_locked(url, lambda conn: _upgrade(conn, revision, namespace))
        return
    target = parse_url(url)
    namespace = _resolved(target.dialect, schema, table_prefix, target)
    await run_locked(target, lambda conn: _upgrade(conn, revision, namespace))


def migrate_on(
    connection: Connection | Engine,
    *,
    revision: str = "head",
    schema: str | None = None,
    table_prefix: str | None = None,
) -> None:
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

    ``schema`` (PostgreSQL, created if missing) or ``table_prefix`` (SQLite) puts our tables
    and version table in that namespace; use the same namespace's hooks
    (``Namespace(schema=...).include_object``) in the host's ``context.configure``.
    """
    if isinstance(connection, AsyncConnection | AsyncEngine):
        raise TypeError(
            "migrate_on() takes a synchronous Connection or Engine; for an AsyncConnection or "
            "AsyncEngine use `await todo_sessions.migrate(connection)`"
        )
    if not isinstance(connection, Connection | Engine):
        raise TypeError(
            f"migrate_on() takes a SQLAlchemy Connection or Engine, got {type(connection).__name__}"
        )
    namespace = _resolved(connection.dialect.name, schema, table_prefix)
    if isinstance(connection, Engine):
        with connection.connect() as conn:
            _migrate_on(conn, revision, namespace)
        return
    _migrate_on(connection, revision, namespace)


def _migrate_on(connection: Connection, revision: str, namespace: Namespace) -> None:
    with translate_errors("migrating the database"):
        if connection.in_transaction():
            _lock(connection)
            _upgrade(connection, revision, namespace)
            return
        with connection.begin():
            _begin_immediate(connection)
            _lock(connection)
            _upgrade(connection, revision, namespace)


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


def alembic_include_name(name: str | None, type_: str, parent_names: Mapping[str, Any]) -> bool:
    """An ``include_name`` hook for a host application's alembic ``context.configure``: skip
    our tables (and their columns, indexes and constraints) and our version table, so the
    host's autogenerate never proposes to drop or change them. (The default namespace's;
    a namespace's own is `Namespace.include_name`.)"""
    return DEFAULT.include_name(name, type_, parent_names)


def alembic_include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """An ``include_object`` hook for a host application's alembic ``context.configure``:
    the same as `alembic_include_name`, judged on the objects (tables, and the indexes,
    columns and constraints of tables). (The default namespace's; a namespace's own is
    `Namespace.include_object`.)"""
    return DEFAULT.include_object(obj, name, type_, reflected, compare_to)


async def downgrade(
    url: str | URL | AsyncEngine,
    *,
    revision: str,
    schema: str | None = None,
    table_prefix: str | None = None,
) -> None:
    """Step the schema back to ``revision`` (``"base"`` drops every table we own in the
    namespace; a PostgreSQL schema itself stays, with our empty version table)."""
    if isinstance(url, AsyncEngine):
        namespace = _resolved(url.dialect.name, schema, table_prefix)
        await run_locked(url, lambda conn: _alembic(conn, command.downgrade, revision, namespace))
        return
    target = parse_url(url)
    namespace = _resolved(target.dialect, schema, table_prefix, target)
    await run_locked(target, lambda conn: _alembic(conn, command.downgrade, revision, namespace))
