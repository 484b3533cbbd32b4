"""Running our alembic migrations from code: ``await migrate(url)``, or ``migrate_on(connection)``
on a connection a host application gives us (e.g. inside its own alembic ``env.py``).

Migrations run on a connection that first takes the database's write lock (``BEGIN IMMEDIATE``
on SQLite, a transaction-scoped advisory lock on PostgreSQL), then reads the current revision
and upgrades only if needed, all in one transaction. Several processes opening a brand-new
database at once therefore serialise, and all but the first find nothing to do.

The migration scripts ship inside the wheel as ``todo_sessions/_migrations``; in a checkout
they are the top-level ``migrations/`` folder.

Alembic keeps its "current environment" in module globals; every alembic run of ours leaves
them exactly as it found them (`revisions`), so a host's ``alembic upgrade`` that calls us goes
on unharmed. Our history has its own script
directory and version table (``todo_sessions_alembic_version``); it is never merged into the
host's. `alembic_include_object` / `alembic_include_name` keep the host's autogenerate away
from our tables.

Every function takes a namespace (``schema=`` / ``table_prefix=``, or a URL's parameters of
those names; `namespace.resolve`): the revisions read it from ``config.attributes``
(`namespace.migration_namespace`) and create, change and drop that namespace's tables,
triggers and version table only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from alembic import command
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..errors import SchemaError
from . import backends
from .engine import StoreURL, parse_url
from .namespace import DEFAULT, Namespace, resolve
from .recorder import Recorder
from .revisions import (
    alembic_config,
    current_revision,
    head_revision,
    migrations_dir,
    run_alembic,
    upgrade,
)
from .translate import translate_errors

__all__ = [
    "alembic_config",
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
    """Run ``fn(sync_connection)`` in one transaction holding the migration lock (SQLite
    ``BEGIN IMMEDIATE``, PostgreSQL's advisory lock): a tool for alembic's ``env.py`` and for
    maintenance, outside the recorder contract.

    ``target`` is a URL (a recorder is opened for it and closed afterwards) or an application's
    own `AsyncEngine` (its backend's lock is taken on one of its connections).
    """
    with translate_errors("migrating the database"):
        if isinstance(target, AsyncEngine):
            return await backends.run_locked_on_engine(target, fn)
        parsed = target if isinstance(target, StoreURL) else parse_url(target)
        recorder = backends.open_recorder(parsed, namespace=namespace_of(parsed))
        try:
            await recorder.open()
            return await recorder.run_locked(fn)
        finally:
            await recorder.close()


async def _migrate_url(
    target: StoreURL, revision: str, downgrade: bool, namespace: Namespace
) -> None:
    """Migrate the database of ``target`` through a recorder of its own (`Recorder.migrate`)."""
    with translate_errors("migrating the database"):
        recorder = backends.open_recorder(target, namespace=namespace)
        try:
            await recorder.open()
            await recorder.migrate(revision, downgrade=downgrade)
        finally:
            await recorder.close()


async def prepare_schema(
    recorder: Recorder,
    *,
    migrate: bool,
    url: str,
    read_only: bool = False,
) -> str:
    """Check the schema of an open recorder's database (its namespace's tables), upgrade it
    if ``migrate`` (else a `SchemaError` when it is behind), and return the database's store
    id."""
    revision = await recorder.schema_revision()
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
        await recorder.migrate("head")
    store_id = await recorder.store_id()
    if store_id is None:
        raise SchemaError(f"{url}: store_state has no store id; not our database")
    return store_id


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
            "synchronous Connection or Engine call todo_sessions.alembic.migrate_on(connection)"
        )
    if isinstance(url, AsyncConnection):
        namespace = _resolved(url.dialect.name, schema, table_prefix)
        with translate_errors("migrating the database"):
            await url.run_sync(lambda conn: _migrate_on(conn, revision, namespace))
        return
    if isinstance(url, AsyncEngine):
        namespace = _resolved(url.dialect.name, schema, table_prefix)
        await run_locked(url, lambda conn: upgrade(conn, revision, namespace))
        return
    target = parse_url(url)
    namespace = _resolved(target.dialect, schema, table_prefix, target)
    await _migrate_url(target, revision, False, namespace)


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
            backends.lock_host_connection(connection, began=False)
            upgrade(connection, revision, namespace)
            return
        with connection.begin():
            backends.lock_host_connection(connection, began=True)
            upgrade(connection, revision, namespace)


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
        await run_locked(
            url, lambda conn: run_alembic(conn, command.downgrade, revision, namespace)
        )
        return
    target = parse_url(url)
    namespace = _resolved(target.dialect, schema, table_prefix, target)
    await _migrate_url(target, revision, True, namespace)
