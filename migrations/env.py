"""Alembic environment for todo_sessions.

Embedded use (``await todo_sessions.migrate(url)``, a store opening a database, or
``todo_sessions.migrate_on(connection)`` from a host application's own alembic run) hands a
connection in through ``config.attributes["connection"]``, already inside a transaction (ours,
holding the write lock on SQLite or an advisory lock on PostgreSQL, or the host's); this file
then only runs the migrations on it and never starts an event loop. The caller
(`todo_sessions.store.migrate`) saves alembic's ``context`` and ``op`` module globals around
the run and restores them, so a host's alembic environment survives this one. From the command line
(``alembic upgrade head`` in a checkout) the URL comes from ``TODO_SESSIONS_URL``.
"""

from __future__ import annotations

import os
from typing import Any

from alembic import context
from sqlalchemy import Integer
from sqlalchemy.engine import Connection
from sqlalchemy.types import TypeEngine

from todo_sessions.store.schema import VERSION_TABLE, metadata


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Compare only our own tables: a host application's tables are none of our business."""
    if type_ == "table":
        return name in metadata.tables
    return True


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


def run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_name=include_name,
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

    from todo_sessions.store.migrate import run_locked

    url = os.environ.get("TODO_SESSIONS_URL") or context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("set TODO_SESSIONS_URL to the database URL, e.g. sqlite:///sessions.db")
    asyncio.run(run_locked(url, run_on))
