"""Running our alembic migrations from code: ``await migrate(url)``.

Migrations run on a connection that first takes the database's write lock (``BEGIN IMMEDIATE``
on SQLite, a transaction-scoped advisory lock on PostgreSQL), then reads the current revision
and upgrades only if needed, all in one transaction. Several processes opening a brand-new
database at once therefore serialise, and all but the first find nothing to do.

The migration scripts ship inside the wheel as ``todo_sessions/_migrations``; in a checkout
they are the top-level ``migrations/`` folder.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from ..errors import SchemaError
from .engine import SQLiteOptions, StoreURL, parse_url
from .reads import read_store_id
from .recorder import Recorder, open_recorder
from .schema import VERSION_TABLE, metadata
from .translate import translate_errors

__all__ = [
    "current_revision",
    "downgrade",
    "head_revision",
    "migrate",
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


def _alembic(connection: Connection, action: Callable[..., Any], revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    action(config, revision)


def _upgrade(connection: Connection, revision: str = "head") -> str | None:
    before = check_revision(connection)
    if before is None:
        check_not_foreign(connection)
    target = head_revision() if revision == "head" else revision
    if before != target:
        _alembic(connection, command.upgrade, revision)
    return before


async def migrate(url: str | URL | AsyncEngine, *, revision: str = "head") -> None:
    """Bring the database's todo_sessions schema up to ``revision`` (default: the newest).

    Safe to call from a running event loop and from several processes at once; a database
    already at the revision is left untouched.
    """
    await run_locked(url, lambda conn: _upgrade(conn, revision))


async def downgrade(url: str | URL | AsyncEngine, *, revision: str) -> None:
    """Step the schema back to ``revision`` (``"base"`` drops every table we own)."""
    await run_locked(url, lambda conn: _alembic(conn, command.downgrade, revision))
