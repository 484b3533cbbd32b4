"""Every statement the store runs, built once in SQLAlchemy Core."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, bindparam, select, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert

from .leases import lease_state
from .schema import session_events, session_leases, sessions, store_state

__all__ = [
    "AppendStatements",
    "Compiled",
    "append_state",
    "compile_append",
    "compile_positional",
    "delete_lease",
    "delete_session",
    "insert_events",
    "insert_session",
    "select_header",
    "select_store_id",
    "select_summaries",
    "update_after_append",
]

ev = session_events.c
se = sessions.c

select_store_id = select(store_state.c.store_id).where(store_state.c.id == 1)

append_state = (
    select(se.next_seq, se.revision, se.incarnation)
    .where(se.id == bindparam("session_id"))
    .with_for_update()
)
"""The stored next seq, read under a row lock (PostgreSQL; SQLite holds the write lock)."""

insert_events = session_events.insert()

update_after_append = (
    sessions.update()
    .where(se.id == bindparam("b_id"))
    .values(
        next_seq=bindparam("b_next_seq"),
        revision=bindparam("b_revision"),
        updated_at=bindparam("b_updated_at"),
    )
)


def insert_session(dialect_name: str) -> Insert:
    """Materialise a session row; a concurrent materialisation wins quietly (then seq decides)."""
    if dialect_name == "postgresql":
        return postgresql.insert(sessions).on_conflict_do_nothing(index_elements=["id"])
    return sqlite.insert(sessions).on_conflict_do_nothing(index_elements=["id"])


select_header = select(sessions).where(se.id == bindparam("session_id"))

delete_session = sessions.delete().where(se.id == bindparam("session_id"))
"""Remove a session; its events follow through the foreign key's ON DELETE CASCADE."""

delete_lease = session_leases.delete().where(session_leases.c.session_id == bindparam("session_id"))
"""A deleted session's lease goes with it (it has no foreign key: see `schema`)."""


def select_summaries(*, before: bool) -> Select[Any]:
    query = select(
        se.id,
        se.created_at,
        se.updated_at,
        se.cwd,
        se.title,
        se.next_seq,
        se.incarnation,
        se.revision,
    )
    if before:
        query = query.where(
            tuple_(se.updated_at, se.id) < tuple_(bindparam("b_updated_at"), bindparam("b_id"))
        )
    return query.order_by(se.updated_at.desc(), se.id.desc()).limit(bindparam("limit"))


def compile_positional(statement: Any, dialect: Any) -> tuple[str, tuple[str, ...]]:
    """SQL text for a positional driver and the parameter names in positional order."""
    compiled = statement.compile(dialect=dialect)
    return str(compiled), tuple(compiled.positiontup or ())


@dataclass(frozen=True, slots=True)
class Compiled:
    """One statement compiled for a driver: its text and how to order its parameters."""

    sql: str
    names: tuple[str, ...]

    def args(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(values[name] for name in self.names)


@dataclass(frozen=True, slots=True)
class AppendStatements:
    """The statements of an append, compiled once for the driver a hot path talks to."""

    state: Compiled
    lease: Compiled
    insert_session: Compiled
    insert_events: Compiled
    update: Compiled


def compile_append(dialect: Any) -> AppendStatements:
    def compiled(statement: Any) -> Compiled:
        return Compiled(*compile_positional(statement, dialect))

    events = insert_events.values({c.name: None for c in session_events.columns})
    new_session = insert_session(dialect.name).values({c.name: None for c in sessions.columns})
    return AppendStatements(
        state=compiled(append_state),
        lease=compiled(lease_state),
        insert_session=compiled(new_session),
        insert_events=compiled(events),
        update=compiled(update_after_append),
    )
