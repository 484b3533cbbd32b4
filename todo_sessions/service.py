"""`SessionService`: live sessions backed by a store, persisted write-behind.

See docs/design.md, "Write-behind service".

Events are appended to the in-memory `Session` at once and written to the store in batches at
checkpoints: before each model call, after a ``tool/call`` and before the tool runs, at
``turn/end`` (the agent loop calls `checkpoint`), and on `flush` / `close`. A flush that fails
for a transient reason (busy database, lost connection) is reported and the events stay queued
for the next checkpoint; nothing is dropped. A `SeqConflictError` means another writer changed
the stored log under this live owner: that is raised, since the live copy can no longer be
trusted.

One live owner per session id per service: starting, resuming or forking an id that is already
live here raises `SessionExistsError`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from .core.header import SessionHeader
from .errors import (
    SessionExistsError,
    SessionNotFoundError,
    StoreBusyError,
    StoreError,
    TodoSessionsError,
)
from .session import Session, wall_clock_ms
from .store.store import SessionStore

__all__ = ["SessionService"]

logger = logging.getLogger("todo_sessions.service")


_RETRIES = (0.05, 0.2)
"""Pauses between flush attempts at an ordinary checkpoint (then: keep queued)."""
_BEFORE_TOOL_RETRIES = (0.05, 0.2, 1.0)
"""Pauses between flush attempts before a tool runs (then: raise, the tool does not run)."""


class _Live:
    __slots__ = ("flushed", "inflight", "lock", "session")

    def __init__(self, session: Session, flushed: int) -> None:
        self.session = session
        self.flushed = flushed
        self.lock = asyncio.Lock()
        self.inflight: asyncio.Future[str] | None = None

    def settle(self, write: asyncio.Future[str], count: int) -> None:
        """Record a finished store append (it may outlive a cancelled flush)."""
        if self.inflight is write:
            self.inflight = None
        if not write.cancelled() and write.exception() is None:
            self.flushed += count


class SessionService:
    """Starts, resumes and forks live sessions on ``store`` and persists them."""

    def __init__(
        self,
        store: SessionStore,
        *,
        strict: bool = False,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.store = store
        self.strict = strict
        self._clock = clock
        self._live: dict[str, _Live] = {}
        self.last_flush_error: BaseException | None = None

    async def __aenter__(self) -> Self:
        await self.store.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- owning sessions ------------------------------------------------------------------------

    def _own(self, session: Session, flushed: int) -> Session:
        if session.id in self._live:
            raise SessionExistsError(session.id)
        self._live[session.id] = _Live(session, flushed)
        return session

    async def new(
        self,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        title: str | None = None,
        origin: str | None = None,
        delegation_depth: int = 0,
    ) -> Session:
        """Start a new session (stored on its first flush)."""
        header = SessionHeader(
            id=session_id or uuid.uuid4().hex,
            created_at=self._clock(),
            cwd=cwd,
            title=title,
            origin=origin,
            delegation_depth=delegation_depth,
        )
        if header.id in self._live:
            raise SessionExistsError(header.id)
        await self.store.create(header)
        return self._own(Session(header, strict=self.strict, clock=self._clock), 0)

    async def resume(self, session_id: str) -> Session:
        """Resume a stored session. An interrupted turn is closed durably first (crash
        repair through `SessionStore.load`), so the history is valid for a provider."""
        if session_id in self._live:
            raise SessionExistsError(session_id)
        log = await self.store.load(session_id)
        session = Session(log.header, log.events, strict=self.strict, clock=self._clock)
        return self._own(session, len(log.events))

    async def fork(
        self, source_id: str, boundary: int | None = None, child_id: str | None = None
    ) -> Session:
        """Fork a stored session (see `SessionStore.fork`) and own the child live."""
        if source_id in self._live:
            await self.flush(source_id)
        log = await self.store.fork(source_id, boundary, child_id)
        session = Session(log.header, log.events, strict=self.strict, clock=self._clock)
        return self._own(session, len(log.events))

    def get(self, session_id: str) -> Session:
        try:
            return self._live[session_id].session
        except KeyError:
            raise SessionNotFoundError(session_id, "not live in this service") from None

    def live_ids(self) -> list[str]:
        return list(self._live)

    def pending(self, session_id: str) -> int:
        """How many events of a live session are not stored yet."""
        live = self._live[session_id]
        return len(live.session.events) - live.flushed

    # -- persistence ----------------------------------------------------------------------------

    async def flush(self, session_id: str | None = None) -> None:
        """Write the queued events of one live session (or of all) to the store.

        Raises what the store raised; the events stay queued and the next flush retries them.
        Cancelling a flush never loses track of a write: the store append runs to its end
        (shielded) and its outcome is recorded whether or not anyone still awaits it.
        """
        ids = [session_id] if session_id is not None else list(self._live)
        for sid in ids:
            live = self._live.get(sid)
            if live is None:
                raise SessionNotFoundError(sid, "not live in this service")
            async with live.lock:
                if live.inflight is not None:  # a cancelled flush may still be writing
                    await asyncio.gather(asyncio.shield(live.inflight), return_exceptions=True)
                events = live.session.events[live.flushed :]
                if not events:
                    continue
                write = asyncio.ensure_future(self.store.append(sid, events))
                live.inflight = write
                write.add_done_callback(functools.partial(live.settle, count=len(events)))
                await asyncio.shield(write)

    def checkpoint_for(self, session_id: str) -> Callable[[str], Any]:
        """The checkpoint callback for an `AgentLoop` on this session."""

        async def checkpoint(name: str) -> None:
            await self.checkpoint(session_id, name)

        return checkpoint

    async def checkpoint(self, session_id: str, name: str = "checkpoint") -> None:
        """Flush at a loop checkpoint.

        A transient failure (`StoreBusyError`, a lost connection) is retried a few times; if
        it persists it is logged and the events stay queued for the next checkpoint, except at
        ``"before-tool"``, where it is raised: a tool must not run before its ``tool/call`` is
        durable, or a crash could repeat its side effects with no trace. Other failures (a seq
        conflict with another writer, a deleted session) are raised at once.
        """
        delays = _BEFORE_TOOL_RETRIES if name == "before-tool" else _RETRIES
        for attempt, delay in enumerate((*delays, None)):
            try:
                await self.flush(session_id)
                self.last_flush_error = None
                return
            except (StoreBusyError, StoreError) as exc:
                self.last_flush_error = exc
                if delay is not None:
                    await asyncio.sleep(delay)
                    continue
                if name == "before-tool":
                    raise
                logger.warning(
                    "session %r: flush at %s failed after %d tries, %d events stay queued for "
                    "the next checkpoint: %s",
                    session_id,
                    name,
                    attempt + 1,
                    self.pending(session_id),
                    exc,
                )

    async def close(self, session_id: str) -> None:
        """Flush and stop owning a live session."""
        await self.flush(session_id)
        del self._live[session_id]

    async def aclose(self) -> None:
        """Drain every live session, then close the store.

        Every session is flushed even if another one fails; failures are raised together
        afterwards (an `ExceptionGroup`), and a session that failed stays live and queued.
        """
        errors: list[Exception] = []
        try:
            for sid in list(self._live):
                try:
                    await self.close(sid)
                except TodoSessionsError as exc:
                    errors.append(exc)
        finally:
            await self.store.aclose()
        if errors:
            raise ExceptionGroup("some live sessions could not be flushed", errors)
