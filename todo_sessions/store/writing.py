"""Writing a session: create, the validated append, delete (a part of `SessionStore`)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

from .._vocabularies import known
from ..core.catalog import FORMAT_VERSION, validate_event
from ..core.envelope import SessionEvent
from ..core.header import SessionHeader, check_session_id
from ..core.meta import PROJECTED_TYPES, batch_change
from ..core.structure import StructureChecker
from ..errors import (
    CorruptSessionError,
    InvalidEventError,
    SeqConflictError,
    SessionExistsError,
    SessionNotFoundError,
)
from .backends import BackendRecorder
from .base import StoreCore
from .batch import AppendBatch, projection_of
from .codec import event_row, header_row
from .keying import check_append_key, remember
from .leases import Lease
from .reading import Reading
from .translate import is_unique_violation, raise_translated, translate_errors

__all__ = ["EventInput", "Writing"]

EventInput = SessionEvent | Mapping[str, Any]


def _append_failed(exc: Exception, session_id: str, first: int) -> NoReturn:
    """Raise what a failed append's error means (`translate.raise_translated`)."""
    # The seq was checked against the next seq read under the write lock, so a row already at
    # one of the batch's seqs lies past the session's stored end: it was put there outside
    # todo_sessions.
    if is_unique_violation(exc):
        raise CorruptSessionError(
            session_id,
            first,
            f"a stored row at seq {first} or later lies past the session's stored end; it "
            "was written outside todo_sessions (run `todo-sessions verify`)",
        ) from exc
    raise_translated(exc, f"appending to session {session_id!r}")


class Writing:
    """The write operations of `SessionStore` (leases and checkpoints aside; documented
    there)."""

    def __init__(self, core: StoreCore, reading: Reading) -> None:
        self._core, self._reading = core, reading
        # the core's members the writes use, bound once (the append reads them per call)
        self.read_only, self.strict, self._clock = core.read_only, core.strict, core.clock
        self._search_index, self._chain_key = core.search_index, core.chain_key
        self._pending, self._checkers = core.pending, core.checkers
        self._ready, self._call, self._token = core.ready, core.call, core.token
        self._check_writable = core.check_writable

    @property
    def _recorder(self) -> BackendRecorder | None:
        """The core's recorder: None until the store is opened."""
        return self._core.recorder

    async def _current_token(self, session_id: str) -> str:
        row = await self._call(
            f"reading session {session_id!r}", lambda r: r.find_session(session_id)
        )
        if row is not None:
            return self._token(row.incarnation, row.revision)
        if session_id in self._pending:
            return self._token("", 0)
        raise SessionNotFoundError(session_id)

    async def create(self, header: SessionHeader) -> None:
        if not isinstance(header, SessionHeader):
            raise TypeError(f"create() takes a SessionHeader, got {type(header).__name__}")
        if header.format_version > FORMAT_VERSION:
            raise InvalidEventError(
                f"session {header.id!r}: format_version {header.format_version} is newer than "
                f"this version writes ({FORMAT_VERSION})",
                field="format_version",
            )
        if header.id in self._pending:
            raise SessionExistsError(header.id)
        found = await self._call(
            f"creating session {header.id!r}", lambda r: r.find_session(header.id)
        )
        if found is not None:
            raise SessionExistsError(header.id)
        self._pending[header.id] = header

    async def append(
        self, session_id: str, events: Iterable[EventInput], *, lease: Lease | None = None
    ) -> str:
        check_session_id(session_id)
        if self.read_only:
            self._check_writable(f"append to session {session_id!r}")
        batch = [e if isinstance(e, SessionEvent) else SessionEvent.from_dict(e) for e in events]
        recorder = self._recorder
        if recorder is None or recorder.loop_bound:
            recorder = await self._ready()  # opens the store; checks a PostgreSQL store's loop
        if not batch:
            return await self._current_token(session_id)
        first = batch[0].seq
        # One pass: contiguity, validation (skipped for events that passed it already, a live
        # session's), the row (its canonical text, which the chain hashes), the projected
        # events (session/meta and todo/write change columns of `sessions`: `core.meta`)
        rows: list[dict[str, Any]] = []
        projected: list[SessionEvent] = []
        for offset, event in enumerate(batch):
            if offset and event.seq != first + offset:
                raise SeqConflictError(
                    session_id,
                    first,
                    None,
                    detail=f"but the batch is not contiguous: seq {event.seq} follows "
                    f"seq {batch[offset - 1].seq}",
                )
            known(event.type)  # an unregistered type: every installed vocabulary loads once
            validate_event(event)
            rows.append(event_row(session_id, event))
            if event.type in PROJECTED_TYPES:
                projected.append(event)
        await check_append_key(self._core, session_id, first)  # a keyed chain needs the key
        checker = await self._strict_checker(session_id, batch) if self.strict else None
        pending = self._pending.get(session_id)
        inherited = pending.seed_length if pending is not None else None
        change = batch_change(projected, inherited_below=inherited) if projected else None
        prepared = AppendBatch(
            session_id,
            rows,
            header_row(pending) if pending is not None else None,
            self._clock(),
            lease,
            None if change is None else projection_of(session_id, change),
            self._search_index,
            self._chain_key,
        )
        try:
            incarnation, revision, _ = await recorder.append(prepared)
        except Exception as exc:
            # Translated on the error path only: a `with translate_errors(...)` block around
            # every append cost about as much as validating its event.
            _append_failed(exc, session_id, first)
        if pending is not None:
            self._pending.pop(session_id, None)
        remember(self._core, session_id, first + len(batch))
        if checker is not None:
            self._checkers[session_id] = checker
        return self._token(incarnation, revision)

    async def _strict_checker(
        self, session_id: str, batch: Sequence[SessionEvent]
    ) -> StructureChecker | None:
        """Strict mode: the structure state after ``batch`` (raises `StructureError`).

        The state at the end of the stored log is cached per session after each append through
        this store; on a miss (first use, or another writer appended) it is rebuilt by reading
        the log once. A batch that does not start at the known next seq is left to the seq
        check, which reports it as a `SeqConflictError`.
        """
        cached = self._checkers.get(session_id)
        if cached is None or cached.next_seq != batch[0].seq:
            cached = StructureChecker()
            if session_id not in self._pending:
                for event in await self._reading.read_from(session_id):
                    cached.advance(event)
        if cached.next_seq != batch[0].seq:
            return None
        checker = copy.deepcopy(cached)
        for event in batch:
            checker.apply(event)
        return checker

    async def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        self._check_writable(f"delete session {session_id!r}")
        recorder = await self._ready()
        pending = self._pending.pop(session_id, None)
        self._checkers.pop(session_id, None)
        with translate_errors(f"deleting session {session_id!r}"):
            deleted = await recorder.delete(session_id)
        if not deleted and pending is None:
            raise SessionNotFoundError(session_id)
