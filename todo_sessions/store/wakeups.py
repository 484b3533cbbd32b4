"""Waking followers that poll when this store appends (`LocalWakeups`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

__all__ = ["LocalWakeups", "Wait"]

Wait = Callable[[float], Any]
"""``await wait(poll_interval)``: returns when the followed session may have new events."""


class LocalWakeups:
    """Followers that poll, woken at once by appends made through the same store."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def wake(self, session_id: str) -> None:
        """Wake the followers of ``session_id``, each on its own event loop (a SQLite store
        serves callers on several loops: an `asyncio.Event` is set only from its loop)."""
        waiters = self._waiters.get(session_id)
        if not waiters:  # the usual case: every append calls this, few sessions are followed
            return
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for loop, event in waiters:
            if loop is here:
                event.set()
            else:
                with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                    loop.call_soon_threadsafe(event.set)

    @contextlib.asynccontextmanager
    async def polling(self, session_id: str) -> AsyncIterator[Wait]:
        """A `Wait` that returns after ``poll_interval`` or at this store's next append."""
        wake = asyncio.Event()
        waiter = (asyncio.get_running_loop(), wake)
        self._waiters.setdefault(session_id, set()).add(waiter)

        async def poll(interval: float) -> None:
            # `asyncio.timeout`, not `wait_for`: Python 3.11's `wait_for` returns, and swallows
            # a cancel of its caller, when the event was set in the same turn of the loop (a
            # follower cancelled just as an append woke it would poll on forever)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await wake.wait()
            wake.clear()

        try:
            yield poll
        finally:
            waiters = self._waiters.get(session_id)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[session_id]
