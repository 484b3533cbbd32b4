"""Values the store hands back. Plain frozen data: no rows, connections or sessions leak out.

A value that is shown as JSON has one shape, given by its ``to_dict()`` (camelCase keys, JSON
values only): the command line's ``--json``, the viewer's API and any embedder write that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.checkpoint import LiveState
from ..core.envelope import SessionEvent
from ..core.header import SessionHeader

__all__ = [
    "CheckpointInfo",
    "PruneReport",
    "ResumedState",
    "SearchHit",
    "SessionSummary",
    "SessionUsage",
    "StoredLog",
    "revision_token",
]


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
    """One entry of `SessionStore.list`. Pass it as ``before=`` to get the next page.

    ``title`` is the current title (the header's until a ``session/meta`` sets another);
    ``tags`` and ``metadata`` are the last set by ``session/meta`` (empty: never set);
    ``parent`` is the header's ``parent_session`` (the source of a fork, or the session that
    started a sub-agent); ``open_todos``: the latest ``todo/write`` has an item pending or in
    progress.
    """

    id: str
    created_at: int
    updated_at: int
    cwd: str | None
    title: str | None
    next_seq: int
    revision: str
    parent: str | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)
    open_todos: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this entry (``events``: its ``next_seq``)."""
        return {
            "id": self.id,
            "title": self.title,
            "cwd": self.cwd,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "events": self.next_seq,
            "revision": self.revision,
            "parent": self.parent,
            "tags": list(self.tags),
            "metadata": dict(self.metadata),
            "openTodos": self.open_todos,
        }


@dataclass(frozen=True, slots=True)
class SessionUsage:
    """`SessionStore.usage`: the ``usage`` objects of a session's ``assistant/message`` events
    added up, in all (``total``) and per turn (``turns``, by turn number). Each numeric field
    is summed under its key; nested objects as ``outer.inner`` (e.g.
    ``prompt_tokens_details.cached_tokens``). ``messages`` counts the messages that carried a
    usage object."""

    total: Mapping[str, int | float]
    turns: Mapping[int, Mapping[str, int | float]]
    messages: int


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

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this checkpoint (``bytes``: its ``size``)."""
        return {
            "seq": self.seq,
            "formatVersion": self.format_version,
            "createdAt": self.created_at,
            "bytes": self.size,
        }


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One match of `SessionStore.search`: event ``seq`` (of type ``event_type``) of session
    ``session_id`` (its current ``title``), the indexed ``kind`` of text that matched, and a
    ``snippet`` of it (plain text; ``marks`` are the ``(start, end)`` offsets of the matched
    words in it; escape it before putting it in HTML).

    ``in_history``: whether the event is still in the model's history (on the surface): False
    for one a compaction or a retraction replaced (the log keeps it, so search finds it), None
    for a log-only event (``tool/call``, ``todo/write``, ``compaction/summary``). Pass the
    page's last hit as ``before=`` for the next page (``index_id`` is its place in the index).
    """

    session_id: str
    title: str | None
    seq: int
    kind: str
    event_type: str
    snippet: str
    marks: tuple[tuple[int, int], ...]
    in_history: bool | None
    index_id: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this hit (``type``: its ``event_type``)."""
        return {
            "sessionId": self.session_id,
            "title": self.title,
            "seq": self.seq,
            "kind": self.kind,
            "type": self.event_type,
            "snippet": self.snippet,
            "marks": [list(m) for m in self.marks],
            "inHistory": self.in_history,
            "indexId": self.index_id,
        }


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What `SessionStore.prune` did (or, with ``dry_run``, would do): the sessions selected,
    those archived (each to its file in ``archives``), deleted, skipped because a live lease
    holds them, and the checkpoints deleted."""

    selected: tuple[str, ...]
    archived: Mapping[str, str] = field(default_factory=dict)
    deleted: tuple[str, ...] = ()
    leased: tuple[str, ...] = ()
    checkpoints_deleted: int = 0
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this report (``skipped``: the ``leased`` sessions)."""
        return {
            "dryRun": self.dry_run,
            "selected": list(self.selected),
            "archived": dict(self.archived),
            "deleted": list(self.deleted),
            "skipped": list(self.leased),
            "checkpointsDeleted": self.checkpoints_deleted,
        }
