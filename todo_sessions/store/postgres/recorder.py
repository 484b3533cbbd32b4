"""`PostgresRecorder`: the recorder contract over per-loop engines (see the package docstring)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from ...errors import (
    AcknowledgedEventsLostError,
    SeqConflictError,
)
from .. import plans, reads
from ..batch import (
    AppendBatch,
    AppendOutcome,
)
from ..engine import StoreURL
from ..idle_index import IdleIndexer
from ..index_ops import IndexOperations
from ..indexer import catch_up_all, lock_key
from ..namespace import DEFAULT, Namespace
from ..options import PostgresOptions
from ..planned_writes import PlannedWrites
from ..records import EventsRead, SessionRow, SummaryRow
from ..retry import until_reachable
from ..snapshots import SnapshotReads
from ..wakeups import LocalWakeups, Wait
from . import transactions
from .connections import Connections, drop_idle
from .driver import (
    classify_error,
    connection_lost,
    statements,
    unwrapped,
)
from .listener import CURRENT_LSN, LISTENER_ARGS, RECHECK_SECONDS, PgListener
from .rows import (
    FALL_BACK,
    LISTING_READS,
    REPLAYED_LSN,
    REPLICA_READS,
    lsn_value,
    read_on,
)

T = TypeVar("T")


class PostgresRecorder(SnapshotReads, IndexOperations, PlannedWrites):
    """The `Recorder` of a PostgreSQL database. See the module docstring."""

    dialect = "postgresql"
    loop_bound = False  # engines per event loop (`_here`)

    def __init__(
        self, target: StoreURL, options: PostgresOptions, namespace: Namespace = DEFAULT
    ) -> None:
        listen, replica = options.listen, options.replica
        reconnect_timeout, replica_wait = options.reconnect_timeout, options.replica_wait
        self._target = target
        self._namespace = namespace
        self._sql = statements(namespace)  # the default namespace's: compiled once
        self._index_lock = f"SELECT pg_advisory_xact_lock_shared({lock_key(namespace.tables)})"
        """A delete's lock on the search index (`plans.INDEX_LOCK`)."""
        self._listen = listen if listen is not None else None if target.pooler else target
        self._pool = Connections(
            target,
            pool_size=options.pool_size,
            max_overflow=options.max_overflow,
            reconnect_timeout=reconnect_timeout,
            replica=replica,
        )
        """The engines (and LISTEN connection) of each event loop using the store."""
        self._wakeups = LocalWakeups()
        self._reconnect_timeout = reconnect_timeout
        self._acknowledged: dict[str, tuple[str, int]] = {}
        """Per session this store appended to: (incarnation, next seq) after its last
        acknowledged append. What a lost tail is measured against (docs/design.md, "Scaling
        out"); in memory only: a fresh process knows nothing of what came before it."""
        self._replica_target = replica
        self._replica_wait = replica_wait
        self._needed: dict[str, int] = {}
        """Per session: the primary's WAL position a replica must have replayed before it may
        serve that session's reads (after this store's last write, or a seq conflict)."""
        self._needed_all = 0
        self._idle_index = IdleIndexer(self.catch_up_index)
        """Catches the search index up once this store's appends pause."""

    async def _append_once(self, batch: AppendBatch) -> AppendOutcome:
        async with self._pool.connection() as conn:
            raw = await conn.get_raw_connection()
            driver: Any = raw.driver_connection
            outcome = await transactions.append(driver, batch, self._sql.append)
            if self._replica_target is not None:  # where a replica must be (read-your-writes)
                self._need(batch.session_id, await driver.fetchval(CURRENT_LSN))
            return outcome

    async def append(self, batch: AppendBatch) -> AppendOutcome:
        session_id = batch.session_id
        known = self._acknowledged.get(session_id)
        if known is not None and batch.rows[0]["seq"] < known[1]:
            # Below what this store was told is stored: a conflict, or a lost tail
            await self._stored_row(session_id)
        try:
            outcome = await self._append_exactly_once(batch)
        except SeqConflictError:
            if known is not None:
                await self._stored_row(session_id)
            if self._replica_target is not None:  # others wrote: reads must see that much
                self._need(session_id, await self._primary_lsn())
            raise
        acknowledged = self._acknowledged.get(session_id)
        if acknowledged is None or acknowledged[0] != outcome[0] or acknowledged[1] < outcome[2]:
            self._acknowledged[session_id] = (outcome[0], outcome[2])  # concurrent: the furthest
        self._wakeups.wake(session_id)  # pollers (behind a pooler) need not wait
        if batch.index:
            self._idle_index.appended(len(batch.rows))
        return outcome

    async def _append_exactly_once(self, batch: AppendBatch) -> AppendOutcome:
        try:
            return await self._append_once(batch)
        except Exception as exc:
            if not connection_lost(exc):
                raise
        # The connection died with the append in flight (it may or may not have committed), or
        # the append reached a standby (it did not). Until a host takes it, or the reconnect
        # timeout passes: read the session back on a fresh connection (SeqConflictError when
        # other rows took the batch's seqs) and send the batch again only if it is not there.

        async def settle() -> AppendOutcome:
            stored = await self._read_once(reads.append_outcome, batch)
            if stored is not None:
                if self._replica_target is not None:  # its commit's position was never read
                    self._need(batch.session_id, await self._primary_lsn())
                return stored
            try:
                return await self._append_once(batch)
            except SeqConflictError:
                # taken since the read back: by an earlier attempt of ours that committed
                # late (or that a lagging standby did not show), or by another writer
                stored = await self._primary(reads.append_outcome, batch)
                if stored is not None:
                    return stored
                raise

        return await until_reachable(self._reconnect_timeout, settle, connection_lost)

    async def _primary(self, op: Callable[..., T], *args: Any) -> T:
        """``op`` in one read snapshot on the primary, retried on fresh connections while the
        database is unreachable (once at least, then within the reconnect timeout)."""

        try:
            return await self._read_once(op, *args)
        except Exception as exc:
            if not connection_lost(exc):
                raise
        return await until_reachable(
            self._reconnect_timeout, lambda: self._read_once(op, *args), connection_lost
        )

    async def _read_once(self, op: Callable[..., T], *args: Any) -> T:
        async with self._pool.connection() as conn:
            return await conn.run_sync(read_on, self._sql.reads, op, args)

    async def _snapshot(self, op: Callable[..., T], *args: Any) -> T:
        """A read: on the replica when it tolerates staleness and the replica has replayed
        this store's writes the read must see (within ``replica_wait``), else on the primary."""
        if self._replica_target is not None and op in REPLICA_READS:
            if op in LISTING_READS:
                needed = self._needed_all
            else:
                needed = self._needed.get(args[0], 0) if isinstance(args[0], str) else 0
            found = await self._on_replica(op, args, needed)
            if found is not FALL_BACK:
                return found
        return await self._primary(op, *args)

    async def _on_replica(self, op: Callable[..., Any], args: tuple[Any, ...], needed: int) -> Any:
        """``op`` on the replica once it has replayed the WAL up to ``needed``; `FALL_BACK`
        when it does not within ``replica_wait`` seconds, or cannot be reached."""
        engine = (await self._pool.here()).replica
        assert engine is not None
        deadline = time.monotonic() + self._replica_wait
        try:
            async with engine.connect() as conn:
                if needed:
                    raw = await conn.get_raw_connection()
                    driver: Any = raw.driver_connection
                    pause = 0.002
                    while True:
                        replayed = await driver.fetchval(REPLAYED_LSN)
                        if replayed is None or lsn_value(replayed) >= needed:
                            break  # caught up (None: not in recovery, promoted meanwhile)
                        if time.monotonic() + pause > deadline:
                            return FALL_BACK
                        await asyncio.sleep(pause)
                        pause = min(pause * 2, 0.05)
                return await conn.run_sync(read_on, self._sql.reads, op, args)
        except Exception as exc:
            if not connection_lost(exc):
                raise
            with contextlib.suppress(Exception):
                await drop_idle(engine)
            return FALL_BACK  # the replica is down: the primary serves

    def _need(self, session_id: str, lsn: str | None) -> None:
        if lsn is None:
            return
        value = lsn_value(lsn)
        if value > self._needed.get(session_id, 0):
            self._needed[session_id] = value
        self._needed_all = max(self._needed_all, value)

    async def _primary_lsn(self) -> str | None:
        async with self._pool.connection() as conn:
            raw = await conn.get_raw_connection()
            driver: Any = raw.driver_connection
            found: str | None = await driver.fetchval(CURRENT_LSN)
            return found

    def _check_end(
        self, session_id: str, row: SessionRow | SummaryRow | None, known: tuple[str, int] | None
    ) -> None:
        """`AcknowledgedEventsLostError` when the stored session (``row``) ends before what
        this store had acknowledged when the read began (``known``: an append acknowledged
        while the read ran may be newer than its snapshot); a session deleted or made anew
        since is forgotten."""
        if known is None:
            return
        if row is None or row.incarnation != known[0]:
            if self._acknowledged.get(session_id) == known:  # deleted (perhaps made anew)
                del self._acknowledged[session_id]
            return
        if row.next_seq < known[1]:
            raise AcknowledgedEventsLostError(session_id, known[1], row.next_seq)

    async def _stored_row(self, session_id: str) -> None:
        """Check the session's row on the primary against what this store acknowledged."""
        known = self._acknowledged.get(session_id)
        self._check_end(session_id, await self._primary(reads.find_session, session_id), known)

    async def find_session(self, session_id: str) -> SessionRow | None:
        known = self._acknowledged.get(session_id)
        row = await self._snapshot(reads.find_session, session_id)
        self._check_end(session_id, row, known)
        return row

    async def read_session(self, session_id: str) -> SessionRow:
        known = self._acknowledged.get(session_id)
        row = await self._snapshot(reads.read_session, session_id)
        self._check_end(session_id, row, known)
        return row

    async def read_summary(self, session_id: str) -> SummaryRow:
        known = self._acknowledged.get(session_id)
        row = await self._snapshot(reads.read_summary, session_id)
        self._check_end(session_id, row, known)
        return row

    async def read_events(
        self, session_id: str, from_seq: int, limit: int | None = None
    ) -> EventsRead:
        known = self._acknowledged.get(session_id)
        found = await self._snapshot(reads.read_events, session_id, from_seq, limit)
        self._check_end(session_id, found[0], known)
        return found

    async def _write(self, fn: Callable[..., plans.Plan[T]], *args: Any) -> T:
        """The plan ``fn(statements, *args)`` in one transaction on the driver; sent again
        (within the reconnect timeout) only when it certainly wrote nothing: no connection
        came up, or a standby refused it."""
        began = False

        async def attempt() -> T:
            nonlocal began
            began = False
            async with self._pool.connection() as conn:
                raw = await conn.get_raw_connection()
                driver: Any = raw.driver_connection
                began = True
                sql, lock = self._sql.writes, self._index_lock
                return await transactions.in_transaction(driver, lock, fn, sql, *args)

        def nothing_written(exc: BaseException) -> bool:
            standby = classify_error(unwrapped(exc)) == "standby"
            return connection_lost(exc) and (standby or not began)

        try:
            return await attempt()
        except Exception as exc:
            if not nothing_written(exc) or self._reconnect_timeout <= 0:
                raise
        return await until_reachable(self._reconnect_timeout, attempt, nothing_written)

    async def delete(self, session_id: str) -> bool:
        self._acknowledged.pop(session_id, None)
        return await self._write(plans.delete_session, session_id)

    async def catch_up_index(self) -> int:
        tables = self._namespace.tables

        def each(conn: Connection) -> int:
            def run(fn: Callable[[Connection], T], _write: bool) -> T:
                with conn.begin():
                    return fn(conn)

            return catch_up_all(run, tables)

        async def run() -> int:
            async with (await self._pool.engine()).connect() as conn:
                return await conn.run_sync(each)

        return await self._pool.past_standbys(run)

    @contextlib.asynccontextmanager
    async def wait_for_append(self, session_id: str) -> AsyncIterator[Wait]:
        if self._listen is None:  # behind a pooler without a listen URL: poll
            async with self._wakeups.polling(session_id) as poll:
                yield poll
            return
        here = await self._pool.here()
        if here.listener is None:
            dsn = self._listen.url.set(drivername="postgresql")
            args = {k: v for k, v in self._listen.connect_args.items() if k in LISTENER_ARGS}
            if "host" in args:  # LISTEN needs the primary (a standby refuses it)
                attrs = self._listen.connect_args.get("target_session_attrs")
                args["target_session_attrs"] = "primary" if attrs == "primary" else "read-write"
            here.listener = PgListener(
                dsn.render_as_string(hide_password=False), args, self._namespace.notify_channel
            )
        listener = here.listener
        await listener.ensure_connected()
        wake = asyncio.Event()
        listener.add(session_id, wake)

        async def until_notified(_interval: float) -> None:
            with contextlib.suppress(TimeoutError):  # not `wait_for`: `wakeups.polling`
                async with asyncio.timeout(RECHECK_SECONDS):
                    await wake.wait()
            wake.clear()
            await listener.ensure_connected()  # after a lost connection: reconnect
            if self._replica_target is not None:  # the replica serves the next page once it
                self._need(session_id, await listener.current_lsn())  # has replayed this far

        try:
            yield until_notified
        finally:
            listener.remove(session_id, wake)

    async def check_integrity(self) -> list[str]:
        """PostgreSQL checks its own pages (data checksums, when the cluster enables them) as
        it reads them; a damaged page fails the reads that touch it. Nothing more to run."""
        return []

    async def open(self) -> None:
        await self._pool.open()

    async def run_locked(self, fn: Callable[[Connection], T]) -> T:
        return await self._pool.run_locked(fn)

    async def _on_sa(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        return await self._pool.run_sync(fn, write=write)

    async def close(self) -> None:
        await self._idle_index.close()
        await self._pool.close()
