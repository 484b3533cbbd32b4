"""Following the sessions a client has open in the store: each event stored, whoever appended
it (this agent, the program that embeds it, any other process), wakes the session's view
(`todo_sessions.acp.views`: what the client was not shown yet is sent, in log order), and a
``session/meta`` event that changes a title or tags is announced to the client."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from ..core.meta import META_TYPE
from ..store.store import SessionStore

__all__ = ["Followers"]

logger = logging.getLogger("todo_sessions.acp")

Announce = Callable[[str], Awaitable[None]]
"""``announce(session_id)``: send the session's ``session_info_update``."""

Wake = Callable[[str, int], Awaitable[None]]
"""``wake(session_id, seq)``: the event ``seq`` of the session is stored."""


class Followers:
    """One task per followed session, each calling ``wake`` for every event it reads and
    ``announce`` on a title or tags change."""

    def __init__(self, announce: Announce, wake: Wake | None = None) -> None:
        self._announce = announce
        self._wake = wake
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._tasks

    def ids(self) -> list[str]:
        return list(self._tasks)

    def follow(self, store: SessionStore, session_id: str, from_seq: int, interval: float) -> None:
        """Follow ``session_id`` from ``from_seq`` (no-op if followed); ``interval``: seconds
        between looks on SQLite (PostgreSQL is notified)."""
        task = self._tasks.get(session_id)
        if task is None or task.done():
            self._tasks[session_id] = asyncio.create_task(
                self._follow(store, session_id, from_seq, interval)
            )

    async def unfollow(self, session_id: str) -> None:
        task = self._tasks.pop(session_id, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _follow(
        self, store: SessionStore, session_id: str, from_seq: int, interval: float
    ) -> None:
        """Wake the view for each event and announce each ``session/meta`` event that
        changes the title or tags, whoever appended it; ends quietly when the session is
        deleted or the store closes."""
        try:
            async for event in store.follow(session_id, from_seq, poll_interval=interval):
                if self._wake is not None:
                    await self._wake(session_id, event.seq)
                if event.type == META_TYPE and ("title" in event.data or "tags" in event.data):
                    await self._announce(session_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # deleted, store closed, client gone: nothing more to send
            logger.debug("stopped following session %r: %s", session_id, exc)
