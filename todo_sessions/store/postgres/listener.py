"""One LISTEN connection per store and event loop, shared by its followers."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, TypeVar

from ...errors import (
    StoreError,
)
from ..connecting import connect_each_host, tries_each_host
from ..namespace import NOTIFY_CHANNEL

T = TypeVar("T")

RECHECK_SECONDS = 2.0
LISTENER_ARGS = frozenset(
    {"ssl", "server_settings", "timeout", "statement_cache_size", "host", "port"}
)
"""The connect arguments a plain asyncpg connection takes (not SQLAlchemy's own)."""


CURRENT_LSN = "SELECT pg_current_wal_lsn()::text"


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
                found: str | None = await conn.fetchval(CURRENT_LSN)
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
