"""Our alembic history on a SQLAlchemy connection: where the scripts are, which revision a
namespace is at, and running an upgrade or downgrade with alembic's module globals kept.

These run on a connection that already holds the migration lock: a backend's `migrate`
(`recorder.Recorder.migrate`), `migrate.run_locked`, or a host's own transaction
(`migrate.migrate_on`). Alembic keeps its "current environment" in module globals: the
``alembic.context`` and ``alembic.op`` proxies. A host application running its own ``alembic
upgrade`` has them set up for its history while it calls us, so every alembic run of ours
saves both modules' globals first and puts them back afterwards (`_alembic_globals_kept`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from ..errors import SchemaError
from .namespace import DEFAULT, MIGRATION_ATTRIBUTE, Namespace

__all__ = [
    "alembic_config",
    "check_not_foreign",
    "check_revision",
    "current_revision",
    "head_revision",
    "known_revisions",
    "migrations_dir",
    "run_alembic",
    "schema_revision",
    "step",
    "upgrade",
]


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


def schema_revision(connection: Connection, namespace: Namespace = DEFAULT) -> str | None:
    """The current revision (None: never migrated), refusing a newer or foreign schema."""
    revision = check_revision(connection, namespace)
    if revision is None:
        check_not_foreign(connection, namespace)
    return revision


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


def run_alembic(
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


def upgrade(
    connection: Connection, revision: str = "head", namespace: Namespace = DEFAULT
) -> str | None:
    before = check_revision(connection, namespace)
    if before is None:
        check_not_foreign(connection, namespace)
    target = head_revision() if revision == "head" else revision
    if before != target:
        run_alembic(connection, command.upgrade, revision, namespace)
    return before


def step(
    connection: Connection, revision: str, downgrade: bool, namespace: Namespace
) -> str | None:
    """Upgrade to ``revision`` (or, ``downgrade``, step back to it); the revision found."""
    if downgrade:
        before = current_revision(connection, namespace)
        run_alembic(connection, command.downgrade, revision, namespace)
        return before
    return upgrade(connection, revision, namespace)
