"""Every statement the store runs, built once in SQLAlchemy Core."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Boolean, Select, Text, bindparam, case, false, select, true, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert

from .leases import lease_state
from .schema import session_events, session_leases, session_tags, sessions, store_state

__all__ = [
    "LIST_FILTERS",
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
    "update_projection",
]

ev = session_events.c
se = sessions.c
tg = session_tags.c

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


def _unless(flag: str, column: Any, value: str, type_: Any) -> Any:
    """``CASE WHEN :flag THEN :value ELSE column END``: one statement sets any subset."""
    return case(
        (bindparam(flag, type_=Boolean) == true(), bindparam(value, type_=type_)),
        else_=column,
    )


update_projection = (
    sessions.update()
    .where(se.id == bindparam("p_id"))
    .values(
        title=_unless("p_set_title", se.title, "p_title", Text),
        title_folded=_unless("p_set_title", se.title_folded, "p_title_folded", Text),
        tags=_unless("p_set_tags", se.tags, "p_tags", Text),
        metadata=_unless("p_set_metadata", se.metadata, "p_metadata", Text),
        open_todos=_unless("p_set_open", se.open_todos, "p_open_todos", Boolean),
    )
)
"""What a batch with ``session/meta`` or ``todo/write`` events changes (`recorder.Projection`);
a batch without them never runs it."""

delete_tags = session_tags.delete().where(tg.session_id == bindparam("session_id"))
insert_tag = session_tags.insert().values(session_id=bindparam("session_id"), tag=bindparam("tag"))


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


SUMMARY_COLUMNS = (
    "id",
    "created_at",
    "updated_at",
    "cwd",
    "title",
    "next_seq",
    "incarnation",
    "revision",
    "parent_session",
    "tags",
    "metadata",
    "open_todos",
)
"""The columns of a `SessionSummary` row."""

LIST_FILTERS = ("before", "cwd", "tag", "since", "until", "parent", "open", "closed", "text")
"""The conditions a page of `list` can have; a statement is built for each set in use."""


def select_summaries(*, before: bool = False, filters: frozenset[str] = frozenset()) -> Select[Any]:
    """One page of summaries, newest activity first: keyset pagination on ``(updated_at, id)``
    (``before``) under any combination of `LIST_FILTERS` (parameters ``f_<name>``)."""
    unknown = set(filters) - set(LIST_FILTERS)
    if unknown:
        raise ValueError(f"unknown list filters {sorted(unknown)}")
    query = select(*(se[name] for name in SUMMARY_COLUMNS))
    if before or "before" in filters:
        query = query.where(
            tuple_(se.updated_at, se.id) < tuple_(bindparam("b_updated_at"), bindparam("b_id"))
        )
    if "cwd" in filters:
        query = query.where(se.cwd == bindparam("f_cwd"))
    if "parent" in filters:
        query = query.where(se.parent_session == bindparam("f_parent"))
    if "since" in filters:
        query = query.where(se.updated_at >= bindparam("f_since"))
    if "until" in filters:
        query = query.where(se.updated_at < bindparam("f_until"))
    if "open" in filters:
        query = query.where(se.open_todos == true())
    if "closed" in filters:
        query = query.where(se.open_todos == false())
    if "text" in filters:
        query = query.where(se.title_folded.like(bindparam("f_text"), escape="\\"))
    if "tag" in filters:
        tagged = select(tg.session_id).where(tg.tag == bindparam("f_tag"))
        query = query.where(se.id.in_(tagged))
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
    projection: Compiled
    delete_tags: Compiled
    insert_tag: Compiled


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
        projection=compiled(update_projection),
        delete_tags=compiled(delete_tags),
        insert_tag=compiled(insert_tag),
    )
