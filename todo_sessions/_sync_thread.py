"""The private event loop of the blocking API (`todo_sessions.sync`), in a thread of its own.

`_LoopThread` runs the async store and service; the blocking methods (written by
``python -m todo_sessions._gen_sync`` into `_sync_store` and `_sync_service`) each hand one
awaitable, async iterator or async context manager to it and wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

# Items per thread hop of a blocking iterator over an async one that has its items at hand.
_BATCH = 500
# ... and over one that waits for what comes next (`follow`): each item as soon as it is read.
_LIVE = 1


class _LoopThread:
    """An event loop running in a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(started,), name="todo-sessions-sync", daemon=True
        )
        self.thread.start()
        started.wait()

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)  # this thread's own loop; no policy is changed
        self.loop.call_soon(started.set)
        self.loop.run_forever()

    def call(self, awaitable: Awaitable[T]) -> T:
        if threading.current_thread() is self.thread:
            raise RuntimeError("a SyncSessionStore method was called from its own loop thread")

        async def run() -> T:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result()

    def iterate(self, items: AsyncIterator[T], batch: int) -> Iterator[T]:
        """``items`` as a blocking iterator, ``batch`` items per thread hop; closing it (or
        leaving a ``for`` loop early) closes ``items`` on the loop."""
        try:
            while True:
                got = self.call(_take(items, batch))
                yield from got
                if len(got) < batch:  # the async iterator ended
                    return
        finally:
            aclose = getattr(items, "aclose", None)
            if aclose is not None and not self.loop.is_closed():
                self.call(aclose())

    @contextmanager
    def enter(self, manager: AbstractAsyncContextManager[T]) -> Iterator[T]:
        """``manager`` as a blocking context manager: entered and exited on the loop, with
        the exception of the ``with`` block (which it may suppress, as ``async with`` lets it)."""
        value = self.call(manager.__aenter__())
        try:
            yield value
        except BaseException as exc:
            if not self.call(manager.__aexit__(type(exc), exc, exc.__traceback__)):
                raise
        else:
            self.call(manager.__aexit__(None, None, None))

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        if threading.current_thread() is not self.thread:
            # as asyncio.run ends a loop: its async generators first, so what a store keeps
            # for this loop (a PostgreSQL pool) is closed on it, not left to the collector
            done = asyncio.run_coroutine_threadsafe(self.loop.shutdown_asyncgens(), self.loop)
            with contextlib.suppress(Exception):
                done.result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


async def _take(items: AsyncIterator[T], count: int) -> list[T]:
    batch: list[T] = []
    async for item in items:
        batch.append(item)
        if len(batch) >= count:
            break
    return batch


async def _now(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` as a coroutine: a plain method run on the loop (it reads state
    the loop's tasks change)."""
    return fn(*args, **kwargs)
