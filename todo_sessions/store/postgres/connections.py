"""The connections of a PostgreSQL store: an engine (and a replica's, and a LISTEN connection)
per event loop, the host choice after a failover, and the one way a lost connection is
dropped (`Connections.connection`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.util import greenlet_spawn

from ...errors import StoreError
from ..connecting import HOST_KEY
from ..engine import HostChoice, StoreURL, make_pg_engine
from ..loops import PerLoop
from ..retry import until_reachable
from .driver import classify_error, connection_lost, run_locked_on_engine, unwrapped
from .listener import PgListener

__all__ = ["Connections", "LoopConnections", "drop_idle", "timed_out"]

T = TypeVar("T")


def timed_out(exc: BaseException) -> bool:
    """Whether a call failed because its statement went unanswered (``command_timeout``)."""
    driver = unwrapped(exc)
    return isinstance(driver, TimeoutError) or isinstance(driver.__cause__, TimeoutError)


async def drop_idle(engine: AsyncEngine) -> None:
    """Close the pool's idle connections (after a lost one: they usually died together),
    keeping the pool. Not ``engine.dispose()``: that replaces the pool, and the connections
    other tasks have checked out of the old one go back into it when they are done, where
    nothing ever closes them: the collector finds them, and asyncpg warns "connection
    garbage-collected unclosed". Returned to the pool kept here, a dead one fails its next
    use and is dropped then."""
    await greenlet_spawn(engine.sync_engine.pool.dispose)


@dataclass(slots=True)
class LoopConnections:
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


class Connections:
    """The engines of each event loop using a store (asyncpg's connections belong to the loop
    that made them: `loops.PerLoop`), and which hosts they may use (`engine.HostChoice`)."""

    def __init__(
        self,
        target: StoreURL,
        *,
        pool_size: int,
        max_overflow: int,
        reconnect_timeout: float,
        replica: StoreURL | None,
    ) -> None:
        self.target = target
        self._pool_size = pool_size
        self._max_overflow = max_overflow
        self.reconnect_timeout = reconnect_timeout
        self.hosts = HostChoice(target)
        self.replica_target = replica
        self._loops: PerLoop[LoopConnections] | None = None

    @property
    def is_open(self) -> bool:
        return self._loops is not None

    async def open(self) -> None:
        """Connect once now, so a bad URL fails the open."""
        if self._loops is not None:
            return
        try:
            import asyncpg  # noqa: F401  (the driver SQLAlchemy will load)
        except ImportError:
            raise StoreError(
                f"{self.target.render()}: PostgreSQL needs the asyncpg driver: "
                "pip install 'todo-sessions[postgres]'"
            ) from None
        loops = PerLoop(self._new_connections, LoopConnections.close)
        engine = (await loops.get()).engine
        try:
            async with engine.connect():  # connect now, so a bad URL fails the open
                pass
        except TypeError as exc:  # asyncpg refused a parameter taken from the URL
            await loops.aclose()
            if "unexpected keyword argument" not in str(exc):
                raise
            raise StoreError(f"{self.target.render()}: unsupported URL parameter ({exc})") from exc
        except BaseException:
            await loops.aclose()
            raise
        self._loops = loops

    def _new_connections(self) -> LoopConnections:
        """One event loop's engines (the replica's is connected on first use: it may be
        down)."""
        engine = make_pg_engine(
            self.target,
            pool_size=self._pool_size,
            max_overflow=self._max_overflow,
            hosts=self.hosts,
        )
        replica = None
        if self.replica_target is not None:
            replica = make_pg_engine(
                self.replica_target,
                pool_size=self._pool_size,
                max_overflow=self._max_overflow,
                hosts=HostChoice(self.replica_target),
            )
        return LoopConnections(engine, replica)

    async def here(self) -> LoopConnections:
        """The running event loop's engines (made on its first call)."""
        if self._loops is None:
            raise RuntimeError("the PostgreSQL recorder is not open")
        return await self._loops.get()

    async def engine(self) -> AsyncEngine:
        return (await self.here()).engine

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        """A pooled connection. One that turns out dead is invalidated (never back in the pool),
        and the pool's idle connections are dropped too: a terminated backend or a server
        restart usually killed them as well."""
        engine = await self.engine()
        async with engine.connect() as conn:
            try:
                yield conn
            except BaseException as exc:
                if connection_lost(exc):
                    if classify_error(unwrapped(exc)) == "standby":
                        self.hosts.writable_only = True  # from now on: past the standby
                    if timed_out(exc):  # a frozen host: new connections try the others first
                        with contextlib.suppress(Exception):
                            raw = await conn.get_raw_connection()
                            host = raw.info.get(HOST_KEY)
                            if host is not None:
                                self.hosts.unresponsive.mark(host)
                    with contextlib.suppress(Exception):
                        await conn.invalidate(exc if isinstance(exc, Exception) else None)
                    with contextlib.suppress(Exception):
                        await drop_idle(engine)
                raise

    async def run_locked(self, fn: Callable[[Connection], T]) -> T:
        """``fn(sync connection)`` in one transaction under the migration lock."""

        async def run() -> T:
            return await run_locked_on_engine(await self.engine(), fn)

        return await self.past_standbys(run)

    async def run_sync(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        """``fn(sync connection)`` in one transaction (on a host that takes writes)."""

        async def run() -> T:
            async with (await self.engine()).connect() as conn, conn.begin():
                return await conn.run_sync(fn)

        # a read (the schema check of opening) is retried past a lost connection too: a
        # frozen primary's timeout, mid-failover
        return await self.past_standbys(run, lost_too=not write)

    async def past_standbys(self, run: Callable[[], Awaitable[T]], *, lost_too: bool = False) -> T:
        """``await run()``; when a standby refused its write (it wrote nothing), again on a
        host that takes writes, within the reconnect timeout (``lost_too``: after a lost
        connection as well)."""

        def refused(exc: BaseException) -> bool:
            if classify_error(unwrapped(exc)) != "standby":
                return lost_too and connection_lost(unwrapped(exc))
            self.hosts.writable_only = True
            return True

        try:
            return await run()
        except Exception as exc:
            if not refused(exc):
                raise
        with contextlib.suppress(Exception):
            await drop_idle(await self.engine())  # its connections: all the standby's?
        return await until_reachable(self.reconnect_timeout, run, refused)

    async def close(self) -> None:
        loops, self._loops = self._loops, None
        if loops is not None:
            await loops.aclose()
