"""Values the store hands back. Plain frozen data: no rows, connections or sessions leak out."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.envelope import SessionEvent
from ..core.header import SessionHeader

__all__ = ["SessionSummary", "StoredLog", "revision_token"]


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
