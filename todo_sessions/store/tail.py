"""Reading a session as a stream: `stream` (what is stored now) and `follow` (and what comes).

Both read in pages by seq, each page its own short transaction, so no transaction stays open
while the caller works and memory stays flat for any session size.

`follow` keeps going after the end of the log. On PostgreSQL it sleeps until a
``NOTIFY todo_sessions_appended`` for the session (sent by a trigger on every append, from any
process), with a periodic re-check as a safety net; on SQLite it polls every ``poll_interval``
seconds (default 0.05 s), so a new event is seen within about that interval plus one query.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from ..core.envelope import SessionEvent
from .reads import check_from_seq
from .translate import translate_errors

__all__ = ["NOTIFY_CHANNEL", "LogTail", "PgListener"]

NOTIFY_CHANNEL = "todo_sessions_appended"
"""PostgreSQL channel notified with the session id after each committed append."""

_PG_RECHECK_SECONDS = 2.0


class LogTail:
    """Mixed into `SessionStore`; relies on its connection and read helpers."""

    page_size: int

    @property
    @abstractmethod
    def dialect(self) -> str: ...

    @abstractmethod
    async def _ready(self) -> AsyncEngine: ...

    @abstractmethod
    async def _read_events(
        self, session_id: str, from_seq: int, limit: int | None = None
    ) -> tuple[dict[str, Any], list[SessionEvent]]: ...

    async def _page(self, session_id: str, seq: int, size: int) -> list[SessionEvent]:
        return (await self._read_events(session_id, seq, size))[1]

    async def stream(
        self, session_id: str, from_seq: int = 0, *, page_size: int | None = None
    ) -> AsyncIterator[SessionEvent]:
        """Like `read_from`, as an async iterator reading ``page_size`` events per query."""
        check_from_seq(from_seq)
        size = page_size or self.page_size
        seq = from_seq
        while True:
            page = await self._page(session_id, seq, size)
            for event in page:
                yield event
            seq += len(page)
            if len(page) < size:
                return

    async def follow(
        self,
        session_id: str,
        from_seq: int = 0,
        *,
        poll_interval: float = 0.05,
        page_size: int | None = None,
    ) -> AsyncIterator[SessionEvent]:
        """The stored events from ``from_seq``, then each new one as any process appends it,
        in seq order with no gaps or duplicates. Runs until the caller stops iterating (or the
        session is deleted: `SessionNotFoundError`). Closing the iterator releases its
        connection.

        On PostgreSQL all followers of a store share one LISTEN connection of their own, so
        any number of them never takes connections from the pool.
        """
        check_from_seq(from_seq)
        size = page_size or self.page_size
        engine = await self._ready()
        wake = asyncio.Event()
        async with self._wakeups(engine, session_id, wake) as wait:
            seq = from_seq
            while True:
                wake.clear()
                page = await self._page(session_id, seq, size)
                for event in page:
                    yield event
                seq += len(page)
                if len(page) < size:
                    await wait(poll_interval)

    @contextlib.asynccontextmanager
    async def _wakeups(
        self, engine: AsyncEngine, session_id: str, wake: asyncio.Event
    ) -> AsyncIterator[Callable[[float], Awaitable[None]]]:
        """A ``wait(poll_interval)`` that returns when the session may have new events."""
        if self.dialect != "postgresql":

            async def poll(interval: float) -> None:
                await asyncio.sleep(interval)

            yield poll
            return

        listener = await self._listener()
        listener.add(session_id, wake)

        async def until_notified(_interval: float) -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), _PG_RECHECK_SECONDS)
            await listener.ensure_connected()  # after a lost connection: reconnect

        try:
            yield until_notified
        finally:
            listener.remove(session_id, wake)

    @abstractmethod
    async def _listener(self) -> PgListener: ...


class PgListener:
    """One LISTEN connection per store, outside the pool, shared by all its followers.

    Followers register an `asyncio.Event` per session; a notification for a session sets its
    events. If the connection is lost, followers still make progress through their periodic
    re-check, and the connection is re-opened on their next wait.
    """

    def __init__(self, dsn: str, connect_args: Mapping[str, Any]) -> None:
        self._dsn = dsn
        self._connect_args = dict(connect_args)
        self._conn: Any = None
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._lock = asyncio.Lock()

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        for event in self._waiters.get(payload, ()):
            event.set()

    async def ensure_connected(self) -> None:
        if self._conn is not None and not self._conn.is_closed():
            return
        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return
            import asyncpg

            with translate_errors("listening for appends"):
                conn = await asyncpg.connect(self._dsn, **self._connect_args)
                await conn.add_listener(NOTIFY_CHANNEL, self._notified)
            self._conn = conn
            for events in self._waiters.values():  # anything may have been missed
                for event in events:
                    event.set()

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
