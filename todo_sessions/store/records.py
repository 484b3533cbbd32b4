"""The typed rows the recorder's reads return (`recorder.Recorder`): named tuples, built from
a driver's row in one C call, read by name."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..core.envelope import SessionEvent

__all__ = [
    "ChainRow",
    "CheckpointInfo",
    "CheckpointText",
    "EventsRead",
    "SessionRow",
    "SummaryRow",
    "UsagePayload",
]


class SessionRow(NamedTuple):
    """A row of ``sessions``: the header, and where the log stands."""

    id: str
    format_version: int
    created_at: int
    cwd: str
    parent_session: str | None
    seed_length: int | None
    origin: str | None
    delegation_depth: int
    title: str | None
    incarnation: str
    revision: int
    next_seq: int
    updated_at: int


class SummaryRow(NamedTuple):
    """The columns of a `results.SessionSummary` (``tags`` and ``metadata`` as stored JSON
    text)."""

    id: str
    created_at: int
    updated_at: int
    cwd: str
    title: str | None
    next_seq: int
    incarnation: str
    revision: int
    parent_session: str | None
    tags: str | None
    metadata: str | None
    open_todos: Any


class ChainRow(NamedTuple):
    """An event as stored, undecoded (what `core.chain.event_text` hashes), and its chain
    value as hex (None: written outside todo_sessions)."""

    seq: int
    type: str
    time: int
    data: str
    surface_op: str | None
    source_event_seqs: str | None
    ignorable: Any
    chain: str | None


class CheckpointInfo(NamedTuple):
    """One stored checkpoint, without its state."""

    seq: int
    format_version: int
    created_at: int
    size: int


class CheckpointText(NamedTuple):
    seq: int
    text: str


class UsagePayload(NamedTuple):
    """The decoded data of one ``assistant/message``."""

    seq: int
    data: Any


class EventsRead(NamedTuple):
    """A session's row and a run of its events, read in one snapshot."""

    session: SessionRow
    events: list[SessionEvent]
