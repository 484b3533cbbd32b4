"""The deferred search index: appends mark, the catch-up indexes (docs/design.md, "Search").

An append of a store with its index on writes one narrow ``search_pending`` row in its own
transaction: the session and the seqs it appended. Nothing else of the index is written there.
`catch_up` indexes the events of pending appends after their commit, many appends at a time,
in transactions of their own: it reads the events the pending rows name, writes their
``search_text`` rows (SQLite: then their FTS5 entries in one ``INSERT ... SELECT``;
PostgreSQL: ``doc`` and the GIN entries in the same insert) and deletes exactly the pending
rows it took, in one transaction: the pending rows are the index's high-water mark, committed
with the index rows they stand for.

Why it stays exact:

- A pending row commits with its events, so whoever sees one sees its events; an append
  acknowledged before a search has committed its row before the search's catch-up looks.
- Rows are taken by id, never by a range: on PostgreSQL ids (a sequence) commit out of order,
  and a row committed late is simply taken by the next catch-up.
- Indexing is idempotent: an event that already has index rows is skipped (``NOT EXISTS`` on
  ``search_text (session_id, seq)``), so a pending row that overlaps what `reindex` or another
  catch-up wrote indexes nothing twice, and a row left by a deleted session indexes nothing.
- On PostgreSQL catch-ups, `reindex` and deletes serialise on a transaction-scoped advisory
  lock of the namespace (`lock_statement`): catch-ups and `reindex` take it exclusively,
  deletes shared (so a session is never deleted under a catch-up that is indexing it). SQLite
  has one writer at a time already.

Everything here runs on a SQLAlchemy connection inside the caller's transaction, in Core.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core.jsonvalue import decode_fast
from ..core.search import INDEXED_TYPES
from .schema import Tables
from .search import expected_rows, insert_rows

__all__ = [
    "CATCH_UP_APPENDS",
    "CATCH_UP_EVENTS",
    "CaughtUp",
    "catch_up",
    "catch_up_all",
    "clear_pending",
    "lock_key",
    "lock_statement",
    "newest_pending",
    "pending_insert",
]

CATCH_UP_APPENDS = 2000
"""Most pending rows (appends) one catch-up transaction takes."""
CATCH_UP_EVENTS = 10_000
"""About how many events one catch-up transaction indexes (it stops taking pending rows once
their events reach this many): a transaction short enough that another process's append
waiting for SQLite's write lock does not wait long."""


@dataclass(frozen=True, slots=True)
class CaughtUp:
    """What one catch-up transaction did: ``appends`` pending rows taken, ``rows`` index rows
    written, and whether pending rows were left for the next one (``more``)."""

    appends: int
    rows: int
    more: bool


def pending_insert(tables: Tables) -> Any:
    """The append's mark: parameters ``session_id, first_seq, end_seq``."""
    return tables.search_pending.insert().values(
        session_id=sa.bindparam("session_id"),
        first_seq=sa.bindparam("first_seq"),
        end_seq=sa.bindparam("end_seq"),
    )


def lock_key(tables: Tables) -> int:
    """PostgreSQL: the advisory lock of this namespace's index (a signed 64-bit key)."""
    name = f"todo_sessions search index {tables.search_text.schema or ''}"
    return int.from_bytes(blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


def lock_statement(tables: Tables, *, shared: bool = False) -> Any:
    """PostgreSQL: take the index's advisory lock until the transaction ends (`catch_up` and
    `reindex` exclusively, a delete shared)."""
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    return sa.text(f"SELECT {function}(:key)").bindparams(key=lock_key(tables))


def newest_pending(conn: Connection, tables: Tables) -> int | None:
    """The highest pending row id (None: no append waits for the index); one read of the
    primary key's last entry."""
    sp = tables.search_pending.c
    found: int | None = conn.execute(sa.select(sa.func.max(sp.id))).scalar()
    return found


def _pending_upto(conn: Connection, tables: Tables, upto: int | None) -> bool:
    sp = tables.search_pending.c
    query = sa.select(sp.id).limit(1)
    if upto is not None:
        query = query.where(sp.id <= upto)
    return conn.execute(query).first() is not None


def clear_pending(conn: Connection, tables: Tables) -> None:
    """Forget every pending append (`reindex`, under the lock, before it reads the logs: what
    commits after this statement stays pending, and the next catch-up takes it)."""
    conn.execute(tables.search_pending.delete())


def _taken(conn: Connection, tables: Tables, upto: int | None) -> list[int]:
    """The oldest pending rows (ids up to ``upto``), up to `CATCH_UP_APPENDS` of them or about
    `CATCH_UP_EVENTS` events."""
    sp = tables.search_pending.c
    query = sa.select(sp.id, sp.end_seq - sp.first_seq)
    if upto is not None:
        query = query.where(sp.id <= upto)
    found = conn.execute(query.order_by(sp.id).limit(CATCH_UP_APPENDS)).all()
    ids: list[int] = []
    events = 0
    for pending_id, count in found:
        ids.append(pending_id)
        events += count
        if events >= CATCH_UP_EVENTS:
            break
    return ids


def _unindexed_events(conn: Connection, tables: Tables, ids: Sequence[int]) -> list[Any]:
    """``(session_id, seq, type, data)`` of the indexed types in the taken appends, without
    index rows yet, in the order of the appends; only of sessions whose row exists (events
    left behind by a session row deleted outside todo_sessions are `verify`'s to report,
    and an index row needs its session)."""
    sp, ev, st = tables.search_pending.c, tables.session_events.c, tables.search_text.c
    pending, events = tables.search_pending, tables.session_events
    indexed = (
        sa.select(sa.literal_column("1"))
        .where(st.session_id == ev.session_id, st.seq == ev.seq)
        .exists()
    )
    se = tables.sessions.c
    statement = (
        sa.select(ev.session_id, ev.seq, ev.type, ev.data)
        .select_from(
            pending.join(tables.sessions, se.id == sp.session_id).join(
                events,
                sa.and_(
                    ev.session_id == sp.session_id,
                    ev.seq >= sp.first_seq,
                    ev.seq < sp.end_seq,
                ),
            )
        )
        .where(sp.id.in_(list(ids)), ev.type.in_(sorted(INDEXED_TYPES)), ~indexed)
        .order_by(sp.id, ev.seq)
    )
    return list(conn.execute(statement).all())


def catch_up(conn: Connection, tables: Tables, upto: int | None = None) -> CaughtUp:
    """One catch-up transaction's work (the caller's transaction; see the module docstring):
    index the oldest pending appends (ids up to ``upto``; None: any) and delete their pending
    rows. ``more``: pending rows up to ``upto`` are left."""
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        conn.execute(lock_statement(tables))
    ids = _taken(conn, tables, upto)
    if not ids:
        return CaughtUp(0, 0, False)
    seen: set[tuple[str, int]] = set()
    rows: list[dict[str, Any]] = []
    for session_id, seq, event_type, data in _unindexed_events(conn, tables, ids):
        if (session_id, seq) in seen:  # two pending rows name it (a stale one): once
            continue
        seen.add((session_id, seq))
        rows += expected_rows(session_id, ((seq, event_type, decode_fast(data)),))
    if rows:
        insert_rows(conn, tables, rows, fts=not postgres)
    sp = tables.search_pending.c
    conn.execute(tables.search_pending.delete().where(sp.id.in_(ids)))
    return CaughtUp(len(ids), len(rows), _pending_upto(conn, tables, upto))


def catch_up_all(run: Callable[[Callable[[Connection], Any], bool], Any], tables: Tables) -> int:
    """Bring the index up to every append committed before this call: ``run(fn, write)`` runs
    ``fn(connection)`` in one transaction of its own (a write transaction when ``write``),
    first a read of the newest pending row, then `catch_up` transactions until none up to it
    is left (appends committed meanwhile may wait for the next call: concurrent appenders
    never keep it going). Returns the index rows written."""
    upto = run(lambda conn: newest_pending(conn, tables), False)
    if upto is None:
        return 0
    rows = 0
    while True:
        done: CaughtUp = run(lambda conn: catch_up(conn, tables, upto), True)
        rows += done.rows
        if not done.more:
            return rows
