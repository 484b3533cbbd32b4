"""Values the store hands back. Plain frozen data: no rows, connections or sessions leak out."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.checkpoint import LiveState
from ..core.envelope import SessionEvent
from ..core.header import SessionHeader

__all__ = ["CheckpointInfo", "ResumedState", "SessionSummary", "StoredLog", "revision_token"]


def revision_token(store_id: str, incarnation: str, revision: int) -> str:
    """``"{store_id}:{incarnation}:{revision}"``: equal tokens mean nothing changed."""
    return f"{store_id}:{incarnation}:{revision}"


@dataclass(frozen=True, slots=True)
class StoredLog:
    """A session's header, its events (``events[i].seq == i`` when read whole) and revision.

    From `SessionStore.inspect` / `SessionStore.load`, ``events`` ends with the ``closers`` of
    an interrupted turn (held in memory by ``inspect``, stored by ``load``).
    """

    header: SessionHeader
    events: tuple[SessionEvent, ...]
    revision: str
    closers: tuple[SessionEvent, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One entry of `SessionStore.list`. Pass it as ``before=`` to get the next page."""

    id: str
    created_at: int
    updated_at: int
    cwd: str | None
    title: str | None
    next_seq: int
    revision: str


@dataclass(frozen=True, slots=True)
class ResumedState:
    """From `SessionStore.resume_state`: what a live session needs to go on, without the log.

    ``state`` is folded to the end of the stored log (after any ``closers`` of an interrupted
    turn, which were stored); ``from_checkpoint`` is the seq of the checkpoint it started from
    (None: folded from the start).
    """

    header: SessionHeader
    state: LiveState
    revision: str
    closers: tuple[SessionEvent, ...]
    from_checkpoint: int | None


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """One stored checkpoint of a session (`SessionStore.checkpoints`)."""

    seq: int
    format_version: int
    created_at: int
    size: int
