"""`PerLoop`: one resource per event loop, for a store used from several threads and loops.

An asyncpg connection belongs to the event loop that made it, so a PostgreSQL store keeps its
engines (and its LISTEN connection) per loop: made on a loop's first call, and closed on that
loop, because closing them anywhere else fails inside the driver. A loop run by
`asyncio.run` (or any runner that shuts down its async generators, as `asyncio.Runner`
does) closes its own resource as it ends, so a thread that used the store and finished leaves
no connection behind; `PerLoop.aclose` closes the rest from the caller's loop: its own at
once, each other running loop's on that loop (waiting at most `CLOSE_WAIT` seconds for it).
A resource whose loop is closed already cannot be closed any more: it is dropped.

Nothing here belongs to one loop: the map is guarded by a `threading.Lock` held only around
dictionary updates, never across an ``await``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

__all__ = ["AnyLoopLock", "PerLoop"]

T = TypeVar("T")

CLOSE_WAIT = 5.0
"""How long `PerLoop.aclose` waits for another running loop to close its item (seconds)."""


class _Entry(Generic[T]):
    __slots__ = ("closer", "item", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, item: T) -> None:
        self.loop = loop
        self.item = item
        self.closer: AsyncIterator[None] | None = None
        """An async generator started on ``loop`` and suspended: the loop's shutdown of its
        async generators resumes it, and it closes ``item`` there."""


class PerLoop(Generic[T]):
    """``make()`` once per event loop that asks (`get`), ``close(item)`` on that loop at the
    end: when the loop shuts down, or at `aclose`."""

    def __init__(
        self, make: Callable[[], T], close: Callable[[T], Coroutine[Any, Any, None]]
    ) -> None:
        self._make = make
        self._close = close
        self._lock = threading.Lock()
        self._entries: dict[asyncio.AbstractEventLoop, _Entry[T]] = {}

    async def get(self) -> T:
        """The running loop's item, made on its first use there."""
        loop = asyncio.get_running_loop()
        entry = self._entries.get(loop)
        if entry is not None:
            return entry.item
        with self._lock:
            entry = self._entries.get(loop)
            made = entry is None
            if entry is None:
                entry = _Entry(loop, self._make())
                self._entries[loop] = entry
                for other in [k for k in self._entries if k.is_closed()]:
                    del self._entries[other]  # their loops are gone, and their items with them
        if made:
            closer = self._closer(entry)
            await closer.__anext__()  # started on this loop: its async-generator shutdown ends it
            entry.closer = closer
        return entry.item

    async def _closer(self, entry: _Entry[T]) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if self._take(entry):
                await self._close(entry.item)

    def _take(self, entry: _Entry[T]) -> bool:
        """Whether the caller closes ``entry`` (it is removed; nobody else will)."""
        with self._lock:
            if self._entries.get(entry.loop) is not entry:
                return False
            del self._entries[entry.loop]
            return True

    async def aclose(self) -> None:
        """Close every loop's item: the caller's here, another running loop's on that loop
        (waiting for it at most `CLOSE_WAIT` seconds), a closed loop's not at all. A loop not
        running now closes its own when it shuts down."""
        here = asyncio.get_running_loop()
        with self._lock:
            entries = list(self._entries.values())
        for entry in entries:
            if entry.loop.is_closed() or not (entry.loop is here or entry.loop.is_running()):
                continue
            if not self._take(entry):
                continue
            if entry.loop is here:
                await self._close(entry.item)
                continue
            future: Future[None] = asyncio.run_coroutine_threadsafe(
                self._close(entry.item), entry.loop
            )
            with contextlib.suppress(Exception):  # that loop stopped, or is stuck: leave it
                async with asyncio.timeout(CLOSE_WAIT):  # (not `wait_for`: `wakeups.polling`)
                    await asyncio.wrap_future(future)
        with self._lock:
            self._entries = {k: v for k, v in self._entries.items() if not k.is_closed()}


class AnyLoopLock:
    """An async lock that tasks of any event loop may take (an `asyncio.Lock` belongs to the
    first loop that waits on it). Waiters queue in order; each is woken on its own loop. The
    `threading.Lock` inside is held only around a few assignments, never across an ``await``.
    """

    __slots__ = ("_guard", "_locked", "_waiters")

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locked = False
        self._waiters: deque[asyncio.Future[None]] = deque()

    def locked(self) -> bool:
        return self._locked

    async def __aenter__(self) -> None:
        with self._guard:
            if not self._locked:
                self._locked = True
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            with self._guard:
                queued = waiter in self._waiters
                if queued:
                    self._waiters.remove(waiter)
            if not queued and not waiter.cancelled():
                self._release()  # it was handed to us as we were cancelled: pass it on
            raise  # (handed but cancelled first: `_grant` passes it on)

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        with self._guard:
            if not self._waiters:
                self._locked = False
                return
            waiter = self._waiters.popleft()  # the lock stays taken: it is handed over
        try:
            waiter.get_loop().call_soon_threadsafe(self._grant, waiter)
        except RuntimeError:  # its loop is closed: nobody waits there any more
            self._release()

    def _grant(self, waiter: asyncio.Future[None]) -> None:
        if waiter.cancelled():
            self._release()
        else:
            waiter.set_result(None)
