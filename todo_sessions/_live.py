"""One live session of a `SessionService` (`todo_sessions._service`): its queued events, their
write to the store, and the recovery file of what could not be stored.

The session's events below ``flushed`` are stored; the rest are queued. `LiveEntry.write`
appends queued events (shielded: a cancelled flush never loses track of a write, whose outcome
`start` records whoever still awaits it; any thread's loop may wait for it), and
`LiveEntry.save_unstored` writes what is still queued to a recovery file
(`todo_sessions._recovery`) when the service gives the session up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import Future
from pathlib import Path

from ._recovery import default_recovery_dir, write_recovery_file
from ._session import Session
from .core.envelope import SessionEvent
from .errors import LeaseLostError, SeqConflictError
from .store.leases import Lease
from .store.loops import AnyLoopLock
from .store.store import SessionStore

__all__ = ["LiveEntry", "stop_timer", "timer_ended"]

logger = logging.getLogger("todo_sessions.service")


class LiveEntry:
    """A live session as its service keeps it (see the module docstring)."""

    __slots__ = ("checkpointed", "flushed", "inflight", "lease", "lock", "lost", "session")

    def __init__(self, session: Session, flushed: int, lease: Lease | None) -> None:
        self.session = session
        self.flushed = flushed
        """The session's events below this seq are stored."""
        self.checkpointed = flushed
        """The seq of the newest projection checkpoint written (or of the start)."""
        self.lock = AnyLoopLock()  # flushes may come from any thread and event loop
        self.inflight: Future[None] | None = None
        """Settled when the store append under way ends (thread-safe: any loop waits on it)."""
        self.lease = lease
        self.lost: LeaseLostError | None = None

    def start(self, write: asyncio.Future[str], count: int) -> None:
        """Track a store append (it may outlive a cancelled flush): its outcome is recorded
        when it ends, whoever still awaits it."""
        ended: Future[None] = Future()
        ended.set_running_or_notify_cancel()
        self.inflight = ended

        def settle(write: asyncio.Future[str]) -> None:
            if not write.cancelled() and write.exception() is None:
                self.flushed += count
            if self.inflight is ended:
                self.inflight = None
            ended.set_result(None)

        write.add_done_callback(settle)

    async def settled(self) -> None:
        """Wait (on any loop) for the store append under way, if any, to end."""
        if self.inflight is not None:
            await asyncio.shield(asyncio.wrap_future(self.inflight))

    async def write(self, store: SessionStore, events: list[SessionEvent]) -> None:
        """Append ``events`` (the queued ones) under the lease; raises what the store raised.

        A `SeqConflictError` is no conflict when an earlier flush committed these very events
        although its answer never came (the connection died and the store could not read the
        outcome back): what is stored already counts as flushed and the rest is appended."""
        sid = self.session.id
        write = asyncio.ensure_future(store.append(sid, events, lease=self.lease))
        self.start(write, len(events))
        try:
            await asyncio.shield(write)
        except SeqConflictError:
            ours = await _stored_already(store, sid, events)
            if not ours:
                raise
            self.flushed += ours
            if ours < len(events):
                rest = events[ours:]
                await store.append(sid, rest, lease=self.lease)
                self.flushed += len(rest)

    def save_unstored(self, recovery_dir: Path | None) -> Path | None:
        """Write the queued events to a recovery file in ``recovery_dir`` (None: the default
        directory) and return its path (None: nothing was queued)."""
        events = self.session.events_from(self.flushed)
        if not events:
            return None
        directory = recovery_dir or default_recovery_dir()
        path = write_recovery_file(directory, self.session.header, events)
        logger.warning(
            "session %r: %d unstored event(s) (seq %d-%d) written to the recovery file %s",
            self.session.id,
            len(events),
            events[0].seq,
            events[-1].seq,
            path,
        )
        return path


async def _stored_already(store: SessionStore, session_id: str, events: list[SessionEvent]) -> int:
    """How many of ``events`` are stored, exactly, where they belong; 0 when the stored log
    holds anything else there (a real conflict)."""
    stored = await store.read_from(session_id, events[0].seq, limit=len(events))
    if not stored or [e.to_json() for e in stored] != [e.to_json() for e in events[: len(stored)]]:
        return 0
    return len(stored)


def timer_ended(timer: asyncio.Task[None] | None) -> bool:
    """Whether a timer task needs starting (again): none yet, done, or on a loop that is closed
    (a service may be used from several threads and loops; the timer runs on one of them)."""
    return timer is None or timer.done() or timer.get_loop().is_closed()


async def stop_timer(timer: asyncio.Task[None] | None) -> None:
    """Cancel a timer task: on this loop, and wait for it; on another, on that loop."""
    if timer is None or timer.done():
        return
    loop = timer.get_loop()
    if loop is not asyncio.get_running_loop():
        with contextlib.suppress(RuntimeError):  # that loop is closed: the timer never runs
            loop.call_soon_threadsafe(timer.cancel)
        return
    timer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await timer
