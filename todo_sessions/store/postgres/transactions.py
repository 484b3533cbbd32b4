"""The write transactions on an asyncpg connection (inside the caller's transaction)."""

from __future__ import annotations

from typing import Any, TypeVar

from ...errors import (
    SessionNotFoundError,
)
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

T = TypeVar("T")


async def delete(driver: Any, sql: WriteStatements, session_id: str, lock: str) -> bool:
    """Release the log, delete its events, then the session row (revision 0009's triggers
    refuse any other order). First the search index's lock, shared: never under a catch-up
    that is indexing the session (`indexer`)."""
    await driver.execute(lock)
    await driver.execute(sql.release_log.sql, *sql.release_log.args({"session_id": session_id}))
    await driver.execute(sql.delete_events.sql, session_id)
    status = await driver.execute(sql.delete.sql, session_id)
    await driver.execute(sql.delete_lease.sql, session_id)
    return _rowcount(status) > 0


def _rowcount(status: str) -> int:
    """The row count of a command status (``DELETE 3``, ``UPDATE 1``)."""
    return int(status.rsplit(" ", 1)[-1])


async def acquire(
    driver: Any,
    sql: WriteStatements,
    session_id: str,
    owner: str,
    now: int,
    ttl_ms: int,
    steal: bool,
) -> Lease:
    current = holder_of(await driver.fetchrow(sql.lease_row.sql, session_id))
    lease, values = acquired(current, session_id, owner, now, ttl_ms, steal=steal)
    if current is None:
        # a concurrent first acquire waits on the primary key, then fails: a StoreError
        await driver.execute(sql.insert_lease.sql, *sql.insert_lease.args(values))
    else:
        update = sql.update_lease
        await driver.execute(update.sql, *update.args({**values, "l_session_id": session_id}))
    return lease


async def renew(driver: Any, sql: WriteStatements, lease: Lease, now: int, ttl_ms: int) -> Lease:
    current = holder_of(await driver.fetchrow(sql.lease_row.sql, lease.session_id))
    new = renewed(current, lease, now, ttl_ms)
    params = {"session_id": lease.session_id, "expires_at": new.expires_at}
    await driver.execute(sql.renew_lease.sql, *sql.renew_lease.args(params))
    return new


async def release(driver: Any, sql: WriteStatements, lease: Lease) -> bool:
    params = {"session_id": lease.session_id, "owner": lease.owner, "epoch": lease.epoch}
    status = await driver.execute(sql.release_lease.sql, *sql.release_lease.args(params))
    return _rowcount(status) > 0


async def write_checkpoint(driver: Any, sql: WriteStatements, checkpoint: CheckpointWrite) -> bool:
    session_id = checkpoint.session_id
    found = await driver.fetchrow(sql.checkpoint_next_seq.sql, session_id)
    if found is None:
        raise SessionNotFoundError(session_id)
    if checkpoint.seq > found[0]:
        return False
    at = {"session_id": session_id, "seq": checkpoint.seq}
    await driver.execute(sql.delete_checkpoint_at.sql, *sql.delete_checkpoint_at.args(at))
    await driver.execute(sql.insert_checkpoint.sql, *sql.insert_checkpoint.args(checkpoint.row()))
    oldest = sql.oldest_kept_checkpoint
    kept = await driver.fetchrow(
        oldest.sql, *oldest.args({"session_id": session_id, "take": 1, "skip": checkpoint.keep - 1})
    )
    if kept is not None:
        prune = sql.prune_checkpoints
        await driver.execute(prune.sql, *prune.args({"session_id": session_id, "oldest": kept[0]}))
    return True


async def delete_checkpoints(driver: Any, sql: WriteStatements, session_id: str) -> int:
    return _rowcount(await driver.execute(sql.delete_checkpoints.sql, session_id))


async def append(driver: Any, batch: AppendBatch, _SQL: AppendStatements) -> AppendOutcome:
    """The append transaction on an asyncpg connection (see the module docstring), with the
    statements compiled for the store's namespace."""
    session_id = batch.session_id
    rows = batch.rows
    async with driver.transaction():
        if batch.lease is not None:
            leased = await driver.fetchrow(_SQL.lease.sql, session_id)
            check_lease(session_id, leased, batch.lease, batch.now)
        state = await driver.fetchrow(_SQL.state.sql, session_id)
        if state is None:
            if batch.header is None:
                raise SessionNotFoundError(session_id, "create it before the first append")
            values = new_session_values(batch.header, batch.now)
            # A concurrent first append may win the insert; the locked read decides.
            await driver.execute(_SQL.insert_session.sql, *_SQL.insert_session.args(values))
            state = await driver.fetchrow(_SQL.state.sql, session_id)
        next_seq, revision, incarnation, previous = state
        check_batch_start(session_id, rows[0]["seq"], next_seq)
        chain_rows(batch, previous)
        insert = _SQL.insert_events  # one statement, a list per column (revision 0012)
        columns = {n: [row[n] for row in rows] for n in insert.names if n != "session_id"}
        await driver.execute(insert.sql, *insert.args({**columns, "session_id": session_id}))
        if batch.index:  # the search index takes the events after the commit (`indexer`)
            await driver.execute(_SQL.mark_pending.sql, *_SQL.mark_pending.args(batch.pending()))
        params = after_append(next_seq, revision, len(rows), batch.now, session_id)
        await driver.execute(_SQL.update.sql, *_SQL.update.args(params))
        projection = batch.projection
        if projection is not None:  # the batch has session/meta or todo/write events
            await driver.execute(_SQL.projection.sql, *_SQL.projection.args(projection.params))
            if projection.tags is not None:
                await driver.execute(_SQL.delete_tags.sql, session_id)
                tags = [(session_id, t) for t in projection.tags]
                await driver.executemany(_SQL.insert_tag.sql, tags)
    return incarnation, revision + 1, next_seq + len(rows)
