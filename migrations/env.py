"""Alembic environment for todo_sessions.

Embedded use (``await todo_sessions.migrate(url)``, a store opening a database, or
``todo_sessions.alembic.migrate_on(connection)`` from a host application's own alembic run) hands a
connection in through ``config.attributes["connection"]``, already inside a transaction (ours,
holding the write lock on SQLite or an advisory lock on PostgreSQL, or the host's); this file
then only runs the migrations on it and never starts an event loop. The caller
(`todo_sessions.store.migrate`) saves alembic's ``context`` and ``op`` module globals around
the run and restores them, so a host's alembic environment survives this one. From the command line
(``alembic upgrade head`` in a checkout) the URL comes from ``TODO_SESSIONS_URL``.

The namespace (a PostgreSQL schema or an SQLite table prefix, docs/design.md "Namespaces")
comes in through ``config.attributes["todo_sessions_namespace"]``, or from the URL's ``schema``
/ ``table_prefix`` parameters on the command line; without either it is the default (today's
names). The revisions read it with ``migration_namespace()``. A missing schema is created here
before alembic creates its version table in it; an existing one (an administrator's, owned by
the migrating role) is used as it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from alembic import context
from sqlalchemy import Integer, text
from sqlalchemy.engine import Connection
from sqlalchemy.types import TypeEngine

from todo_sessions.store.namespace import MIGRATION_ATTRIBUTE, Namespace, migration_namespace


def include_name_of(namespace: Namespace) -> Callable[[str | None, str, Mapping[str, Any]], bool]:
    """Compare only our own tables (in the namespace's schema): a host application's tables
    are none of our business."""

    def include_name(name: str | None, type_: str, parent_names: Mapping[str, Any]) -> bool:
        if type_ == "schema":
            return name == namespace.schema
        if type_ == "table":
            return name in namespace.table_names and (
                parent_names.get("schema_name") == namespace.schema
            )
        # PostgreSQL's search column and its GIN index are outside the metadata (revision 0010)
        search = namespace.name("search_text")
        if type_ == "column" and parent_names.get("table_name") == search:
            return name != "doc"
        if type_ == "index":
            return name != f"ix_{search}_doc"
        return True

    return include_name


def include_object_of(namespace: Namespace, dialect: str) -> Callable[..., bool]:
    """PostgreSQL checks an event row's session with a statement trigger instead of the
    foreign key of ``session_events`` (revision 0012): the metadata's key is SQLite's only."""
    events_key = f"fk_{namespace.name('session_events')}_session_id_{namespace.name('sessions')}"

    def include_object(
        obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
    ) -> bool:
        return not (
            dialect == "postgresql" and type_ == "foreign_key_constraint" and name == events_key
        )

    return include_object


def compare_type(
    migration_context: Any,
    inspected_column: object,
    metadata_column: object,
    inspected_type: TypeEngine[Any],
    metadata_type: TypeEngine[Any],
) -> bool | None:
    """SQLite keeps every integer in up to 64 bits whatever its declared type (see revision
    0004): INTEGER and BIGINT are the same column there. Otherwise alembic's comparison."""
    if (
        migration_context.dialect.name == "sqlite"
        and isinstance(inspected_type, Integer)
        and isinstance(metadata_type, Integer)
    ):
        return False
    return None


def _schema_exists(connection: Connection, schema: str) -> bool:
    found = connection.execute(
        text("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = :schema"), {"schema": schema}
    )
    return found.first() is not None


def run_on(connection: Connection) -> None:
    namespace = migration_namespace()
    if namespace.schema is not None and not _schema_exists(connection, namespace.schema):
        # Only when missing: CREATE SCHEMA IF NOT EXISTS still needs CREATE on the database,
        # which a role migrating a schema an administrator made for it may well lack.
        connection.execute(text(f'CREATE SCHEMA "{namespace.schema}"'))
    context.configure(
        connection=connection,
        target_metadata=namespace.metadata,
        version_table=namespace.version_table,
        version_table_schema=namespace.schema,
        include_schemas=namespace.schema is not None,
        include_name=include_name_of(namespace),
        include_object=include_object_of(namespace, connection.dialect.name),
        render_as_batch=True,
        compare_type=compare_type,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    run_on(connection)
else:
    import asyncio

    from todo_sessions.store.engine import parse_url
    from todo_sessions.store.migrate import namespace_of, run_locked

    url = os.environ.get("TODO_SESSIONS_URL") or context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("set TODO_SESSIONS_URL to the database URL, e.g. sqlite:///sessions.db")
    target = parse_url(url)
    context.config.attributes[MIGRATION_ATTRIBUTE] = namespace_of(target)
    asyncio.run(run_locked(target, run_on))
