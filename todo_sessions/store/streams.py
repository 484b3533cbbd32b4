"""Paged streams and follow, with reconnect back-off (a part of `SessionStore`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from ..core.envelope import SessionEvent
from ..errors import StoreUnavailableError
from .base import StoreCore
from .reading import Reading
from .reads import check_from_seq
from .recorder import Recorder
from .translate import translate_errors
from .wakeups import Wait

__all__ = ["Streams"]

_RECONNECT_FIRST_PAUSE = 0.05
_RECONNECT_MAX_PAUSE = 1.0
"""A follower retries an unreachable database after 50 ms, doubling up to 1 s."""


@contextlib.asynccontextmanager
async def _translated_wait(recorder: Recorder, session_id: str) -> AsyncIterator[Wait]:
    """The recorder's `wait_for_append`, its driver errors translated."""
    with translate_errors("listening for appends"):
        async with recorder.wait_for_append(session_id) as wait:

            async def translated(interval: float) -> Any:
                with translate_errors("listening for appends"):
                    return await wait(interval)

            yield translated


class Streams:
    """`stream` and `follow` of `SessionStore` (documented there)."""

    def __init__(self, core: StoreCore, reading: Reading) -> None:
        self._reading = reading
        self.page_size, self._ready = core.page_size, core.ready

    async def stream(
        self, session_id: str, from_seq: int = 0, *, page_size: int | None = None
    ) -> AsyncGenerator[SessionEvent, None]:
        check_from_seq(from_seq)
        async for event in self._pages(session_id, from_seq, page_size or self.page_size, None):
            yield event

    async def follow(
        self,
        session_id: str,
        from_seq: int = 0,
        *,
        poll_interval: float = 0.05,
        page_size: int | None = None,
        reconnect_timeout: float = 30.0,
    ) -> AsyncGenerator[SessionEvent, None]:
        check_from_seq(from_seq)
        if reconnect_timeout < 0:
            raise ValueError("reconnect_timeout must be >= 0")
        size = page_size or self.page_size
        recorder = await self._ready()
        async with _translated_wait(recorder, session_id) as wait:
            pages = self._pages(
                session_id, from_seq, size, lambda: wait(poll_interval), reconnect_timeout
            )
            async for event in pages:
                yield event

    async def _pages(
        self,
        session_id: str,
        from_seq: int,
        size: int,
        wait: Callable[[], Awaitable[Any]] | None,
        reconnect_timeout: float = 0.0,
    ) -> AsyncIterator[SessionEvent]:
        """Events from ``from_seq``, a page (one short read transaction) at a time; at the end
        of the log, stop (``wait`` None) or wait and read on. While the database is unreachable
        the page is retried with backoff, for at most ``reconnect_timeout`` seconds."""
        seq = from_seq
        lost_since: float | None = None
        pause = _RECONNECT_FIRST_PAUSE

        async def back_off(exc: StoreUnavailableError) -> None:
            nonlocal lost_since, pause
            now = time.monotonic()
            lost_since = now if lost_since is None else lost_since
            if now - lost_since >= reconnect_timeout:
                raise StoreUnavailableError(
                    f"following session {session_id!r}: the database stayed unreachable for "
                    f"{reconnect_timeout:g} s; the last event yielded was seq {seq - 1} ({exc})"
                ) from exc
            await asyncio.sleep(pause)
            pause = min(pause * 2, _RECONNECT_MAX_PAUSE)

        while True:
            try:
                page = (await self._reading.read_events(session_id, seq, size))[1]
            except StoreUnavailableError as exc:
                if wait is None:
                    raise
                await back_off(exc)
                continue
            lost_since, pause = None, _RECONNECT_FIRST_PAUSE
            for event in page:
                yield event
            seq += len(page)
            if len(page) < size:
                if wait is None:
                    return
                try:
                    await wait()
                except StoreUnavailableError as exc:
                    await back_off(exc)
