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
live here raises `SessionExistsError`. Across processes, a service takes a lease on every
session it owns (docs/design.md, "Leases"): resuming a session that another live service holds
raises `SessionLeasedError` unless ``steal=True``, and every flush is fenced by the lease, so a
service whose lease was taken over gets `LeaseLostError` and writes nothing more.

Closing never drops events: `aclose` retries transient failures until ``close_timeout``; what
still cannot be stored is written to a recovery file (`todo_sessions._recovery`) and reported
as `EventsNotStoredError` with the file's path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

from ._live import LiveEntry, stop_timer, timer_ended
from ._session import Session, wall_clock_ms
from .core.compaction import DEFAULT_PLACEHOLDER, CompactionResult, PruneResult
from .core.header import SessionHeader
from .errors import (
    EventsNotStoredError,
    LeaseLostError,
    SessionExistsError,
    SessionNotFoundError,
    StoreError,
    TodoSessionsError,
)
from .store.leases import Lease
from .store.store import SessionStore

__all__ = ["SessionService"]

logger = logging.getLogger("todo_sessions.service")


_RETRIES = (0.05, 0.2)
"""Pauses between flush attempts at an ordinary checkpoint (then: keep queued)."""
_BEFORE_TOOL_RETRIES = (0.05, 0.2, 1.0)
"""Pauses between flush attempts before a tool runs (then: raise, the tool does not run)."""


_CLOSE_FIRST_PAUSE = 0.05
_CLOSE_MAX_PAUSE = 1.0
"""While closing, a transient failure is retried after 50 ms, doubling up to 1 s."""


class SessionService:
    """Starts, resumes and forks live sessions on ``store`` and persists them.

    ``leases`` (default on): own each live session through a lease of ``lease_ttl`` seconds,
    renewed every third of it while held. ``close_timeout``: how long `aclose` keeps retrying
    transient failures before writing recovery files to ``recovery_dir`` (default:
    `recovery.default_recovery_dir`). ``owner``: this service's lease owner id (default: a
    random one per service).

    Long sessions: a projection checkpoint (`SessionStore.write_checkpoint`) is written at each
    turn end and every ``checkpoint_every`` events inside a long turn, so `resume` reads the
    newest checkpoint and the events after it, never the whole log. After each flush a live
    session lets go of its stored events (``retain_events=True`` keeps them in
    ``session.events``), so its memory does not grow with its log. ``flush_interval``
    (seconds, default 0.1; None: off): queued events are also flushed on this timer, so
    another process following the session sees streamed chunks within about that delay (with
    group commit, one commit per interval for all sessions of the store).
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        strict: bool = False,
        clock: Callable[[], int] = wall_clock_ms,
        leases: bool = True,
        lease_ttl: float = 30.0,
        close_timeout: float = 30.0,
        recovery_dir: str | os.PathLike[str] | None = None,
        owner: str | None = None,
        checkpoint_every: int = 2000,
        retain_events: bool = False,
        flush_interval: float | None = 0.1,
    ) -> None:
        if not lease_ttl > 0:
            raise ValueError(f"lease_ttl must be > 0 seconds, got {lease_ttl!r}")
        if not close_timeout >= 0:
            raise ValueError(f"close_timeout must be >= 0 seconds, got {close_timeout!r}")
        if type(checkpoint_every) is not int or checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be an int >= 1, got {checkpoint_every!r}")
        if flush_interval is not None and not flush_interval > 0:
            raise ValueError(f"flush_interval must be > 0 seconds or None, got {flush_interval!r}")
        self.store = store
        self.strict = strict
        self.checkpoint_every = checkpoint_every
        self.retain_events = retain_events
        self.flush_interval = flush_interval
        self._flusher: asyncio.Task[None] | None = None
        self._clock = clock
        self.leases = leases
        self.lease_ttl = lease_ttl
        self.close_timeout = close_timeout
        self.recovery_dir = Path(recovery_dir) if recovery_dir is not None else None
        self.owner = owner or f"service-{uuid.uuid4().hex[:16]}"
        self._live: dict[str, LiveEntry] = {}
        self._renewer: asyncio.Task[None] | None = None
        self._timers_lock = threading.Lock()
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

    def _own(self, session: Session, flushed: int, lease: Lease | None) -> Session:
        live = LiveEntry(session, flushed, lease)
        if self._live.setdefault(session.id, live) is not live:  # one step: threads may race
            raise SessionExistsError(session.id)
        if not self.retain_events:
            session.release_stored(flushed)
        self._keep_timers()
        return session

    def _keep_timers(self) -> None:
        """Start the flush timer and the lease renewer on this loop unless they run: not yet,
        or not any more (the loop that ran them ended; threads with loops of their own may
        share a service)."""
        with self._timers_lock:
            if self.flush_interval is not None and timer_ended(self._flusher):
                self._flusher = asyncio.create_task(self._flush_on_timer(self.flush_interval))
            if self.leases and timer_ended(self._renewer):
                self._renewer = asyncio.create_task(self._renew_leases())

    async def _flush_on_timer(self, interval: float) -> None:
        """Flush whatever is queued every ``interval`` seconds (followers see it soon). A
        failure here is left to the next flush point, which reports it."""
        while True:
            await asyncio.sleep(interval)
            for sid, live in list(self._live.items()):
                if live.session.next_seq > live.flushed and not live.lock.locked():
                    try:
                        await self.flush(sid)
                    except (TodoSessionsError, KeyError) as exc:
                        logger.debug("session %r: timed flush failed: %s", sid, exc)

    async def _lease(self, session_id: str, *, steal: bool = False) -> Lease | None:
        if not self.leases:
            return None
        return await self.store.acquire_lease(
            session_id, self.owner, ttl=self.lease_ttl, steal=steal
        )

    async def _give_back(self, lease: Lease | None) -> None:
        if lease is not None:
            with contextlib.suppress(TodoSessionsError):
                await self.store.release_lease(lease)

    async def _renew_leases(self) -> None:
        """Renew every held lease every third of its ttl; a lost one marks its session."""
        while True:
            await asyncio.sleep(self.lease_ttl / 3)
            for live in list(self._live.values()):
                if live.lease is None or live.lost is not None:
                    continue
                try:
                    live.lease = await self.store.renew_lease(live.lease, ttl=self.lease_ttl)
                except LeaseLostError as exc:
                    live.lost = exc
                    logger.warning("session %r: %s", live.session.id, exc)
                except TodoSessionsError as exc:  # transient: try again at the next round
                    logger.warning("session %r: lease renewal failed: %s", live.session.id, exc)

    async def new(
        self,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        title: str | None = None,
        origin: str | None = None,
        delegation_depth: int = 0,
        parent: str | None = None,
    ) -> Session:
        """Start a new session (stored on its first flush), leased to this service.

        ``parent``: the session that started this one (a sub-agent's), stored as the header's
        ``parent_session``; ``store.list(parent=...)`` finds it."""
        header = SessionHeader(
            id=session_id or uuid.uuid4().hex,
            created_at=self._clock(),
            cwd=cwd,
            parent_session=parent,
            title=title,
            origin=origin,
            delegation_depth=delegation_depth,
        )
        if header.id in self._live:
            raise SessionExistsError(header.id)
        lease = await self._lease(header.id)
        try:
            await self.store.create(header)
        except BaseException:
            await self._give_back(lease)
            raise
        return self._own(Session(header, strict=self.strict, clock=self._clock), 0, lease)

    async def resume(self, session_id: str, *, steal: bool = False) -> Session:
        """Resume a stored session from its newest projection checkpoint and the events after
        it (`SessionStore.resume_state`). An interrupted turn is closed durably first (crash
        repair), so the history is valid for a provider.

        The session's lease is taken first: `SessionLeasedError` when another live service
        holds it, unless ``steal`` (the other service then gets `LeaseLostError` on its next
        flush and writes nothing more). An expired lease, or one held by a process of this
        host that no longer runs, is taken over without ``steal``.
        """
        if session_id in self._live:
            raise SessionExistsError(session_id)
        # The lease (a durable write) and the read of the state run side by side; an open
        # turn is repaired only once the lease is held, under it.
        leasing = asyncio.ensure_future(self._lease(session_id, steal=steal))
        reading = asyncio.ensure_future(self.store.resume_state(session_id, repair=False))
        try:
            await asyncio.wait((leasing, reading))
        except asyncio.CancelledError:
            leasing.cancel()
            reading.cancel()
            raise
        failed = reading.exception()  # retrieved either way
        lease = leasing.result()  # raises SessionLeasedError and the like
        try:
            if failed is not None:
                raise failed
            found = reading.result()
            if found.state.structure.open_turn is not None:
                found = await self.store.resume_state(session_id, lease=lease)
        except BaseException:
            await self._give_back(lease)
            raise
        state = found.state
        session = Session(found.header, strict=self.strict, clock=self._clock, state=state)
        return self._own(session, state.next_seq, lease)

    async def fork(
        self, source_id: str, boundary: int | None = None, child_id: str | None = None
    ) -> Session:
        """Fork a stored session (see `SessionStore.fork`) and own the child live."""
        if source_id in self._live:
            await self.flush(source_id)
        log = await self.store.fork(source_id, boundary, child_id)
        lease = await self._lease(log.header.id)
        session = Session(log.header, log.events, strict=self.strict, clock=self._clock)
        return self._own(session, len(log.events), lease)

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
        return live.session.next_seq - live.flushed

    # -- persistence ----------------------------------------------------------------------------

    async def flush(self, session_id: str | None = None) -> None:
        """Write the queued events of one live session (or of all) to the store.

        Raises what the store raised; the events stay queued and the next flush retries them.
        Cancelling a flush never loses track of a write: the store append runs to its end
        (shielded) and its outcome is recorded whether or not anyone still awaits it.
        """
        ids = [session_id] if session_id is not None else list(self._live)
        if ids:
            self._keep_timers()
        for sid in ids:
            live = self._live.get(sid)
            if live is None:
                raise SessionNotFoundError(sid, "not live in this service")
            async with live.lock:
                await live.settled()  # a cancelled flush may still be writing
                events = live.session.events_from(live.flushed)
                if not events:
                    continue
                if live.lost is not None:
                    raise live.lost
                await live.write(self.store, events)
                if not self.retain_events:
                    live.session.release_stored(live.flushed)

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
        durable, or a crash could repeat its side effects with no trace. ``"turn-end"`` and
        ``"compaction"`` (after `compact` and `prune_tool_results`) also write a projection
        checkpoint. Other failures (a seq
        conflict with another writer, a deleted session) are raised at once.
        """
        delays = _BEFORE_TOOL_RETRIES if name == "before-tool" else _RETRIES
        for attempt, delay in enumerate((*delays, None)):
            try:
                await self.flush(session_id)
                self.last_flush_error = None
                await self._maybe_write_checkpoint(
                    session_id, turn_end=name in ("turn-end", "compaction")
                )
                return
            except StoreError as exc:  # StoreBusyError too
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

    async def _maybe_write_checkpoint(self, session_id: str, *, turn_end: bool) -> None:
        """A projection checkpoint at a turn end, or after ``checkpoint_every`` events, once
        everything is stored. Derived data: a failure is logged, never raised."""
        live = self._live.get(session_id)
        if live is None:
            return
        session = live.session
        due = session.next_seq - live.checkpointed
        if due <= 0 or live.flushed != session.next_seq:
            return
        if not turn_end and due < self.checkpoint_every:
            return
        try:
            if await self.store.write_checkpoint(session_id, session.checkpoint_state()):
                live.checkpointed = session.next_seq
        except TodoSessionsError as exc:
            logger.warning("session %r: checkpoint not written: %s", session_id, exc)

    # -- compaction (docs/format.md, "Compaction") --------------------------------------------

    async def compact(
        self,
        session_id: str,
        summary: str | Sequence[Mapping[str, Any]],
        *,
        start_seq: int | None = None,
        end_seq: int | None = None,
        trigger: Literal["manual", "auto"] = "manual",
        tokens_before: int | None = None,
    ) -> CompactionResult:
        """`Session.compact` on a live session, then a flush: the compaction's events are
        stored in one append (all or nothing) and a projection checkpoint follows."""
        result = self.get(session_id).compact(
            summary,
            start_seq=start_seq,
            end_seq=end_seq,
            trigger=trigger,
            tokens_before=tokens_before,
        )
        await self.checkpoint(session_id, "compaction")
        return result

    async def prune_tool_results(
        self,
        session_id: str,
        *,
        before_seq: int | None = None,
        keep_last: int = 3,
        placeholder: str = DEFAULT_PLACEHOLDER,
    ) -> PruneResult:
        """`Session.prune_tool_results` on a live session, then a flush (one append)."""
        result = self.get(session_id).prune_tool_results(
            before_seq=before_seq, keep_last=keep_last, placeholder=placeholder
        )
        await self.checkpoint(session_id, "compaction")
        return result

    async def close(self, session_id: str) -> None:
        """Flush and stop owning a live session (its lease is given back)."""
        await self.flush(session_id)
        live = self._live.pop(session_id)
        await self._give_back(live.lease)

    async def discard(self, session_id: str) -> Path | None:
        """Stop owning a live session without storing its queued events, e.g. after
        `LeaseLostError`. The unstored events are written to a recovery file, whose path is
        returned (None when nothing was queued)."""
        live = self._live.get(session_id)
        if live is None:
            raise SessionNotFoundError(session_id, "not live in this service")
        async with live.lock:
            await live.settled()
            del self._live[session_id]
            path = live.save_unstored(self.recovery_dir)
        if live.lost is None:
            await self._give_back(live.lease)
        return path

    async def aclose(self) -> None:
        """Store every live session, then close the store.

        A transient failure (busy or unreachable database) is retried with backoff until
        ``close_timeout`` seconds have passed since the call. What still cannot be stored then
        (or at once, for a lost lease or a seq conflict) is written to a recovery file, and
        one `EventsNotStoredError` per such session is raised afterwards, together in an
        `ExceptionGroup`. The store is closed only once no event is left queued.
        """
        deadline = time.monotonic() + self.close_timeout
        errors: list[Exception] = []
        try:
            for sid in list(self._live):
                failure = await self._close_until(sid, deadline)
                if failure is not None:
                    live = self._live.pop(sid)
                    path = live.save_unstored(self.recovery_dir)
                    if path is None:  # nothing was queued: only giving the lease back failed
                        continue
                    count = live.session.next_seq - live.flushed
                    errors.append(EventsNotStoredError(sid, count, str(path), failure))
        finally:
            timers, self._flusher, self._renewer = (self._flusher, self._renewer), None, None
            for timer in timers:
                await stop_timer(timer)
            await self.store.aclose()
        if errors:
            raise ExceptionGroup("some live sessions could not be stored", errors)

    async def _close_until(self, session_id: str, deadline: float) -> TodoSessionsError | None:
        """`close` one session, retrying transient failures until ``deadline``; the failure
        that remained, or None."""
        pause = _CLOSE_FIRST_PAUSE
        while True:
            try:
                await self.close(session_id)
                return None
            except StoreError as exc:  # StoreBusyError too
                self.last_flush_error = exc
                if time.monotonic() + pause > deadline:
                    return exc
                await asyncio.sleep(pause)
                pause = min(pause * 2, _CLOSE_MAX_PAUSE)
            except TodoSessionsError as exc:  # lease lost, seq conflict, deleted: final
                self.last_flush_error = exc
                return exc
