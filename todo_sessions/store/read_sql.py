"""The read statements, in SQLAlchemy Core over a namespace's tables (`read_statements`),
compiled once per driver and namespace (`compile_reads`), and the `Rows` source a read
operation (`reads`) runs them through."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import and_, bindparam, func, select

from .leases import LEASE_COLUMNS
from .queries import DEFAULT_QUERIES, SUMMARY_COLUMNS, Queries, compile_positional
from .records import SessionRow
from .schema import Tables

__all__ = [
    "SESSION_COLUMNS",
    "STATEMENTS",
    "CompiledRead",
    "Rows",
    "compile_reads",
    "list_statement",
    "read_statements",
]

SESSION_COLUMNS = SessionRow._fields
"""The columns of a `records.SessionRow`, in order."""
_SID: Any = bindparam("session_id")


def read_statements(queries: Queries) -> dict[str, Any]:
    """The read statements over a namespace's tables, by name."""
    return {**_event_reads(queries.tables), **_session_reads(queries)}


def _event_columns(tables: Tables) -> tuple[Any, ...]:
    ev = tables.session_events.c
    return (ev.seq, ev.type, ev.time, ev.data, ev.surface_op, ev.source_event_seqs, ev.ignorable)


def _latest_of_type(tables: Tables) -> dict[str, Any]:
    """The session's format and end with the latest event of a type before ``upto`` (one
    statement: `reads.latest_todos`), and that event alone."""
    ev, se = tables.session_events.c, tables.sessions.c
    of_type = tables.session_events.alias("of_type").c
    latest_seq = (  # of the type, before ``upto`` and the session's end
        select(of_type.seq)
        .where(
            of_type.session_id == se.id,
            of_type.type == bindparam("type"),
            of_type.seq < bindparam("upto"),
            of_type.seq < se.next_seq,
        )
        .order_by(of_type.seq.desc())
        .limit(1)
        .scalar_subquery()
    )
    return {
        "session_and_latest_of_type": select(se.format_version, ev.seq, ev.data)
        .select_from(
            tables.sessions.outerjoin(
                tables.session_events, and_(ev.session_id == se.id, ev.seq == latest_seq)
            )
        )
        .where(se.id == _SID),
        "latest_event_of_type": select(*_event_columns(tables))
        .where(ev.session_id == _SID, ev.type == bindparam("type"), ev.seq < bindparam("upto"))
        .order_by(ev.seq.desc())
        .limit(1),
    }


def _event_reads(tables: Tables) -> dict[str, Any]:
    ev = tables.session_events.c
    event_columns = _event_columns(tables)
    return {
        **_latest_of_type(tables),
        "events": select(*event_columns)
        .where(ev.session_id == _SID, ev.seq >= bindparam("from_seq"), ev.seq < bindparam("upto"))
        .order_by(ev.seq),
        "surface": select(*event_columns)
        .where(
            ev.session_id == _SID,
            ev.surface_op.is_not(None),
            ev.seq >= bindparam("from_seq"),
            ev.seq < bindparam("upto"),
        )
        .order_by(ev.seq),
        "count_of_type": select(func.count())
        .select_from(tables.session_events)
        .where(ev.session_id == _SID, ev.type == bindparam("type")),
        "all_of_type": select(ev.seq, ev.data)
        .where(ev.session_id == _SID, ev.type == bindparam("type"), ev.seq < bindparam("upto"))
        .order_by(ev.seq),
        "ids_of_events": select(ev.session_id)
        .where(ev.session_id > bindparam("after"))
        .group_by(ev.session_id)
        .order_by(ev.session_id)
        .limit(bindparam("limit")),
        "chain_rows": select(*event_columns, ev.chain)
        .where(ev.session_id == _SID, ev.seq >= bindparam("from_seq"), ev.seq < bindparam("upto"))
        .order_by(ev.seq),
        "chain_at": select(ev.chain).where(ev.session_id == _SID, ev.seq == bindparam("seq")),
        "past_end": select(ev.seq)
        .where(ev.session_id == _SID, ev.seq >= bindparam("from_seq"))
        .order_by(ev.seq)
        .limit(bindparam("limit")),
    }


def _session_reads(queries: Queries) -> dict[str, Any]:
    tables = queries.tables
    se, cp = tables.sessions.c, tables.session_checkpoints.c
    return {
        "session": select(*(se[name] for name in SESSION_COLUMNS)).where(se.id == _SID),
        "checkpoints_at_most": select(cp.seq, cp.state)
        .where(cp.session_id == _SID, cp.seq <= bindparam("upto"))
        .order_by(cp.seq.desc())
        .limit(bindparam("limit")),
        "checkpoint_list": select(cp.seq, cp.format_version, cp.created_at, func.length(cp.state))
        .where(cp.session_id == _SID)
        .order_by(cp.seq),
        "checkpoint_texts": select(cp.seq, cp.state).where(cp.session_id == _SID).order_by(cp.seq),
        "summaries": queries.select_summaries(before=False),
        "summaries_before": queries.select_summaries(before=True),
        "summary": select(*(se[name] for name in SUMMARY_COLUMNS)).where(se.id == _SID),
        "store_id": queries.select_store_id,
        "ids_of_sessions": select(se.id)
        .where(se.id > bindparam("after"))
        .order_by(se.id)
        .limit(bindparam("limit")),
        "lease_holder": select(*(tables.session_leases.c[n] for n in LEASE_COLUMNS)).where(
            tables.session_leases.c.session_id == _SID
        ),
    }


STATEMENTS: dict[str, Any] = read_statements(DEFAULT_QUERIES)
"""The default namespace's read statements, by name."""


@dataclass(frozen=True, slots=True)
class CompiledRead:
    """One read statement compiled for a positional driver."""

    sql: str
    names: tuple[str, ...]
    defaults: Mapping[str, Any]
    """Values of literal binds such as ``LIMIT 1``, which the caller does not pass."""

    def args(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        values = {**self.defaults, **params}
        return tuple(values[name] for name in self.names)


def _compile_read(statement: Any, dialect: Any) -> CompiledRead:
    sql, names = compile_positional(statement, dialect)
    params = statement.compile(dialect=dialect).params
    defaults = {k: v for k, v in params.items() if v is not None}
    return CompiledRead(sql, names, defaults)


_LIST_PREFIX = "list:"


def list_statement(filters: frozenset[str]) -> str:
    """The name of the `list` page statement for a set of `LIST_FILTERS`."""
    return _LIST_PREFIX + ",".join(sorted(filters))


class CompiledReads(dict[str, CompiledRead]):
    """A namespace's read statements compiled for one driver, and the `list` page of each
    combination of filters (`list_statement`) compiled the first time it is asked for: at most
    one per subset of `LIST_FILTERS`, so this never grows with what callers pass."""

    def __init__(self, dialect: Any, queries: Queries = DEFAULT_QUERIES) -> None:
        statements = STATEMENTS if queries is DEFAULT_QUERIES else read_statements(queries)
        super().__init__(
            (name, _compile_read(statement, dialect)) for name, statement in statements.items()
        )
        self._dialect = dialect
        self._queries = queries

    def __missing__(self, name: str) -> CompiledRead:
        if not name.startswith(_LIST_PREFIX):
            raise KeyError(name)
        filters = frozenset(f for f in name[len(_LIST_PREFIX) :].split(",") if f)
        compiled = _compile_read(self._queries.select_summaries(filters=filters), self._dialect)
        self[name] = compiled  # a race compiles it twice, harmlessly
        return compiled


def compile_reads(dialect: Any, queries: Queries = DEFAULT_QUERIES) -> dict[str, CompiledRead]:
    """A namespace's read statements compiled for a driver (`namespace.Namespace.compiled`
    does this once per namespace and backend)."""
    return CompiledReads(dialect, queries)


class Rows(Protocol):
    """Runs a named read statement (`read_statements`) and returns its rows as tuples. Each backend
    module has one (``SQLiteRows``, ``AsyncpgRows``)."""

    def fetch(self, name: str, params: Mapping[str, Any]) -> list[Any]:
        """The rows of the read statement ``name`` run with ``params``."""
        ...
