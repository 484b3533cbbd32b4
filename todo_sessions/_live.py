"""One live session of a `SessionService` (`todo_sessions.service`): its queued events, their
write to the store, and the recovery file of what could not be stored.

The session's events below ``flushed`` are stored; the rest are queued. `LiveEntry.write`
appends queued events (shielded: a cancelled flush never loses track of a write, whose outcome
`settle` records whoever still awaits it), and `LiveEntry.save_unstored` writes what is still
queued to a recovery file (`todo_sessions.recovery`) when the service gives the session up.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from pathlib import Path

from .core.envelope import SessionEvent
from .errors import LeaseLostError, SeqConflictError
from .recovery import default_recovery_dir, write_recovery_file
from .session import Session
from .store.leases import Lease
from .store.store import SessionStore

__all__ = ["LiveEntry"]

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
        self.lock = asyncio.Lock()
        self.inflight: asyncio.Future[str] | None = None
        self.lease = lease
        self.lost: LeaseLostError | None = None

    def settle(self, write: asyncio.Future[str], count: int) -> None:
        """Record a finished store append (it may outlive a cancelled flush)."""
        if self.inflight is write:
            self.inflight = None
        if not write.cancelled() and write.exception() is None:
            self.flushed += count

    async def write(self, store: SessionStore, events: list[SessionEvent]) -> None:
        """Append ``events`` (the queued ones) under the lease; raises what the store raised.

        A `SeqConflictError` is no conflict when an earlier flush committed these very events
        although its answer never came (the connection died and the store could not read the
        outcome back): what is stored already counts as flushed and the rest is appended."""
        sid = self.session.id
        write = asyncio.ensure_future(store.append(sid, events, lease=self.lease))
        self.inflight = write
        write.add_done_callback(functools.partial(self.settle, count=len(events)))
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
