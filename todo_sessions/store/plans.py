"""Every write transaction of the store, written once as a plan of statements (sans-IO).

A plan is a generator: it yields the steps of its transaction, each ``(kind, statement,
args)`` with a statement compiled for the driver that runs it (`queries.Compiled`, from the
namespace's `queries.AppendStatements` / `queries.WriteStatements`), receives each step's
result, decides (a lease held? a seq free? a checkpoint within the log?) and returns the
transaction's outcome. It does no I/O and holds no connection. Each backend has one small
driver that runs a plan inside its own transaction: ``sqlite/transactions.py`` (sync, on the
writer thread, inside ``BEGIN IMMEDIATE``) and ``postgres/transactions.py`` (asyncpg, inside
``driver.transaction()``); the same plan, step for step, on both.

The steps (`ROW`, `RUN`, `MANY`, `EVENTS`, `INDEX_LOCK`) are what a driver must know how to
do; the two places where the backends differ are steps, not plans: `EVENTS` (SQLite: one
insert per row through ``executemany``; PostgreSQL: one insert of arrays, a list per column,
revision 0012) and `INDEX_LOCK` (PostgreSQL's shared advisory lock of the search index, so a
delete never runs under a catch-up indexing the session; SQLite's writer holds the one write
lock already).

The search index's catch-up is the one write transaction that is not a plan here: it is
written once in Core over a SQLAlchemy connection (`indexer.catch_up`), which each driver
gives it (SQLite: the writer's own connection; PostgreSQL: ``run_sync``).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Final, TypeVar

from ..errors import SessionNotFoundError
from .batch import (
    AppendBatch,
    AppendOutcome,
    after_append,
    chain_rows,
    check_batch_start,
    new_session_values,
)
from .checkpoints import CheckpointWrite
from .leases import Lease, acquired, holder_of, renewed
from .leases import check as check_lease
from .queries import AppendStatements, Compiled, WriteStatements

__all__ = [
    "EVENTS",
    "INDEX_LOCK",
    "MANY",
    "ROW",
    "RUN",
    "Plan",
    "Step",
    "acquire_lease",
    "append",
    "delete_checkpoints",
    "delete_session",
    "release_lease",
    "renew_lease",
    "thin_checkpoints",
    "write_checkpoint",
]

T = TypeVar("T")

ROW: Final = 0
"""Run the statement; its result is its first row (a tuple), or None."""
RUN: Final = 1
"""Run the statement; its result is the number of rows it changed."""
MANY: Final = 2
"""Run the statement once per tuple of ``args``; no result."""
EVENTS: Final = 3
"""Insert the event rows ``args`` (a batch's row dicts) with ``insert_events``; no result."""
INDEX_LOCK: Final = 4
"""Take the search index's lock shared until the transaction ends (where a backend has one:
PostgreSQL); no result."""

Step = tuple[int, Compiled | None, Any]
"""``(kind, statement, args)``."""
Plan = Generator[Step, Any, T]
"""A write transaction: yields `Step`, is sent each step's result, returns the outcome."""


def append(sql: AppendStatements, batch: AppendBatch) -> Plan[AppendOutcome]:
    """Append a batch (`recorder.Recorder.append`): check its lease, materialise the session
    row on its first append, check that the batch starts at the stored next seq, chain and
    insert the rows, advance next seq and revision (and mark the session for the search index
    if it is not marked yet), apply the projection. The caller holds the write lock (SQLite)
    or a row lock on the session (PostgreSQL: ``state`` is read ``FOR UPDATE``)."""
    session_id = batch.session_id
    key = (session_id,)
    if batch.lease is not None:
        check_lease(session_id, (yield ROW, sql.lease, key), batch.lease, batch.now)
    state = yield ROW, sql.state, key
    if state is None:
        if batch.header is None:
            raise SessionNotFoundError(session_id, "create it before the first append")
        values = new_session_values(batch.header, batch.now)
        # A concurrent first append (PostgreSQL) may win the insert; the locked read decides.
        yield RUN, sql.insert_session, sql.insert_session.args(values)
        state = yield ROW, sql.state, key
    next_seq, revision, incarnation, previous, index_from = state
    rows = batch.rows
    check_batch_start(session_id, rows[0]["seq"], next_seq)
    chain_rows(batch, previous)
    yield EVENTS, sql.insert_events, rows
    params = after_append(next_seq, revision, len(rows), batch.now, session_id)
    if batch.index and index_from is None:  # the index takes the events after the commit
        params["b_index_from"] = next_seq  # (`indexer`); marked already: the mark covers them
        yield RUN, sql.update_marking, sql.update_marking.args(params)
    else:
        yield RUN, sql.update, sql.update.args(params)
    projection = batch.projection
    if projection is not None:  # the batch has session/meta or todo/write events
        yield RUN, sql.projection, sql.projection.args(projection.params)
        if projection.tags is not None:
            yield RUN, sql.delete_tags, key
            yield MANY, sql.insert_tag, [(session_id, t) for t in projection.tags]
    return incarnation, revision + 1, next_seq + len(rows)


def delete_session(sql: WriteStatements, session_id: str) -> Plan[bool]:
    """Release the log, delete its events, then the session row (revision 0009's triggers
    refuse any other order), and its lease; whether there was a session. First the search
    index's lock, shared: never under a catch-up that is indexing the session (`indexer`)."""
    yield INDEX_LOCK, None, ()
    yield RUN, sql.release_log, sql.release_log.args({"session_id": session_id})
    yield RUN, sql.delete_events, (session_id,)
    deleted = yield RUN, sql.delete, (session_id,)
    yield RUN, sql.delete_lease, (session_id,)
    return bool(deleted > 0)


def acquire_lease(
    sql: WriteStatements, session_id: str, owner: str, now: int, ttl_ms: int, steal: bool
) -> Plan[Lease]:
    """Take the lease (`leases.acquired` decides)."""
    current = holder_of((yield ROW, sql.lease_row, (session_id,)))
    lease, values = acquired(current, session_id, owner, now, ttl_ms, steal=steal)
    if current is None:
        # a concurrent first acquire waits on the primary key, then fails: a StoreError
        yield RUN, sql.insert_lease, sql.insert_lease.args(values)
    else:
        update = sql.update_lease
        yield RUN, update, update.args({**values, "l_session_id": session_id})
    return lease


def renew_lease(sql: WriteStatements, lease: Lease, now: int, ttl_ms: int) -> Plan[Lease]:
    """Extend a lease still held (`leases.renewed` decides)."""
    current = holder_of((yield ROW, sql.lease_row, (lease.session_id,)))
    new = renewed(current, lease, now, ttl_ms)
    params = {"session_id": lease.session_id, "expires_at": new.expires_at}
    yield RUN, sql.renew_lease, sql.renew_lease.args(params)
    return new


def release_lease(sql: WriteStatements, lease: Lease) -> Plan[bool]:
    """Delete the lease row if it is still ``lease``'s."""
    params = {"session_id": lease.session_id, "owner": lease.owner, "epoch": lease.epoch}
    released = yield RUN, sql.release_lease, sql.release_lease.args(params)
    return bool(released > 0)


def write_checkpoint(sql: WriteStatements, checkpoint: CheckpointWrite) -> Plan[bool]:
    """Store a checkpoint, replacing one at its seq, keeping the newest ``keep``; False when
    the stored log ends before its seq."""
    session_id = checkpoint.session_id
    found = yield ROW, sql.checkpoint_next_seq, (session_id,)
    if found is None:
        raise SessionNotFoundError(session_id)
    if checkpoint.seq > found[0]:
        return False
    at = {"session_id": session_id, "seq": checkpoint.seq}
    yield RUN, sql.delete_checkpoint_at, sql.delete_checkpoint_at.args(at)
    yield RUN, sql.insert_checkpoint, sql.insert_checkpoint.args(checkpoint.row())
    oldest = sql.oldest_kept_checkpoint
    window = {"session_id": session_id, "take": 1, "skip": checkpoint.keep - 1}
    kept = yield ROW, oldest, oldest.args(window)
    if kept is not None:
        prune = sql.prune_checkpoints
        yield RUN, prune, prune.args({"session_id": session_id, "oldest": kept[0]})
    return True


def delete_checkpoints(sql: WriteStatements, session_id: str) -> Plan[int]:
    """Delete every checkpoint of a session; how many there were."""
    deleted = yield RUN, sql.delete_checkpoints, (session_id,)
    return int(deleted)


def thin_checkpoints(sql: WriteStatements, session_id: str, keep: int) -> Plan[int]:
    """Delete the checkpoints of a session older than its newest ``keep``; how many."""
    if keep == 0:
        return int((yield RUN, sql.delete_checkpoints, (session_id,)))
    oldest = sql.oldest_kept_checkpoint
    window = {"session_id": session_id, "take": 1, "skip": keep - 1}
    kept = yield ROW, oldest, oldest.args(window)
    if kept is None:
        return 0
    prune = sql.prune_checkpoints
    return int((yield RUN, prune, prune.args({"session_id": session_id, "oldest": kept[0]})))
