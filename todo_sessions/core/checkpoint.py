"""Projection checkpoints: the state a live session needs, as of one point of its log.

A checkpoint at ``seq`` S holds what folding events ``0..S-1`` gives (docs/design.md,
"Checkpoints"): the surface (its nodes' events in surface order, and the replacements applied,
so the derived messages are rebuilt exactly as the fold builds them), the turn/step structure
state with the open turn's tool calls (what crash repair needs), the latest todo list and
whether it is still the standing plan, and the time of event S-1. It is derived data: the log
stays the only truth, and folding the events from S on gives the same state as folding the
whole log. Pure: no I/O.

The text is two lines of canonical JSON: a head (a ``format`` number and everything but the
surface nodes, with the length and BLAKE2 digest of the nodes' text) and the nodes' array. A
reader decodes the head and checks the digest; the nodes are decoded when the messages are
first needed, so resuming does not grow with the conversation. A reader that meets an unknown
format, text that does not decode, or nodes that do not match their digest raises
`CheckpointError`, and the caller falls back to an older checkpoint or to the fold.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import CheckpointError, InvalidEventError
from .catalog import validate_event
from .envelope import SessionEvent
from .jsonvalue import LosslessJSONError, canonical_json, decode_json
from .structure import StructureChecker
from .surface import SurfaceState
from .todos import TodoItem, todos_from_payload
from .types import TODO_WRITE, TURN_START

__all__ = ["CHECKPOINT_FORMAT", "CheckpointError", "LiveState"]

CHECKPOINT_FORMAT = 2
"""The format of checkpoint text this version writes and reads. Older ones (format 1 kept the
nodes inside the one JSON document) are obsolete: `CheckpointError` with ``obsolete=True``."""


def fingerprint(event: SessionEvent) -> str:
    """A short digest of an event's wire text."""
    return hashlib.blake2b(event.to_json().encode(), digest_size=12).hexdigest()


@dataclass(slots=True)
class LiveState:
    """Everything a live session keeps, folded up to (not including) ``next_seq``."""

    surface: SurfaceState
    structure: StructureChecker
    todos: list[TodoItem] | None = None
    standing: bool = False
    last_time: int | None = None
    last_fingerprint: str | None = None
    """Read from a checkpoint: the `fingerprint` of the event at ``next_seq - 1`` (until the
    reader checks it against that row; see `matches`)."""
    last_event: SessionEvent | None = None
    """The event at ``next_seq - 1``: a checkpoint names it (`fingerprint`) so that a reader
    can tell a checkpoint of another log of the same length, by reading that one row."""

    @classmethod
    def empty(cls, *, messages: bool = True) -> LiveState:
        """The state before seq 0; ``messages=False``: the surface keeps its order only and
        builds no messages (for a reader that never asks for them)."""
        return cls(SurfaceState(build_messages=messages), StructureChecker())

    @property
    def next_seq(self) -> int:
        return self.structure.next_seq

    def apply(self, event: SessionEvent, *, check_structure: bool = False) -> None:
        """Fold one more event (validated; in strict mode structure-checked). Raises and
        changes nothing when the event is refused."""
        if event.seq != self.next_seq:
            raise InvalidEventError(
                f"event {event.type!r} has seq {event.seq}, expected {self.next_seq}",
                event_type=event.type,
                seq=event.seq,
                field="seq",
            )
        validate_event(event)
        if check_structure:
            self.structure.check(event)
        todos = todos_from_payload(event.data, seq=event.seq) if event.type == TODO_WRITE else None
        self.surface.apply(event)  # validates first; changes nothing if it raises
        self._advance(event, todos)

    def advance(self, event: SessionEvent) -> None:
        """Fold one more event of a stored log without checking it (it was checked when it
        was appended), leniently: never raises. What the event cannot change is left as it
        was: a surface op the surface cannot take (from a writer that did not check the
        surface rules), a ``todo/write`` list that is not one."""
        todos = None
        if event.type == TODO_WRITE:
            with contextlib.suppress(InvalidEventError):  # not a list: the plan stays
                todos = todos_from_payload(event.payload, seq=event.seq)
        if event.surface_op is not None or event.source_event_seqs is not None:
            with contextlib.suppress(InvalidEventError):  # an op it cannot take: it stays
                self.surface.apply(event)
        self._advance(event, todos)

    def _advance(self, event: SessionEvent, todos: list[TodoItem] | None) -> None:
        self.structure.advance(event)
        self.last_time = event.time
        self.last_event = event
        if todos is not None:
            self.todos = todos
            self.standing = True
        elif event.type == TURN_START:
            self.standing = False

    def copy(self) -> LiveState:
        """An independent copy (what a trial fold of several events applies to: see
        `Session.compact`)."""
        copied = LiveState(
            self.surface.copy(),
            StructureChecker.restore(self.structure.export()),
            None if self.todos is None else list(self.todos),
            self.standing,
            self.last_time,
        )
        copied.last_fingerprint = self.last_fingerprint
        copied.last_event = self.last_event
        return copied

    def matches(self, previous: SessionEvent | None) -> bool:
        """Whether a decoded checkpoint belongs to the log whose event at ``next_seq - 1`` is
        ``previous``; once it does, the state continues from that event."""
        if previous is None or self.last_fingerprint != fingerprint(previous):
            return False
        self.last_event = previous
        return True

    def apply_all(self, events: Iterable[SessionEvent], *, check_structure: bool = False) -> None:
        for event in events:
            self.apply(event, check_structure=check_structure)

    # -- checkpoint text ------------------------------------------------------------------------

    def encode(self) -> str:
        """The checkpoint text of this state: a line of canonical JSON (everything but the
        surface nodes, and the digest of their text), a newline, and the nodes' JSON array
        (`SurfaceState.export_nodes`). The nodes are the bulk of a long conversation; a reader
        decodes them only when it needs the messages, and the digest vouches for them until
        then."""
        nodes = self.surface.export_nodes()
        head = canonical_json(
            {
                "format": CHECKPOINT_FORMAT,
                "nextSeq": self.next_seq,
                "lastTime": self.last_time,
                "lastEvent": self.last_fingerprint
                if self.last_event is None
                else fingerprint(self.last_event),
                "surface": self.surface.export(),
                "nodes": _digest(nodes),
                "structure": self.structure.export(),
                "todos": None
                if self.todos is None
                else [{"content": t.content, "status": t.status} for t in self.todos],
                "standing": self.standing,
            }
        )
        return head + "\n" + nodes

    @classmethod
    def decode(cls, text: str, *, seq: int) -> LiveState:
        """The state of a checkpoint stored at ``seq``; `CheckpointError` when it cannot be
        used (an unknown format, text that does not decode, nodes that do not match their
        digest, or a state for another seq). Costs the head and a digest of the nodes' text,
        not their decoding (see `SurfaceState.restore`)."""
        head, newline, nodes = text.partition("\n")
        try:
            state = decode_json(head)
        except (LosslessJSONError, ValueError) as exc:
            raise CheckpointError(f"checkpoint at seq {seq} is not JSON ({exc})") from None
        if not isinstance(state, dict):
            raise CheckpointError(f"checkpoint at seq {seq} is not a JSON object")
        version = state.get("format")
        if version != CHECKPOINT_FORMAT or type(version) is not int:
            raise CheckpointError(
                f"checkpoint at seq {seq} has format {version!r}; this version reads "
                f"format {CHECKPOINT_FORMAT}",
                obsolete=type(version) is int and version in range(1, CHECKPOINT_FORMAT),
            )
        if not newline or state.get("nodes") != _digest(nodes):
            raise CheckpointError(
                f"checkpoint at seq {seq} is damaged: its surface nodes do not match their digest"
            )
        try:
            live = cls(
                SurfaceState.restore(state["surface"], nodes),
                StructureChecker.restore(state["structure"]),
                None
                if state["todos"] is None
                else todos_from_payload({"todos": state["todos"]}, seq=seq),
                state["standing"],
                state["lastTime"],
            )
            live.last_fingerprint = state["lastEvent"]
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"checkpoint at seq {seq} is damaged: {exc}") from None
        if live.next_seq != seq or state.get("nextSeq") != seq:
            raise CheckpointError(f"checkpoint at seq {seq} holds the state at {live.next_seq}")
        if type(live.standing) is not bool or not (
            live.last_time is None or type(live.last_time) is int
        ):
            raise CheckpointError(f"checkpoint at seq {seq} is damaged: bad standing/lastTime")
        return live


def _digest(nodes: str) -> str:
    """What a checkpoint's head holds for its nodes' text: length and BLAKE2 digest."""
    return f"{len(nodes)}:{hashlib.blake2b(nodes.encode(), digest_size=16).hexdigest()}"


def fold(events: Iterable[SessionEvent]) -> LiveState:
    """The live state of a whole log (what a checkpoint at its end holds)."""
    state = LiveState.empty()
    state.apply_all(events)
    return state
