"""The write transactions' statements on the writer's connection (the caller holds the write
lock)."""

from __future__ import annotations

import functools
import operator
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ...errors import SessionNotFoundError
from ..batch import (
    AppendBatch,
    AppendOutcome,
    after_append,
    chain_rows,
    check_batch_start,
    new_session_values,
)
from ..checkpoints import CheckpointWrite
from ..leases import Lease, acquired, holder_of, renewed
from ..leases import check as check_lease
from ..queries import AppendStatements, WriteStatements
from .driver import (
    begin_write,
)

T = TypeVar("T")


def append(conn: sqlite3.Connection, batch: AppendBatch, _SQL: AppendStatements) -> AppendOutcome:
    """The append transaction's statements (the caller holds the write lock), compiled for
    the store's namespace."""
    session_id = batch.session_id
    if batch.lease is not None:
        leased = conn.execute(_SQL.lease.sql, (session_id,)).fetchone()
        check_lease(session_id, leased, batch.lease, batch.now)
    state = conn.execute(_SQL.state.sql, (session_id,)).fetchone()
    if state is None:
        if batch.header is None:
            raise SessionNotFoundError(session_id, "create it before the first append")
        values = new_session_values(batch.header, batch.now)
        conn.execute(_SQL.insert_session.sql, _SQL.insert_session.args(values))
        state = (0, 0, values["incarnation"], None)
    next_seq, revision, incarnation, previous = state
    rows = batch.rows
    check_batch_start(session_id, rows[0]["seq"], next_seq)
    chain_rows(batch, previous)
    conn.executemany(_SQL.insert_events.sql, map(_row_getter(_SQL.insert_events.names), rows))
    if batch.index:  # the search index takes the events after the commit (`indexer`)
        conn.execute(_SQL.mark_pending.sql, _SQL.mark_pending.args(batch.pending()))
    params = after_append(next_seq, revision, len(rows), batch.now, session_id)
    conn.execute(_SQL.update.sql, _SQL.update.args(params))
    projection = batch.projection
    if projection is not None:  # the batch has session/meta or todo/write events
        conn.execute(_SQL.projection.sql, _SQL.projection.args(projection.params))
        if projection.tags is not None:
            conn.execute(_SQL.delete_tags.sql, (session_id,))
            conn.executemany(_SQL.insert_tag.sql, [(session_id, t) for t in projection.tags])
    return incarnation, revision + 1, next_seq + len(rows)


@functools.cache
def _row_getter(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """An event row's statement parameters in one C call (``Compiled.args`` of a row, without
    a generator per row); one per namespace's column order, which the code fixes."""
    return operator.itemgetter(*names)


def in_write_transaction(
    conn: sqlite3.Connection, patience: float, fn: Callable[..., T], *args: Any
) -> T:
    """``fn(conn, *args)`` in one write transaction (writer thread)."""
    begin_write(conn, patience)
    try:
        result = fn(conn, *args)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


def delete(conn: sqlite3.Connection, sql: WriteStatements, session_id: str) -> bool:
    """Release the log, delete its events, then the session row (revision 0009's triggers
    refuse any other order)."""
    conn.execute(sql.release_log.sql, sql.release_log.args({"session_id": session_id}))
    conn.execute(sql.delete_events.sql, (session_id,))
    deleted = conn.execute(sql.delete.sql, (session_id,)).rowcount
    conn.execute(sql.delete_lease.sql, (session_id,))
    return deleted > 0


def acquire(
    conn: sqlite3.Connection,
    sql: WriteStatements,
    session_id: str,
    owner: str,
    now: int,
    ttl_ms: int,
    steal: bool,
) -> Lease:
    current = holder_of(conn.execute(sql.lease_row.sql, (session_id,)).fetchone())
    lease, values = acquired(current, session_id, owner, now, ttl_ms, steal=steal)
    if current is None:
        conn.execute(sql.insert_lease.sql, sql.insert_lease.args(values))
    else:
        update = sql.update_lease
        conn.execute(update.sql, update.args({**values, "l_session_id": session_id}))
    return lease


def renew(
    conn: sqlite3.Connection, sql: WriteStatements, lease: Lease, now: int, ttl_ms: int
) -> Lease:
    current = holder_of(conn.execute(sql.lease_row.sql, (lease.session_id,)).fetchone())
    new = renewed(current, lease, now, ttl_ms)
    params = {"session_id": lease.session_id, "expires_at": new.expires_at}
    conn.execute(sql.renew_lease.sql, sql.renew_lease.args(params))
    return new


def release(conn: sqlite3.Connection, sql: WriteStatements, lease: Lease) -> bool:
    params = {"session_id": lease.session_id, "owner": lease.owner, "epoch": lease.epoch}
    return conn.execute(sql.release_lease.sql, sql.release_lease.args(params)).rowcount > 0


def write_checkpoint(
    conn: sqlite3.Connection, sql: WriteStatements, checkpoint: CheckpointWrite
) -> bool:
    session_id = checkpoint.session_id
    found = conn.execute(sql.checkpoint_next_seq.sql, (session_id,)).fetchone()
    if found is None:
        raise SessionNotFoundError(session_id)
    if checkpoint.seq > found[0]:
        return False
    at = {"session_id": session_id, "seq": checkpoint.seq}
    conn.execute(sql.delete_checkpoint_at.sql, sql.delete_checkpoint_at.args(at))
    conn.execute(sql.insert_checkpoint.sql, sql.insert_checkpoint.args(checkpoint.row()))
    oldest = sql.oldest_kept_checkpoint
    kept = conn.execute(
        oldest.sql, oldest.args({"session_id": session_id, "take": 1, "skip": checkpoint.keep - 1})
    ).fetchone()
    if kept is not None:
        prune = sql.prune_checkpoints
        conn.execute(prune.sql, prune.args({"session_id": session_id, "oldest": kept[0]}))
    return True


def delete_checkpoints(conn: sqlite3.Connection, sql: WriteStatements, session_id: str) -> int:
    return int(conn.execute(sql.delete_checkpoints.sql, (session_id,)).rowcount)
