"""Projections and repair on top of the stored log (SPEC §6, §8): the part of `SessionStore`
that reads to answer a question rather than to hand back rows.

- `current_todos` finds the latest ``todo/write`` through the ``(session_id, type, seq)`` index:
  one row read, whatever the session's length.
- `derive_messages` reads only surface rows (partial index on ``surface_op IS NOT NULL``).
- `inspect` / `load` compute the closers of an interrupted turn; ``load`` appends them.
- `fork` seeds a new session with a prefix of another.

Both projections take ``upto_seq`` to answer "what did the model see at seq N".
"""

from __future__ import annotations

import time
import uuid
from abc import abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ..core.envelope import SessionEvent
from ..core.header import SessionHeader
from ..core.messages import Message
from ..core.repair import interrupted_turn_closers
from ..core.structure import StructureChecker
from ..core.surface import derive_messages
from ..core.todos import TodoItem
from ..errors import CorruptSessionError, InvalidEventError, SeqConflictError, StructureError
from . import reads
from .gcpause import paused_gc
from .results import StoredLog

__all__ = ["LogViews"]

T = TypeVar("T")

_LOAD_ATTEMPTS = 5


def _check_upto(upto_seq: int | None) -> None:
    if upto_seq is not None and (type(upto_seq) is not int or upto_seq < 0):
        raise ValueError(f"upto_seq must be a non-negative int, got {upto_seq!r}")


class LogViews:
    """Mixed into `SessionStore`; relies on its connection and read helpers."""

    @abstractmethod
    async def _read(self, what: str, op: Callable[..., T], *args: Any) -> T: ...

    @abstractmethod
    def _token(self, incarnation: str, revision: int) -> str: ...

    @abstractmethod
    async def read(self, session_id: str) -> StoredLog: ...

    @abstractmethod
    async def append(self, session_id: str, events: Iterable[Any]) -> str: ...

    @abstractmethod
    async def create(self, header: SessionHeader) -> None: ...

    # -- projections ----------------------------------------------------------------------------

    async def current_todos(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> list[TodoItem] | None:
        """The todo list of the latest ``todo/write`` (as of ``upto_seq``), or None."""
        _check_upto(upto_seq)
        return await self._read(
            f"reading todos of session {session_id!r}", reads.latest_todos, session_id, upto_seq
        )

    async def derive_messages(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> list[Message]:
        """The model's message history, read from surface rows only (as of ``upto_seq``)."""
        _check_upto(upto_seq)
        events = await self._read(
            f"reading messages of session {session_id!r}",
            reads.surface_events,
            session_id,
            upto_seq,
        )
        with paused_gc():
            try:
                return derive_messages(events)
            except InvalidEventError as exc:  # stored rows that break the surface rules
                raise CorruptSessionError(session_id, exc.seq, str(exc)) from None

    # -- crash repair ---------------------------------------------------------------------------

    async def inspect(self, session_id: str) -> StoredLog:
        """The stored log plus, in memory only, the closers of an interrupted last turn.

        ``events`` includes the closers; ``closers`` lists them. Nothing is written.
        """
        log = await self.read(session_id)
        closers = interrupted_turn_closers(log.events, session_id=session_id)
        return StoredLog(log.header, log.events + tuple(closers), log.revision, tuple(closers))

    async def load(self, session_id: str) -> StoredLog:
        """Like `inspect`, but the closers are appended durably first (the revision changes
        once). Loading a log with no open turn writes nothing."""
        for _ in range(_LOAD_ATTEMPTS):
            log = await self.read(session_id)
            closers = interrupted_turn_closers(log.events, session_id=session_id)
            if not closers:
                return log
            try:
                revision = await self.append(session_id, closers)
            except SeqConflictError:
                continue  # another writer appended meanwhile: look again
            return StoredLog(log.header, log.events + tuple(closers), revision, tuple(closers))
        raise SeqConflictError(
            session_id, -1, None, detail=f"load kept racing other writers ({_LOAD_ATTEMPTS} tries)"
        )

    # -- fork -----------------------------------------------------------------------------------

    async def fork(
        self,
        source_id: str,
        boundary: int | None = None,
        child_id: str | None = None,
        *,
        title: str | None = None,
    ) -> StoredLog:
        """A new session seeded with events ``0..boundary`` (default: all) of ``source_id``,
        followed by ``session/end-seed``. The prefix may not end inside an open turn."""
        log = await self.read(source_id)
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
            created_at=time.time_ns() // 1_000_000,
            cwd=source.cwd,
            parent_session=source_id,
            seed_length=len(prefix),
            origin=source.origin,
            delegation_depth=source.delegation_depth,
            title=title if title is not None else source.title,
        )
        seed = SessionEvent("session/end-seed", len(prefix), prefix[-1].time, {})
        await self.create(header)
        revision = await self.append(header.id, [*prefix, seed])
        return StoredLog(header, (*prefix, seed), revision)
