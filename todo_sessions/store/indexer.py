"""The deferred search index: appends mark, the catch-up indexes (docs/design.md, "Search").

The mark is a column of the session row, ``sessions.index_from`` (revision 0013): the first seq
of the session the index has not taken, NULL when it has taken them all. An indexed append that
finds it NULL sets it to its first seq in the update of the session row it makes anyway; one
that finds it set changes nothing more (what it appended is above the mark). So the index
costs an append no statement and no page of its own (SQLite rewrites a partial index's entry
whenever an update assigns its column, hence "only when NULL"), and the partial index
``ix_sessions_index_from`` lists the marked sessions. `catch_up` indexes the events of marked
sessions after their commit, many sessions at a time, in transactions of their own: it reads
the marked rows, the events of the indexed types from each mark up to the session's next seq
as it read it, writes their ``search_text`` rows (SQLite: then their FTS5 entries in one
``INSERT ... SELECT``; PostgreSQL: ``doc`` and the GIN entries in the same insert) and moves
each mark up to where it stopped, in one transaction: the marks are the index's high-water
marks, committed with the index rows they stand for.

Why it stays exact:

- A mark commits with the events it covers, so whoever sees the events sees them marked (or
  indexed already); an append acknowledged before a search has committed before the search's
  catch-up reads the marks.
- The catch-up moves a mark with ``CASE WHEN next_seq > :end THEN :end ELSE NULL END``, where
  ``:end`` is where it stopped: an append that committed meanwhile (PostgreSQL: it held the
  session row, and the update waited for it and then reads its next seq) stays marked.
- Indexing is idempotent: an event that already has index rows is skipped (``NOT EXISTS`` on
  ``search_text (session_id, seq)``), so a mark that covers what `reindex` wrote indexes
  nothing twice.
- On PostgreSQL catch-ups, `reindex` and deletes serialise on a transaction-scoped advisory
  lock of the namespace (`lock_statement`): catch-ups and `reindex` take it exclusively,
  deletes shared (so a session is never deleted under a catch-up that is indexing it). SQLite
  has one writer at a time already.

Everything here runs on a SQLAlchemy connection inside the caller's transaction, in Core.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from hashlib import blake2b
from itertools import islice
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core.jsonvalue import decode_fast
from ..core.search import INDEXED_TYPES
from .schema import Tables
from .search import expected_rows, insert_rows

__all__ = [
    "CATCH_UP_EVENTS",
    "CATCH_UP_SESSIONS",
    "CaughtUp",
    "catch_up",
    "catch_up_all",
    "lock_key",
    "lock_statement",
    "pending_ends",
    "pending_events",
]

CATCH_UP_SESSIONS = 2000
"""Most marked sessions one catch-up transaction takes."""
CATCH_UP_EVENTS = 10_000
"""About how many events one catch-up transaction indexes (it stops taking sessions once their
events reach this many, and takes a part of a session that has more): a transaction short
enough that another process's append waiting for SQLite's write lock does not wait long."""
_RANGES_PER_READ = 100
"""Sessions whose events one statement reads (their seq ranges OR'ed)."""


@dataclass(frozen=True, slots=True)
class CaughtUp:
    """What one catch-up transaction did: ``sessions`` marked sessions taken (wholly or in
    part), ``rows`` index rows written, whether marked events were left for the next one
    (``more``), and of the sessions it was given (``upto``), those with nothing left below
    their end there (``done``)."""

    sessions: int
    rows: int
    more: bool
    done: frozenset[str] = frozenset()


def lock_key(tables: Tables) -> int:
    """PostgreSQL: the advisory lock of this namespace's index (a signed 64-bit key)."""
    name = f"todo_sessions search index {tables.search_text.schema or ''}"
    return int.from_bytes(blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


def lock_statement(tables: Tables, *, shared: bool = False) -> Any:
    """PostgreSQL: take the index's advisory lock until the transaction ends (`catch_up` and
    `reindex` exclusively, a delete shared)."""
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    return sa.text(f"SELECT {function}(:key)").bindparams(key=lock_key(tables))


def pending_ends(conn: Connection, tables: Tables) -> dict[str, int]:
    """The marked sessions and their next seqs: where a catch-up of everything committed
    before this read ends (one read of the partial index and the rows it names)."""
    se = tables.sessions.c
    query = sa.select(se.updated_at, se.id, se.next_seq).where(se.index_from.is_not(None))
    found = sorted(conn.execute(query).all())  # `_marked`'s order
    return {session_id: next_seq for _, session_id, next_seq in found}


def pending_events(conn: Connection, tables: Tables) -> int:
    """How many stored events wait for the index (0: it has taken them all)."""
    se = tables.sessions.c
    waiting = sa.func.coalesce(sa.func.sum(se.next_seq - se.index_from), 0)
    return int(conn.execute(sa.select(waiting).where(se.index_from.is_not(None))).scalar_one())


def _marked(conn: Connection, tables: Tables, upto: Mapping[str, int] | None) -> list[Any]:
    """``(id, index_from, next_seq)`` of `CATCH_UP_SESSIONS` marked sessions at most
    (``upto``'s, when given: `catch_up_all` hands them over in this order), least recently
    appended to first: the index rows are numbered in the order they are written, and a
    search shows the highest first, so the sessions written to last come out first, as they
    did when each append left a pending row of its own. Sorted here, not by the database:
    the read goes through the partial index alone, never `ix_sessions_updated_at_id` (so
    `verify` still gets to report that index damaged)."""
    se = tables.sessions.c
    query = sa.select(se.updated_at, se.id, se.index_from, se.next_seq)
    query = query.where(se.index_from.is_not(None))
    if upto is not None:
        query = query.where(se.id.in_(list(upto)))
    found = sorted(conn.execute(query.limit(CATCH_UP_SESSIONS)).all())
    return [(session_id, start, next_seq) for _, session_id, start, next_seq in found]


def _take(
    found: Sequence[Any], upto: Mapping[str, int] | None
) -> tuple[list[tuple[str, int, int]], set[str], bool]:
    """The seq ranges ``(session_id, start, end)`` one transaction indexes, about
    `CATCH_UP_EVENTS` events; the sessions left with work below their end; whether any is."""
    taken: list[tuple[str, int, int]] = []
    unfinished: set[str] = set()
    events = 0
    for session_id, start, next_seq in found:
        end = next_seq if upto is None else min(next_seq, upto[session_id])
        if upto is not None and start >= end:
            continue  # taken up to its end already (by another catch-up)
        room = CATCH_UP_EVENTS - events
        if taken and end - start > room:
            unfinished.add(session_id)
            continue
        if end - start > room:  # the first, with more than a transaction takes: a part
            unfinished.add(session_id)
            end = start + room
        taken.append((session_id, start, end))
        events += end - start
    more = bool(unfinished) or len(found) == CATCH_UP_SESSIONS
    return taken, unfinished, more


def _unindexed_events(
    conn: Connection, tables: Tables, taken: Sequence[tuple[str, int, int]]
) -> list[Any]:
    """``(session_id, seq, type, data)`` of the indexed types in the taken ranges, without
    index rows yet."""
    ev, st = tables.session_events.c, tables.search_text.c
    indexed = (
        sa.select(sa.literal_column("1"))
        .where(st.session_id == ev.session_id, st.seq == ev.seq)
        .exists()
    )
    ranges = [r for r in taken if r[2] > r[1]]
    found: list[Any] = []
    for i in range(0, len(ranges), _RANGES_PER_READ):
        within = sa.or_(
            *(
                sa.and_(ev.session_id == session_id, ev.seq >= start, ev.seq < end)
                for session_id, start, end in ranges[i : i + _RANGES_PER_READ]
            )
        )
        statement = sa.select(ev.session_id, ev.seq, ev.type, ev.data).where(
            within, ev.type.in_(sorted(INDEXED_TYPES)), ~indexed
        )
        found += conn.execute(statement).all()  # `catch_up` puts them in its order
    return found


def _move_marks(conn: Connection, tables: Tables, taken: Sequence[tuple[str, int, int]]) -> None:
    """Each taken session's mark up to where the catch-up stopped, or NULL when its next seq
    (as the update reads it: after any append that committed meanwhile) is not above that."""
    se = tables.sessions.c
    end = sa.bindparam("m_end", type_=sa.BigInteger())
    statement = (
        tables.sessions.update()
        .where(se.id == sa.bindparam("m_id"))
        .values(index_from=sa.case((se.next_seq > end, end), else_=sa.null()))
    )
    conn.execute(statement, [{"m_id": session_id, "m_end": stop} for session_id, _, stop in taken])


def catch_up(conn: Connection, tables: Tables, upto: Mapping[str, int] | None = None) -> CaughtUp:
    """One catch-up transaction's work (the caller's transaction; see the module docstring):
    index the events of the first marked sessions (``upto``: of these sessions, and below
    their seq there; None: any, up to their next seq) and move their marks."""
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        conn.execute(lock_statement(tables))
    found = _marked(conn, tables, upto)
    taken, unfinished, more = _take(found, upto)
    rows: list[dict[str, Any]] = []
    order = {session_id: n for n, (session_id, _, _) in enumerate(taken)}
    events = sorted(_unindexed_events(conn, tables, taken), key=lambda e: (order[e[0]], e[1]))
    for session_id, seq, event_type, data in events:
        rows += expected_rows(session_id, ((seq, event_type, decode_fast(data)),))
    if rows:
        insert_rows(conn, tables, rows, fts=not postgres)
    if taken:  # last: on PostgreSQL the session rows stay locked until the commit
        _move_marks(conn, tables, taken)
    done = frozenset() if upto is None else frozenset(upto) - unfinished
    return CaughtUp(len(taken), len(rows), more, done)


def _catch_up_of(tables: Tables, upto: Mapping[str, int], conn: Connection) -> CaughtUp:
    return catch_up(conn, tables, upto)


def catch_up_all(run: Callable[[Callable[[Connection], Any], bool], Any], tables: Tables) -> int:
    """Bring the index up to every append committed before this call: ``run(fn, write)`` runs
    ``fn(connection)`` in one transaction of its own (a write transaction when ``write``),
    first a read of the marked sessions and their next seqs, then `catch_up` transactions of
    those sessions below those seqs until none is left (appends committed meanwhile may wait
    for the next call: concurrent appenders never keep it going). Returns the index rows
    written."""
    remaining: dict[str, int] = run(lambda conn: pending_ends(conn, tables), False)
    rows = 0
    while remaining:
        chunk = dict(islice(remaining.items(), CATCH_UP_SESSIONS))
        done: CaughtUp = run(functools.partial(_catch_up_of, tables, chunk), True)
        rows += done.rows
        for session_id in done.done:
            del remaining[session_id]
    return rows
