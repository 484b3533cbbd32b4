"""Checkpoints, resuming, crash repair (inspect, load) and fork: what reads the log to write
after it (a part of `SessionStore`)."""

from __future__ import annotations

import uuid

from ..core.checkpoint import LiveState
from ..core.envelope import SessionEvent
from ..core.header import SessionHeader, check_session_id
from ..core.repair import closers_for, interrupted_turn_closers
from ..core.structure import StructureChecker
from ..core.types import SESSION_END_SEED
from ..errors import StructureError
from .base import StoreCore
from .checkpoints import CheckpointWrite
from .codec import header_from_row
from .leases import Lease
from .reading import Reading
from .records import CheckpointText
from .results import CheckpointInfo, ResumedState, StoredLog
from .retry import retry_on_conflict
from .writing import Writing

__all__ = ["Repair"]


class Repair:
    """Checkpoints, `resume_state`, `inspect`, `load` and `fork` of `SessionStore`
    (documented there)."""

    def __init__(self, core: StoreCore, reading: Reading, writing: Writing) -> None:
        self._reading, self._writing = reading, writing
        # the core's members these use
        self._call, self._clock, self._token = core.call, core.clock, core.token
        self._skipped, self._check_writable = core.skipped, core.check_writable

    async def write_checkpoint(self, session_id: str, state: LiveState, *, keep: int = 4) -> bool:
        check_session_id(session_id)
        self._check_writable(f"checkpoint session {session_id!r}")
        if type(keep) is not int or keep < 1:
            raise ValueError(f"keep must be an int >= 1, got {keep!r}")
        if state.next_seq < 1:
            return False
        seq, text = state.next_seq, state.encode()  # together: the state may grow meanwhile
        checkpoint = CheckpointWrite(session_id, seq, text, self._clock(), keep)
        return await self._call(
            f"writing a checkpoint of session {session_id!r}",
            lambda r: r.write_checkpoint(checkpoint),
        )

    async def checkpoints(self, session_id: str) -> list[CheckpointInfo]:
        check_session_id(session_id)
        found = await self._call(
            f"reading checkpoints of session {session_id!r}",
            lambda r: r.read_checkpoints(session_id),
        )
        return [CheckpointInfo(*row) for row in found]

    async def checkpoint_texts(self, session_id: str) -> list[CheckpointText]:
        check_session_id(session_id)
        return await self._call(
            f"reading checkpoints of session {session_id!r}",
            lambda r: r.read_checkpoint_texts(session_id),
        )

    async def delete_checkpoints(self, session_id: str) -> int:
        check_session_id(session_id)
        self._check_writable(f"delete checkpoints of session {session_id!r}")
        return await self._call(
            f"deleting checkpoints of session {session_id!r}",
            lambda r: r.delete_checkpoints(session_id),
        )

    async def resume_state(
        self, session_id: str, *, repair: bool = True, lease: Lease | None = None
    ) -> ResumedState:
        check_session_id(session_id)

        async def attempt() -> ResumedState:
            found = await self._call(
                f"resuming session {session_id!r}", lambda r: r.read_live_state(session_id)
            )
            self._skipped(session_id, found.skipped)
            state, row = found.state, found.row
            closers: list[SessionEvent] = []
            if repair and state.last_time is not None:
                closers = closers_for(
                    state.structure, last_time=state.last_time, session_id=session_id
                )
            revision = self._token(row.incarnation, row.revision)
            if closers:
                revision = await self._writing.append(session_id, closers, lease=lease)
                state.apply_all(closers)
            return ResumedState(
                header_from_row(row), state, revision, tuple(closers), found.from_checkpoint
            )

        return await retry_on_conflict(session_id, "resume", attempt)

    async def inspect(self, session_id: str) -> StoredLog:
        log = await self._reading.read(session_id)
        closers = interrupted_turn_closers(log.events, session_id=session_id)
        return StoredLog(log.header, log.events + tuple(closers), log.revision, tuple(closers))

    async def load(self, session_id: str) -> StoredLog:

        async def attempt() -> StoredLog:
            log = await self._reading.read(session_id)
            closers = interrupted_turn_closers(log.events, session_id=session_id)
            if not closers:
                return log
            revision = await self._writing.append(session_id, closers)
            return StoredLog(log.header, log.events + tuple(closers), revision, tuple(closers))

        return await retry_on_conflict(session_id, "load", attempt)

    async def fork(
        self,
        source_id: str,
        boundary: int | None = None,
        child_id: str | None = None,
        *,
        title: str | None = None,
    ) -> StoredLog:
        log = await self._reading.read(source_id)
        end = len(log.events) - 1 if boundary is None else boundary
        if type(end) is not int or not 0 <= end < len(log.events):
            raise ValueError(
                f"fork boundary {boundary!r} is outside session {source_id!r} "
                f"(seqs 0..{len(log.events) - 1})"
            )
        prefix = log.events[: end + 1]
        state = StructureChecker()
        for event in prefix:
            state.advance(event)
        if state.open_turn is not None:
            raise StructureError(
                f"cannot fork session {source_id!r} at seq {end}: turn {state.open_turn} "
                "is still open there",
                seq=end,
                rule="fork-inside-turn",
            )
        source = log.header
        header = SessionHeader(
            id=child_id or f"{source_id[:150]}-fork-{uuid.uuid4().hex[:12]}",
            created_at=self._clock(),
            cwd=source.cwd,
            parent_session=source_id,
            seed_length=len(prefix),
            origin=source.origin,
            delegation_depth=source.delegation_depth,
            title=title if title is not None else source.title,
        )
        seed = SessionEvent(SESSION_END_SEED, len(prefix), prefix[-1].time, {})
        await self._writing.create(header)
        revision = await self._writing.append(header.id, [*prefix, seed])
        return StoredLog(header, (*prefix, seed), revision)
