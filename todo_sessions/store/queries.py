"""Every statement the store runs, in SQLAlchemy Core, built once per namespace
(`build_queries`; the default namespace's at import: `DEFAULT_QUERIES`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ARRAY,
    Boolean,
    Select,
    Table,
    Text,
    bindparam,
    case,
    false,
    func,
    literal_column,
    select,
    true,
    tuple_,
)
from sqlalchemy.sql.dml import Delete, Insert, Update

from .schema import DEFAULT_TABLES, Tables

__all__ = [
    "DEFAULT_QUERIES",
    "LIST_FILTERS",
    "AppendStatements",
    "Compiled",
    "Queries",
    "WriteStatements",
    "build_queries",
    "compile_append",
    "compile_positional",
    "compile_writes",
]


def _unless(flag: str, column: Any, value: str, type_: Any) -> Any:
    """``CASE WHEN :flag THEN :value ELSE column END``: one statement sets any subset."""
    return case(
        (bindparam(flag, type_=Boolean) == true(), bindparam(value, type_=type_)),
        else_=column,
    )


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


@dataclass(frozen=True, slots=True)
class Queries:
    """The Core statements of one namespace's tables (`build_queries`)."""

    tables: Tables
    select_store_id: Select[Any]
    append_state: Select[Any]
    """The stored next seq (and the chain value of the event before it, and the search index's
    mark), read under a row lock (PostgreSQL; SQLite holds the write lock)."""
    lease_state: Select[Any]
    """What an append under a lease checks (PostgreSQL: ``FOR SHARE``, so a takeover waits)."""
    insert_events: Insert
    update_after_append: Update
    update_marking: Update
    """`update_after_append` that also sets the search index's mark (``index_from``): an
    indexed append that found it NULL. The others leave the column, and so its partial
    index, alone."""
    update_projection: Update
    """What a batch with ``session/meta`` or ``todo/write`` events changes
    (`recorder.Projection`); a batch without them never runs it."""
    delete_tags: Delete
    insert_tag: Insert
    release_log: Update
    """The first step of a delete: next seq 0, so the triggers let its events go (0009)."""
    delete_events: Delete
    delete_session: Delete
    """Remove a session once its events are gone (a trigger refuses it before: 0009); its
    tags and checkpoints follow through the foreign keys' ON DELETE CASCADE."""
    delete_lease: Delete
    """A deleted session's lease goes with it (it has no foreign key: see `schema`)."""
    lease_row: Select[Any]
    """A session's whole lease row, locked (PostgreSQL ``FOR UPDATE``) for a lease change."""
    insert_lease: Insert
    update_lease: Update
    """A new holder (or the same one again) with the next epoch."""
    renew_lease: Update
    release_lease: Delete
    """Only the holder's own lease: owner and epoch must still match."""
    checkpoint_next_seq: Select[Any]
    delete_checkpoint_at: Delete
    insert_checkpoint: Insert
    oldest_kept_checkpoint: Select[Any]
    prune_checkpoints: Delete
    delete_checkpoints: Delete

    def insert_session(self, insert: Callable[[Table], Any]) -> Insert:
        """Materialise a session row; a concurrent materialisation wins quietly (then seq
        decides). ``insert`` is the backend's dialect ``insert`` (it has ON CONFLICT)."""
        return insert(self.tables.sessions).on_conflict_do_nothing(index_elements=["id"])

    def select_summaries(
        self, *, before: bool = False, filters: frozenset[str] = frozenset()
    ) -> Select[Any]:
        """One page of summaries, newest activity first: keyset pagination on ``(updated_at,
        id)`` (``before``) under any combination of `LIST_FILTERS` (parameters
        ``f_<name>``)."""
        unknown = set(filters) - set(LIST_FILTERS)
        if unknown:
            raise ValueError(f"unknown list filters {sorted(unknown)}")
        se, tg = self.tables.sessions.c, self.tables.session_tags.c
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


def build_queries(tables: Tables) -> Queries:
    """The statements over ``tables`` (built once per namespace)."""
    sessions, events, tags = tables.sessions, tables.session_events, tables.session_tags
    leases, state = tables.session_leases, tables.store_state
    checkpoints = tables.session_checkpoints
    se, tg, le, cp, ev = sessions.c, tags.c, leases.c, checkpoints.c, events.c
    sid: Any = bindparam("session_id")
    previous_chain = (
        select(ev.chain)
        .where(ev.session_id == se.id, ev.seq == se.next_seq - literal_column("1"))
        .scalar_subquery()
    )
    after_append = (
        sessions.update()
        .where(se.id == bindparam("b_id"))
        .values(
            next_seq=bindparam("b_next_seq"),
            revision=bindparam("b_revision"),
            updated_at=bindparam("b_updated_at"),
        )
    )
    return Queries(
        tables=tables,
        select_store_id=select(state.c.store_id).where(state.c.id == 1),
        append_state=select(se.next_seq, se.revision, se.incarnation, previous_chain, se.index_from)
        .where(se.id == bindparam("session_id"))
        .with_for_update(),
        lease_state=select(le.owner, le.epoch, le.expires_at)
        .where(le.session_id == bindparam("session_id"))
        .with_for_update(read=True),
        insert_events=events.insert(),
        update_after_append=after_append,
        update_marking=after_append.values(index_from=bindparam("b_index_from")),
        update_projection=sessions.update()
        .where(se.id == bindparam("p_id"))
        .values(
            title=_unless("p_set_title", se.title, "p_title", Text),
            title_folded=_unless("p_set_title", se.title_folded, "p_title_folded", Text),
            tags=_unless("p_set_tags", se.tags, "p_tags", Text),
            metadata=_unless("p_set_metadata", se.metadata, "p_metadata", Text),
            open_todos=_unless("p_set_open", se.open_todos, "p_open_todos", Boolean),
        ),
        delete_tags=tags.delete().where(tg.session_id == bindparam("session_id")),
        insert_tag=tags.insert().values(session_id=bindparam("session_id"), tag=bindparam("tag")),
        release_log=sessions.update().where(se.id == sid).values(next_seq=literal_column("0")),
        delete_events=events.delete().where(ev.session_id == sid),
        delete_session=sessions.delete().where(se.id == bindparam("session_id")),
        delete_lease=leases.delete().where(le.session_id == bindparam("session_id")),
        lease_row=select(
            le.session_id, le.owner, le.host, le.pid, le.epoch, le.acquired_at, le.expires_at
        )
        .where(le.session_id == sid)
        .with_for_update(),
        insert_lease=leases.insert().values({c.name: bindparam(c.name) for c in leases.columns}),
        update_lease=leases.update()
        .where(le.session_id == bindparam("l_session_id"))
        .values({c.name: bindparam(c.name) for c in leases.columns if c.name != "session_id"}),
        renew_lease=leases.update()
        .where(le.session_id == sid)
        .values(expires_at=bindparam("expires_at")),
        release_lease=leases.delete().where(
            le.session_id == sid, le.owner == bindparam("owner"), le.epoch == bindparam("epoch")
        ),
        checkpoint_next_seq=select(se.next_seq).where(se.id == sid),
        delete_checkpoint_at=checkpoints.delete().where(
            cp.session_id == sid, cp.seq == bindparam("seq")
        ),
        insert_checkpoint=checkpoints.insert().values(
            {c.name: bindparam(c.name) for c in checkpoints.columns}
        ),
        oldest_kept_checkpoint=select(cp.seq)
        .where(cp.session_id == sid)
        .order_by(cp.seq.desc())
        .limit(bindparam("take"))
        .offset(bindparam("skip")),
        prune_checkpoints=checkpoints.delete().where(
            cp.session_id == sid, cp.seq < bindparam("oldest")
        ),
        delete_checkpoints=checkpoints.delete().where(cp.session_id == sid),
    )


DEFAULT_QUERIES = build_queries(DEFAULT_TABLES)
"""The default namespace's statements, built once at import."""


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


def insert_events_statement(tables: Tables, dialect_name: str) -> Any:
    """An append's event rows. SQLite: one row's insert (run by ``executemany``).
    PostgreSQL: all of them in one statement, ``INSERT ... SELECT $1, * FROM unnest($2, ...)``
    with one array parameter per column (the session id once): the check that an event's
    session exists is a statement trigger there (revision 0012), so it runs once an append,
    and the rows take one round of the executor instead of one each."""
    events = tables.session_events
    if dialect_name != "postgresql":
        return events.insert().values({c.name: None for c in events.columns})
    names = [c.name for c in events.columns if c.name != "session_id"]
    arrays = [bindparam(name, type_=ARRAY(events.c[name].type)) for name in names]
    rows = func.unnest(*arrays).table_valued(*names).render_derived()
    session_id = bindparam("session_id", type_=events.c.session_id.type)
    return events.insert().from_select(
        ["session_id", *names], select(session_id, *(rows.c[name] for name in names))
    )


@dataclass(frozen=True, slots=True)
class AppendStatements:
    """The statements of an append, compiled once for the driver a hot path talks to."""

    state: Compiled
    lease: Compiled
    insert_session: Compiled
    insert_events: Compiled
    """SQLite: one event row; PostgreSQL: a batch's rows, a list per column
    (`insert_events_statement`)."""
    update: Compiled
    update_marking: Compiled
    """The session row's update that also marks it for the search index (`indexer`): the
    index takes the events after the commit."""
    projection: Compiled
    delete_tags: Compiled
    insert_tag: Compiled


def compile_append(
    dialect: Any, insert: Callable[[Table], Any], queries: Queries = DEFAULT_QUERIES
) -> AppendStatements:
    def compiled(statement: Any) -> Compiled:
        return Compiled(*compile_positional(statement, dialect))

    tables = queries.tables
    new_session = queries.insert_session(insert).values(
        {c.name: None for c in tables.sessions.columns}
    )
    return AppendStatements(
        state=compiled(queries.append_state),
        lease=compiled(queries.lease_state),
        insert_session=compiled(new_session),
        insert_events=compiled(insert_events_statement(tables, dialect.name)),
        update=compiled(queries.update_after_append),
        update_marking=compiled(queries.update_marking),
        projection=compiled(queries.update_projection),
        delete_tags=compiled(queries.delete_tags),
        insert_tag=compiled(queries.insert_tag),
    )


@dataclass(frozen=True, slots=True)
class WriteStatements:
    """Every write of a backend but the append's, compiled once for its driver: deletes,
    leases, checkpoints."""

    release_log: Compiled
    delete_events: Compiled
    delete: Compiled
    delete_lease: Compiled
    lease_row: Compiled
    insert_lease: Compiled
    update_lease: Compiled
    renew_lease: Compiled
    release_lease: Compiled
    checkpoint_next_seq: Compiled
    delete_checkpoint_at: Compiled
    insert_checkpoint: Compiled
    oldest_kept_checkpoint: Compiled
    prune_checkpoints: Compiled
    delete_checkpoints: Compiled


def compile_writes(dialect: Any, queries: Queries = DEFAULT_QUERIES) -> WriteStatements:
    def compiled(statement: Any) -> Compiled:
        return Compiled(*compile_positional(statement, dialect))

    return WriteStatements(
        release_log=compiled(queries.release_log),
        delete_events=compiled(queries.delete_events),
        delete=compiled(queries.delete_session),
        delete_lease=compiled(queries.delete_lease),
        lease_row=compiled(queries.lease_row),
        insert_lease=compiled(queries.insert_lease),
        update_lease=compiled(queries.update_lease),
        renew_lease=compiled(queries.renew_lease),
        release_lease=compiled(queries.release_lease),
        checkpoint_next_seq=compiled(queries.checkpoint_next_seq),
        delete_checkpoint_at=compiled(queries.delete_checkpoint_at),
        insert_checkpoint=compiled(queries.insert_checkpoint),
        oldest_kept_checkpoint=compiled(queries.oldest_kept_checkpoint),
        prune_checkpoints=compiled(queries.prune_checkpoints),
        delete_checkpoints=compiled(queries.delete_checkpoints),
    )
