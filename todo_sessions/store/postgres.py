"""The PostgreSQL recorder: a SQLAlchemy async engine over asyncpg, hot paths on the driver.

- **Appends** run as one transaction on the asyncpg connection itself. Through SQLAlchemy each
  of the four statements pays Core's per-call work on top of the round trip; on the driver
  they are prepared once per connection. Measured with ``bench/store_bench.py`` (single-event
  appends against plain asyncpg doing the same SQL): 0.63x through Core, 0.77x on the driver.
  The statements are the same Core definitions, compiled once for asyncpg. The stored next
  seq is read under a row lock (``SELECT … FOR UPDATE``); the primary key is the last guard.
- **Reads** run on the driver connection too (asyncpg's records, no per-row Core processing),
  inside one ``REPEATABLE READ READ ONLY`` transaction, except the operations that are
  consistent without one (`reads.WITHOUT_SNAPSHOT`).
- **follow** is woken by ``NOTIFY todo_sessions_appended`` (a trigger sends it on every
  append, from any process; a namespace's trigger on ``todo_sessions_appended_<schema>``).
  All followers of a store share one LISTEN connection of their own (`PgListener`), so they
  never take connections from the pool; a periodic re-check is the safety net. LISTEN needs a
  session of its own: behind a transaction-pooling pooler (``?pgbouncer=true``) it uses the
  store's ``listen_url`` (a direct connection), and without one followers poll every
  ``poll_interval``.
- **Every write** (appends, deletes, leases, checkpoints) runs compiled statements on the
  asyncpg connection, in one driver transaction (`_write`): one write stack.
- **Migrations** run in one transaction holding a transaction-scoped advisory lock
  (`take_migration_lock`, the one place that takes it).
- **Errors**: this driver's half of error translation is `classify_error` (asyncpg's
  exception classes and SQLSTATEs).
- **Lost connections** (a terminated backend, a server restart, a network reset) are never
  reused: the connection is invalidated and the pool's idle connections are dropped with it
  (they usually died together), so the next call connects afresh. A read that hit a dead
  connection is retried once. An append whose connection died is decided by reading the
  session back on a fresh connection (`reads.append_outcome`): the batch stored byte-identical
  → success; not stored → sent once more; something else stored at its seqs →
  `SeqConflictError`. So an append is applied exactly once, or fails with nothing written.
- **Failover** (docs/design.md, "Scaling out"): a write refused by a standby (SQLSTATE 25006)
  is lost the same way, and the store's new connections then ask for a host that takes
  writes (`engine.HostChoice`); calls are retried within ``reconnect_timeout``
  (`retry.until_reachable`). The end of each session this store acknowledged is remembered:
  a stored end behind it is `AcknowledgedEventsLostError`, never a seq handed out again.
- **A read replica** (``read_url``) serves the reads in `_REPLICA_READS` once it has replayed
  this store's last write to the session (`_on_replica`), else the primary does.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..core.envelope import SessionEvent
from ..errors import AcknowledgedEventsLostError, SeqConflictError, SessionNotFoundError, StoreError
from . import reads, revisions
from .batch import (
    AppendBatch,
    AppendOutcome,
    after_append,
    chain_rows,
    check_batch_start,
    new_session_values,
)
from .checkpoints import CheckpointWrite
from .connecting import connect_each_host, tries_each_host
from .engine import HostChoice, StoreURL, make_pg_engine
from .idle_index import IdleIndexer
from .indexer import catch_up_all, lock_key
from .leases import Lease, acquired, holder_of, renewed
from .leases import check as check_lease
from .loops import PerLoop
from .namespace import DEFAULT, NOTIFY_CHANNEL, Namespace, Statements
from .queries import AppendStatements, WriteStatements
from .reads import WITHOUT_SNAPSHOT, CompiledRead
from .retry import until_reachable
from .snapshots import SnapshotReads
from .wakeups import LocalWakeups, Wait

__all__ = [
    "MIGRATION_LOCK",
    "NOTIFY_CHANNEL",
    "PgListener",
    "PostgresRecorder",
    "classify_error",
    "connection_lost",
    "is_driver_error",
    "lock_host_connection",
    "run_locked_on_engine",
]

T = TypeVar("T")

MIGRATION_LOCK = 0x746F646F5F736573
"""Any fixed 64-bit key: serialises our migrations across PostgreSQL sessions."""

_DIALECT: Any = None


def statements(namespace: Namespace) -> Statements:
    """The namespace's statements compiled for asyncpg (once per namespace)."""
    global _DIALECT
    if _DIALECT is None:  # the asyncpg dialect module loads on first use
        from sqlalchemy.dialects.postgresql import asyncpg

        _DIALECT = asyncpg.dialect()
    return namespace.compiled("postgresql", _DIALECT, pg_dialect.insert)


_RECHECK_SECONDS = 2.0
_LISTENER_ARGS = frozenset(
    {"ssl", "server_settings", "timeout", "statement_cache_size", "host", "port"}
)
"""The connect arguments a plain asyncpg connection takes (not SQLAlchemy's own)."""


class AsyncpgRows:
    """`reads.Rows` on the asyncpg connection under a SQLAlchemy connection.

    The statements run through ``run_async`` (SQLAlchemy's documented way to reach the driver
    from sync code): asyncpg returns its C-level records directly, without SQLAlchemy's per-row
    result processing (measured: read_from 100k events 0.74x → 0.9x of plain asyncpg).
    """

    __slots__ = ("_adapted", "_reads")

    def __init__(self, conn: Connection, reads: Mapping[str, CompiledRead]) -> None:
        self._adapted: Any = conn.connection.dbapi_connection
        self._reads = reads

    def fetch(self, name: str, params: Mapping[str, Any]) -> Any:
        read = self._reads[name]
        args = read.args(params)
        return self._adapted.run_async(lambda driver: driver.fetch(read.sql, *args))

    def execute(self, sql: str) -> None:
        """Run a statement without results (transaction control)."""
        self._adapted.run_async(lambda driver: driver.execute(sql))


class PostgresRecorder(SnapshotReads):
    """The `Recorder` of a PostgreSQL database. See the module docstring."""

    dialect = "postgresql"
    loop_bound = False  # engines per event loop (`_here`)

    def __init__(
        self,
        target: StoreURL,
        *,
        pool_size: int = 5,
        max_overflow: int = 10,
        listen: StoreURL | None = None,
        namespace: Namespace = DEFAULT,
        reconnect_timeout: float = 0.0,
        replica: StoreURL | None = None,
        replica_wait: float = 1.0,
    ) -> None:
        self._target = target
        self._namespace = namespace
        self._sql = statements(namespace)  # the default namespace's: compiled once
        self._listen = listen if listen is not None else None if target.pooler else target
        self._pool_size = pool_size
        self._max_overflow = max_overflow
        self._loops: PerLoop[_LoopConnections] | None = None
        """The engines (and LISTEN connection) of each event loop using the store: asyncpg's
        connections belong to the loop that made them (`loops.PerLoop`)."""
        self._wakeups = LocalWakeups()
        self._reconnect_timeout = reconnect_timeout
        self._hosts = HostChoice(target)
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

    async def open(self) -> None:
        if self._loops is not None:
            return
        try:
            import asyncpg  # noqa: F401  (the driver SQLAlchemy will load)
        except ImportError:
            raise StoreError(
                f"{self._target.render()}: PostgreSQL needs the asyncpg driver: "
                "pip install 'todo-sessions[postgres]'"
            ) from None
        loops = PerLoop(self._new_connections, _LoopConnections.close)
        engine = (await loops.get()).engine
        try:
            async with engine.connect():  # connect now, so a bad URL fails the open
                pass
        except TypeError as exc:  # asyncpg refused a parameter taken from the URL
            await loops.aclose()
            if "unexpected keyword argument" not in str(exc):
                raise
            raise StoreError(f"{self._target.render()}: unsupported URL parameter ({exc})") from exc
        except BaseException:
            await loops.aclose()
            raise
        self._loops = loops

    def _new_connections(self) -> _LoopConnections:
        """One event loop's engines (the replica's is connected on first use: it may be
        down)."""
        engine = make_pg_engine(
            self._target,
            pool_size=self._pool_size,
            max_overflow=self._max_overflow,
            hosts=self._hosts,
        )
        replica = None
        if self._replica_target is not None:
            replica = make_pg_engine(
                self._replica_target,
                pool_size=self._pool_size,
                max_overflow=self._max_overflow,
                hosts=HostChoice(self._replica_target),
            )
        return _LoopConnections(engine, replica)

    async def _here(self) -> _LoopConnections:
        """The running event loop's engines (made on its first call)."""
        if self._loops is None:
            raise RuntimeError("the PostgreSQL recorder is not open")
        return await self._loops.get()

    async def _the_engine(self) -> AsyncEngine:
        return (await self._here()).engine

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection]:
        """A pooled connection. One that turns out dead is invalidated (never back in the pool),
        and the pool's idle connections are dropped too: a terminated backend or a server
        restart usually killed them as well."""
        engine = await self._the_engine()
        async with engine.connect() as conn:
            try:
                yield conn
            except BaseException as exc:
                if connection_lost(exc):
                    if classify_error(_unwrapped(exc)) == "standby":
                        self._hosts.writable_only = True  # from now on: past the standby
                    with contextlib.suppress(Exception):
                        await conn.invalidate(exc if isinstance(exc, Exception) else None)
                    with contextlib.suppress(Exception):
                        await engine.dispose()
                raise

    async def _append_once(self, batch: AppendBatch) -> AppendOutcome:
        async with self._connection() as conn:
            raw = await conn.get_raw_connection()
            driver: Any = raw.driver_connection
            outcome = await _append(driver, batch, self._sql.append)
            if self._replica_target is not None:  # where a replica must be (read-your-writes)
                self._need(batch.session_id, await driver.fetchval(_CURRENT_LSN))
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
        async with self._connection() as conn:
            return await conn.run_sync(_read_on, self._sql.reads, op, args)

    async def _snapshot(self, op: Callable[..., T], *args: Any) -> T:
        """A read: on the replica when it tolerates staleness and the replica has replayed
        this store's writes the read must see (within ``replica_wait``), else on the primary."""
        if self._replica_target is not None and op in _REPLICA_READS:
            if op in _LISTING_READS:
                needed = self._needed_all
            else:
                needed = self._needed.get(args[0], 0) if isinstance(args[0], str) else 0
            found = await self._on_replica(op, args, needed)
            if found is not _FALL_BACK:
                return found
        return await self._primary(op, *args)

    async def _on_replica(self, op: Callable[..., Any], args: tuple[Any, ...], needed: int) -> Any:
        """``op`` on the replica once it has replayed the WAL up to ``needed``; `_FALL_BACK`
        when it does not within ``replica_wait`` seconds, or cannot be reached."""
        engine = (await self._here()).replica
        assert engine is not None
        deadline = time.monotonic() + self._replica_wait
        try:
            async with engine.connect() as conn:
                if needed:
                    raw = await conn.get_raw_connection()
                    driver: Any = raw.driver_connection
                    pause = 0.002
                    while True:
                        replayed = await driver.fetchval(_REPLAYED_LSN)
                        if replayed is None or lsn_value(replayed) >= needed:
                            break  # caught up (None: not in recovery, promoted meanwhile)
                        if time.monotonic() + pause > deadline:
                            return _FALL_BACK
                        await asyncio.sleep(pause)
                        pause = min(pause * 2, 0.05)
                return await conn.run_sync(_read_on, self._sql.reads, op, args)
        except Exception as exc:
            if not connection_lost(exc):
                raise
            with contextlib.suppress(Exception):
                await engine.dispose()
            return _FALL_BACK  # the replica is down: the primary serves

    def _need(self, session_id: str, lsn: str | None) -> None:
        if lsn is None:
            return
        value = lsn_value(lsn)
        if value > self._needed.get(session_id, 0):
            self._needed[session_id] = value
        self._needed_all = max(self._needed_all, value)

    async def _primary_lsn(self) -> str | None:
        async with self._connection() as conn:
            raw = await conn.get_raw_connection()
            driver: Any = raw.driver_connection
            found: str | None = await driver.fetchval(_CURRENT_LSN)
            return found

    def _check_end(
        self, session_id: str, row: Mapping[str, Any] | None, known: tuple[str, int] | None
    ) -> None:
        """`AcknowledgedEventsLostError` when the stored session (``row``) ends before what
        this store had acknowledged when the read began (``known``: an append acknowledged
        while the read ran may be newer than its snapshot); a session deleted or made anew
        since is forgotten."""
        if known is None:
            return
        if row is None or row["incarnation"] != known[0]:
            if self._acknowledged.get(session_id) == known:  # deleted (perhaps made anew)
                del self._acknowledged[session_id]
            return
        if row["next_seq"] < known[1]:
            raise AcknowledgedEventsLostError(session_id, known[1], row["next_seq"])

    async def _stored_row(self, session_id: str) -> None:
        """Check the session's row on the primary against what this store acknowledged."""
        known = self._acknowledged.get(session_id)
        self._check_end(session_id, await self._primary(reads.find_session, session_id), known)

    async def find_session(self, session_id: str) -> dict[str, Any] | None:
        known = self._acknowledged.get(session_id)
        row = await self._snapshot(reads.find_session, session_id)
        self._check_end(session_id, row, known)
        return row

    async def read_session(self, session_id: str) -> dict[str, Any]:
        known = self._acknowledged.get(session_id)
        row = await self._snapshot(reads.read_session, session_id)
        self._check_end(session_id, row, known)
        return row

    async def read_summary(self, session_id: str) -> dict[str, Any]:
        known = self._acknowledged.get(session_id)
        row = await self._snapshot(reads.read_summary, session_id)
        self._check_end(session_id, row, known)
        return row

    async def read_events(
        self, session_id: str, from_seq: int, limit: int | None = None
    ) -> tuple[dict[str, Any], list[SessionEvent]]:
        known = self._acknowledged.get(session_id)
        found = await self._snapshot(reads.read_events, session_id, from_seq, limit)
        self._check_end(session_id, found[0], known)
        return found

    async def _write(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await fn(driver, statements, *args)`` in one transaction on the driver; sent again
        (within the reconnect timeout) only when it certainly wrote nothing: no connection
        came up, or a standby refused it."""
        began = False

        async def attempt() -> T:
            nonlocal began
            began = False
            async with self._connection() as conn:
                raw = await conn.get_raw_connection()
                driver: Any = raw.driver_connection
                began = True
                async with driver.transaction():
                    return await fn(driver, self._sql.writes, *args)

        def nothing_written(exc: BaseException) -> bool:
            standby = classify_error(_unwrapped(exc)) == "standby"
            return connection_lost(exc) and (standby or not began)

        try:
            return await attempt()
        except Exception as exc:
            if not nothing_written(exc) or self._reconnect_timeout <= 0:
                raise
        return await until_reachable(self._reconnect_timeout, attempt, nothing_written)

    async def delete(self, session_id: str) -> bool:
        self._acknowledged.pop(session_id, None)
        lock = f"SELECT pg_advisory_xact_lock_shared({lock_key(self._namespace.tables)})"
        return await self._write(_delete, session_id, lock)

    async def catch_up_index(self) -> int:
        tables = self._namespace.tables

        def each(conn: Connection) -> int:
            def run(fn: Callable[[Connection], T], _write: bool) -> T:
                with conn.begin():
                    return fn(conn)

            return catch_up_all(run, tables)

        async def run() -> int:
            async with (await self._the_engine()).connect() as conn:
                return await conn.run_sync(each)

        return await self._past_standbys(run)

    async def acquire_lease(
        self, session_id: str, owner: str, now: int, ttl_ms: int, *, steal: bool
    ) -> Lease:
        return await self._write(_acquire, session_id, owner, now, ttl_ms, steal)

    async def renew_lease(self, lease: Lease, now: int, ttl_ms: int) -> Lease:
        return await self._write(_renew, lease, now, ttl_ms)

    async def release_lease(self, lease: Lease) -> bool:
        return await self._write(_release, lease)

    async def write_checkpoint(self, checkpoint: CheckpointWrite) -> bool:
        return await self._write(_write_checkpoint, checkpoint)

    async def delete_checkpoints(self, session_id: str) -> int:
        return await self._write(_delete_checkpoints, session_id)

    async def schema_revision(self) -> str | None:
        namespace = self._namespace
        return await self.run_maintenance(
            lambda c: revisions.schema_revision(c, namespace), write=False
        )

    async def migrate(self, revision: str, *, downgrade: bool = False) -> str | None:
        namespace = self._namespace
        return await self.run_locked(lambda c: revisions.step(c, revision, downgrade, namespace))

    @contextlib.asynccontextmanager
    async def wait_for_append(self, session_id: str) -> AsyncIterator[Wait]:
        if self._listen is None:  # behind a pooler without a listen URL: poll
            async with self._wakeups.polling(session_id) as poll:
                yield poll
            return
        here = await self._here()
        if here.listener is None:
            dsn = self._listen.url.set(drivername="postgresql")
            args = {k: v for k, v in self._listen.connect_args.items() if k in _LISTENER_ARGS}
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
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), _RECHECK_SECONDS)
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

    async def run_locked(self, fn: Callable[[Connection], T]) -> T:
        async def run() -> T:
            return await run_locked_on_engine(await self._the_engine(), fn)

        return await self._past_standbys(run)

    async def run_maintenance(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        async def run() -> T:
            async with (await self._the_engine()).connect() as conn, conn.begin():
                return await conn.run_sync(fn)

        # a read (the schema check of opening) is retried past a lost connection too: a
        # frozen primary's timeout, mid-failover
        return await self._past_standbys(run, lost_too=not write)

    async def _past_standbys(self, run: Callable[[], Awaitable[T]], *, lost_too: bool = False) -> T:
        """``await run()``; when a standby refused its write (it wrote nothing), again on a
        host that takes writes, within the reconnect timeout (``lost_too``: after a lost
        connection as well)."""

        def refused(exc: BaseException) -> bool:
            if classify_error(_unwrapped(exc)) != "standby":
                return lost_too and connection_lost(_unwrapped(exc))
            self._hosts.writable_only = True
            return True

        try:
            return await run()
        except Exception as exc:
            if not refused(exc):
                raise
        with contextlib.suppress(Exception):
            await (await self._the_engine()).dispose()  # its connections: all the standby's?
        return await until_reachable(self._reconnect_timeout, run, refused)

    async def close(self) -> None:
        await self._idle_index.close()
        loops, self._loops = self._loops, None
        if loops is not None:
            await loops.aclose()


@dataclass(slots=True)
class _LoopConnections:
    """What one event loop's calls use: the pool, the replica's, the LISTEN connection."""

    engine: AsyncEngine
    replica: AsyncEngine | None
    listener: PgListener | None = None

    async def close(self) -> None:
        if self.listener is not None:
            await self.listener.close()
        await self.engine.dispose()
        if self.replica is not None:
            await self.replica.dispose()


_CURRENT_LSN = "SELECT pg_current_wal_lsn()::text"
_REPLAYED_LSN = "SELECT pg_last_wal_replay_lsn()::text"
_FALL_BACK: Any = object()
_LISTING_READS: frozenset[Callable[..., Any]] = frozenset({reads.list_sessions, reads.session_ids})
_REPLICA_READS: frozenset[Callable[..., Any]] = frozenset(
    {
        reads.read_session,
        reads.read_summary,
        reads.read_events,
        reads.count_of_type,
        reads.latest_todos,
        reads.latest_event,
        reads.surface_state,
        reads.live_state,
        reads.checkpoint_list,
        reads.usage_payloads,
        *_LISTING_READS,
    }
)
"""The reads a replica may serve (replay, list, show, the viewer, follow's pages). The primary
keeps those that decide a write or must not miss another writer's rows: ``find_session``
(create), an append's read back, ``lease_holders``, ``seqs_past_end`` and the checkpoint texts
(verify), the store id."""


def lsn_value(lsn: str) -> int:
    """A WAL position (``16/B374D848``) as a number, to compare."""
    high, _, low = lsn.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def _unwrapped(exc: BaseException) -> BaseException:
    return exc.orig if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None else exc


def take_migration_lock(connection: Connection) -> None:
    """Take our migration lock for the rest of the connection's transaction."""
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})


def lock_host_connection(connection: Connection, *, began: bool) -> None:
    """A host's connection about to be migrated, in its transaction or ours: the lock."""
    take_migration_lock(connection)


async def run_locked_on_engine(engine: AsyncEngine, fn: Callable[[Connection], T]) -> T:
    """Run ``fn(sync connection)`` in one transaction under the migration lock."""

    def locked(connection: Connection) -> T:
        take_migration_lock(connection)
        return fn(connection)

    async with engine.connect() as conn, conn.begin():
        return await conn.run_sync(locked)


async def _delete(driver: Any, sql: WriteStatements, session_id: str, lock: str) -> bool:
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


async def _acquire(
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


async def _renew(driver: Any, sql: WriteStatements, lease: Lease, now: int, ttl_ms: int) -> Lease:
    current = holder_of(await driver.fetchrow(sql.lease_row.sql, lease.session_id))
    new = renewed(current, lease, now, ttl_ms)
    params = {"session_id": lease.session_id, "expires_at": new.expires_at}
    await driver.execute(sql.renew_lease.sql, *sql.renew_lease.args(params))
    return new


async def _release(driver: Any, sql: WriteStatements, lease: Lease) -> bool:
    params = {"session_id": lease.session_id, "owner": lease.owner, "epoch": lease.epoch}
    status = await driver.execute(sql.release_lease.sql, *sql.release_lease.args(params))
    return _rowcount(status) > 0


async def _write_checkpoint(driver: Any, sql: WriteStatements, checkpoint: CheckpointWrite) -> bool:
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


async def _delete_checkpoints(driver: Any, sql: WriteStatements, session_id: str) -> int:
    return _rowcount(await driver.execute(sql.delete_checkpoints.sql, session_id))


async def _append(driver: Any, batch: AppendBatch, _SQL: AppendStatements) -> AppendOutcome:
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


def _read_on(
    sync_conn: Any,
    reads: Mapping[str, CompiledRead],
    op: Callable[..., T],
    args: tuple[Any, ...],
) -> T:
    rows = AsyncpgRows(sync_conn, reads)
    if op in WITHOUT_SNAPSHOT:
        return op(rows, *args)
    # The reads run on the driver, outside SQLAlchemy's (lazy, never started) transaction:
    # give them one snapshot of their own.
    rows.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    try:
        return op(rows, *args)
    finally:
        rows.execute("ROLLBACK")


class PgListener:
    """One LISTEN connection per store, outside the pool, shared by all its followers.

    Followers register an `asyncio.Event` per session; a notification for a session sets its
    events. If the connection is lost, every follower is woken at once: it re-reads (so nothing
    sent meanwhile is missed) and the connection is re-opened on its next wait.
    """

    def __init__(
        self, dsn: str, connect_args: Mapping[str, Any], channel: str = NOTIFY_CHANNEL
    ) -> None:
        self._dsn = dsn
        self._channel = channel
        self._connect_args = dict(connect_args)
        self._conn: Any = None
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._lock = asyncio.Lock()

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        for event in self._waiters.get(payload, ()):
            event.set()

    def _wake_all(self, *_args: Any) -> None:
        """The connection died: wake every follower, so each re-reads and reconnects now."""
        for events in self._waiters.values():
            for event in events:
                event.set()

    async def ensure_connected(self) -> None:
        if self._conn is not None and not self._conn.is_closed():
            return
        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return
            import asyncpg

            try:
                args = self._connect_args
                connect = connect_each_host if tries_each_host(args) else asyncpg.connect
                conn = await connect(self._dsn, **args)
            except TypeError as exc:  # a URL parameter asyncpg does not take
                raise StoreError(f"unsupported URL parameter ({exc})") from exc
            await conn.add_listener(self._channel, self._notified)
            conn.add_termination_listener(self._wake_all)
            self._conn = conn
            self._wake_all()  # anything may have been missed while there was no connection

    async def current_lsn(self) -> str | None:
        """The primary's current WAL position (on the LISTEN connection: no pool needed)."""
        conn = self._conn
        if conn is None or conn.is_closed():
            return None
        async with self._lock:  # one query at a time on the shared connection
            try:
                found: str | None = await conn.fetchval(_CURRENT_LSN)
            except Exception:  # lost: the next wait reconnects; the page falls back meanwhile
                return None
            return found

    def add(self, session_id: str, event: asyncio.Event) -> None:
        self._waiters.setdefault(session_id, set()).add(event)

    def remove(self, session_id: str, event: asyncio.Event) -> None:
        events = self._waiters.get(session_id)
        if events is not None:
            events.discard(event)
            if not events:
                del self._waiters[session_id]

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            await conn.close()


# -- this driver's half of error translation ----------------------------------------------------

_BUSY_SQLSTATES = frozenset({"40001", "40P01", "55P03", "57014"})
"""Serialization failure, deadlock, lock not available, statement cancelled (a lock timeout)."""
_MISSING_SQLSTATES = frozenset({"42P01", "3F000"})
"""Undefined table, invalid schema name."""
_READ_ONLY_SQLSTATE = "25006"
"""read_only_sql_transaction: a write on a hot standby (or a server in recovery, or one with
``default_transaction_read_only``)."""
_LOST_SQLSTATE_PREFIXES = ("08", "57P01", "57P02", "57P03")
"""Connection exceptions (class 08) and the server shutting the session down (admin shutdown,
crash shutdown, cannot connect now)."""


def _asyncpg_error(exc: BaseException) -> BaseException | None:
    """``exc`` (or what SQLAlchemy's asyncpg adapter wrapped) when it is asyncpg's. Without
    asyncpg loaded, no exception can be one of its."""
    asyncpg = sys.modules.get("asyncpg")
    if asyncpg is None:
        return None
    errors = asyncpg.exceptions
    classes = (errors.PostgresError, errors.InterfaceError, errors.InternalClientError)
    for candidate in (exc, exc.__cause__):
        if isinstance(candidate, classes):
            return candidate
    return None


def is_driver_error(exc: BaseException) -> bool:
    return _asyncpg_error(exc) is not None


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (raw, or wrapped by SQLAlchemy) says the connection is dead, or never
    came up: asyncpg's kind, or a network error."""
    driver = exc.orig if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None else exc
    if classify_error(driver) in ("lost", "standby"):  # a standby's connection is no use either
        return True
    return any(isinstance(e, OSError) for e in (driver, driver.__cause__))


def classify_error(exc: BaseException) -> str | None:
    """``busy``, ``missing``, ``unique``, ``standby``, ``lost``, or None: by asyncpg's exception
    classes and the server's SQLSTATE."""
    driver = _asyncpg_error(exc)
    if driver is None:
        return None
    errors = sys.modules["asyncpg"].exceptions
    state = str(getattr(driver, "sqlstate", None) or "")
    if state in _BUSY_SQLSTATES:
        return "busy"
    if state in _MISSING_SQLSTATES:
        return "missing"
    if state == "23505":
        return "unique"
    if state == _READ_ONLY_SQLSTATE:
        return "standby"
    if state.startswith(_LOST_SQLSTATE_PREFIXES):
        return "lost"
    if isinstance(driver, errors.TargetServerAttributeNotMatched):
        return "standby"  # no host of the URL is what it asks for (mid-failover: no primary)
    if isinstance(driver, errors.InternalClientError):  # "cannot switch to state ..."
        return "lost"
    if isinstance(driver, errors.InterfaceError) and "closed" in str(driver):
        return "lost"  # "connection is closed", ...: the class has no finer kinds
    return None
