"""PostgreSQL: the search index caught up in the background once a store's appends pause.

SQLite's writer thread does this between its jobs (`sqlite.INDEX_IDLE`). A PostgreSQL store
has no thread of its own: its appends run on the host's event loop, so `IdleIndexer` keeps a
timer there and, once no append came for `INDEX_IDLE` seconds (or `INDEX_BACKLOG` events wait),
runs the recorder's catch-up (`indexer.catch_up_all`) as a task of that loop: awaits on the
pool's connection, never blocking the loop. A failure leaves the work to the next search.

A store may be used from several threads, each with its own loop (a pool per loop): the
timer lives on the first loop that appends, and appends on other loops leave their events
to it or to the next search (which catches up first, whatever the timer did).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

__all__ = ["INDEX_BACKLOG", "INDEX_EVERY", "INDEX_IDLE", "IdleIndexer"]

INDEX_IDLE = 0.1
"""Seconds without an append after which the store catches the index up."""
INDEX_EVERY = 1.0
"""SQLite: seconds at least from one idle catch-up of a writer to its next, so that appends
coming a little more than `INDEX_IDLE` apart are indexed a few at a time, not one catch-up
transaction each (a search catches up first whatever the timer did)."""
INDEX_BACKLOG = 20_000
"""Events left to the index past which it catches up even while appends go on."""


class IdleIndexer:
    """One per PostgreSQL store: `appended` after each indexed append, `close` at the end."""

    def __init__(self, catch_up: Callable[[], Awaitable[int]]) -> None:
        self._catch_up = catch_up
        self._unindexed = 0
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the timer and the catch-up run on (the first to append)."""

    def appended(self, events: int) -> None:
        """An append of ``events`` left to the index has committed (on the store's loop)."""
        loop = asyncio.get_running_loop()
        if self._loop is None or self._loop.is_closed():
            self._loop, self._timer, self._task = loop, None, None
        elif loop is not self._loop:  # another thread's loop: this loop's timer covers it
            return
        self._unindexed += events
        self._last = loop.time()
        if self._task is not None:
            return
        if self._unindexed >= INDEX_BACKLOG:
            self._start(loop)
        elif self._timer is None:
            self._timer = loop.call_later(INDEX_IDLE, self._due, loop)

    def _due(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        if self._task is not None:
            return
        quiet = loop.time() - self._last
        if quiet < INDEX_IDLE:  # appends came meanwhile: wait for the pause
            self._timer = loop.call_later(INDEX_IDLE - quiet, self._due, loop)
            return
        self._start(loop)

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        taken = self._unindexed
        try:
            await self._catch_up()
        except Exception:  # the next search catches up (and reports what is wrong)
            pass
        finally:
            self._task = None
        self._unindexed = max(0, self._unindexed - taken)
        if self._unindexed and self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(INDEX_IDLE, self._due, loop)

    async def close(self) -> None:
        """Stop the timer and any catch-up under way (what it left stays pending)."""
        timer, task, loop = self._timer, self._task, self._loop
        self._timer = self._task = self._loop = None
        if loop is None or (timer is None and task is None):
            return
        if loop is not asyncio.get_running_loop():  # closed from another thread's loop
            with contextlib.suppress(RuntimeError):  # that loop is closed: nothing runs there
                for handle in (timer, task):
                    if handle is not None:
                        loop.call_soon_threadsafe(handle.cancel)
            return
        if timer is not None:
            timer.cancel()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
