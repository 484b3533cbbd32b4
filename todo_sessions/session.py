"""`Session`: a live, in-memory session log bound to a header (docs/design.md, "Live sessions").

``append`` assigns seq and time, validates (payload, surface rules, and in strict mode the
turn/step structure), commits to memory, then notifies subscribers. A failing subscriber is
logged and never un-commits; appending from inside a subscriber is refused, so every
subscriber sees events in log order. ``derive_messages()`` and ``todos`` are maintained
incrementally (O(1) amortised per append). Persistence is the service's job, not this class's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .core.catalog import EVENT_TYPES, validate_event
from .core.envelope import SessionEvent, SurfaceOp
from .core.header import SessionHeader
from .core.structure import OpenCall, StructureChecker
from .core.surface import MessageSnapshot, SurfaceState
from .core.todos import TodoItem, todos_from_payload
from .errors import InvalidEventError

__all__ = ["Session", "Subscriber", "wall_clock_ms"]

logger = logging.getLogger("todo_sessions.session")

Subscriber = Callable[[SessionEvent], object]


class _EventsView(Sequence[SessionEvent]):
    __slots__ = ("_events",)

    def __init__(self, events: list[SessionEvent]) -> None:
        self._events = events

    def __len__(self) -> int:
        return len(self._events)

    def __getitem__(self, index: Any) -> Any:
        item = self._events[index]
        return tuple(item) if isinstance(index, slice) else item

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self._events) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"<{len(self._events)} events>"


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Session:
    """A live session: the log so far plus incrementally maintained projections.

    ``Session(header, events=(), *, strict=False, clock=wall_clock_ms)``: ``events`` is the
    already-stored log (for resume); it is checked the same way as new appends.
    """

    def __init__(
        self,
        header: SessionHeader,
        events: Iterable[SessionEvent] = (),
        *,
        strict: bool = False,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.header = header
        self.strict = strict
        self._clock = clock
        self._events: list[SessionEvent] = []
        self._surface = SurfaceState()
        self._structure = StructureChecker()
        self._todos: list[TodoItem] | None = None
        self._standing = False
        self._subscribers: list[Subscriber] = []
        self._notifying = False
        for event in events:
            self._commit(event, check_structure=strict)

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def events(self) -> Sequence[SessionEvent]:
        """The log so far: a live read-only view (no copy; events are immutable)."""
        return _EventsView(self._events)

    @property
    def next_seq(self) -> int:
        return len(self._events)

    @property
    def todos(self) -> list[TodoItem] | None:
        """The current todo list (latest ``todo/write``), or None before any write."""
        return None if self._todos is None else list(self._todos)

    @property
    def standing_plan(self) -> list[TodoItem] | None:
        """The todo list a UI shows: None once a later ``turn/start`` begins a new turn."""
        return self.todos if self._standing else None

    @property
    def open_turn(self) -> int | None:
        return self._structure.open_turn

    @property
    def open_step(self) -> int | None:
        return self._structure.open_step

    def unanswered_calls(self) -> tuple[OpenCall, ...]:
        """Tool calls of the open turn that have no result yet, in call order."""
        return self._structure.unanswered_calls()

    def derive_messages(self) -> MessageSnapshot:
        """The model's message history (surface events only), as an immutable snapshot.

        O(1): the session keeps the messages as events are appended; the snapshot is a
        `Sequence` that later appends never change (``list(...)`` gives a plain list).
        """
        return self._surface.snapshot()

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(event)`` after each committed append; returns an unsubscribe."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | Mapping[str, Any] | None = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> SessionEvent:
        """Validate and commit one event; returns it with its seq and time assigned."""
        if self._notifying:
            raise RuntimeError(
                f"session {self.id!r}: append from inside a subscriber is not allowed "
                "(subscribers must see events in log order)"
            )
        event = SessionEvent(
            type,
            len(self._events),
            self._clock(),
            data,
            surface_op=surface_op,
            source_event_seqs=source_event_seqs,
            ignorable=ignorable,
        )
        entry = EVENT_TYPES.get(type)
        if entry is not None and entry.surface and event.surface_op is None:
            raise InvalidEventError(
                f"event {type!r} (seq {event.seq}): a live session needs surfaceOp on "
                "surface events",
                event_type=type,
                seq=event.seq,
                field="surfaceOp",
            )
        self._commit(event, check_structure=self.strict)
        self._notify(event)
        return event

    def _commit(self, event: SessionEvent, *, check_structure: bool) -> None:
        if event.seq != len(self._events):
            raise InvalidEventError(
                f"event {event.type!r} has seq {event.seq}, expected {len(self._events)}",
                event_type=event.type,
                seq=event.seq,
                field="seq",
            )
        validate_event(event)
        if check_structure:
            self._structure.check(event)
        todos = (
            todos_from_payload(event.data, seq=event.seq) if event.type == "todo/write" else None
        )
        self._surface.apply(event)  # validates first; changes nothing if it raises
        self._structure.advance(event)
        self._events.append(event)
        if todos is not None:
            self._todos = todos
            self._standing = True
        elif event.type == "turn/start":
            self._standing = False

    def _notify(self, event: SessionEvent) -> None:
        self._notifying = True
        try:
            for callback in list(self._subscribers):
                try:
                    callback(event)
                except Exception:
                    logger.exception(
                        "session %r: subscriber %r failed on seq %d (the event stays committed)",
                        self.id,
                        callback,
                        event.seq,
                    )
        finally:
            self._notifying = False

    def __repr__(self) -> str:
        return f"Session({self.id!r}, events={len(self._events)}, strict={self.strict})"
