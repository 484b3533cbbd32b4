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
from typing import Any, Literal

from ._vocabularies import known
from .core.checkpoint import LiveState
from .core.compaction import (
    DEFAULT_PLACEHOLDER,
    CompactionResult,
    PendingEvent,
    PruneResult,
    plan_compaction,
    plan_prune,
)
from .core.envelope import SessionEvent, SurfaceOp
from .core.header import SessionHeader
from .core.structure import OpenCall
from .core.surface import MessageSnapshot
from .core.todos import TodoItem
from .core.types import STEP_END, STEP_START, TURN_END, TURN_START

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
    """A live session: the events it holds plus incrementally maintained projections.

    ``Session(header, events=(), *, strict=False, clock=wall_clock_ms, state=None)``:
    ``events`` is the already-stored log (for resume); it is checked the same way as new
    appends. ``state`` (a `LiveState`, e.g. from `SessionStore.resume_state`) starts the
    session from a folded state instead, without the events behind it; ``events`` then
    continue from ``state.next_seq``.

    `events` is what the session holds: every event given or appended, unless its owner lets
    go of the stored ones (`release_stored`, which `SessionService` calls after each flush so
    a live session's memory does not grow with its log). The projections never need them.
    """

    def __init__(
        self,
        header: SessionHeader,
        events: Iterable[SessionEvent] = (),
        *,
        strict: bool = False,
        clock: Callable[[], int] = wall_clock_ms,
        state: LiveState | None = None,
    ) -> None:
        self.header = header
        self.strict = strict
        self._clock = clock
        self._state = state if state is not None else LiveState.empty()
        self._first = self._state.next_seq
        """The seq of ``_events[0]``."""
        self._events: list[SessionEvent] = []
        self._subscribers: list[Subscriber] = []
        self._notifying = False
        self._step_start: int | None = None
        """The seq of the open step's ``step/start``, when this session has seen it."""
        for event in events:
            self._commit(event, check_structure=strict)

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def events(self) -> Sequence[SessionEvent]:
        """The events this session holds, from `first_held_seq` on: a live read-only view (no
        copy; events are immutable). All of the log unless the owner released stored ones."""
        return _EventsView(self._events)

    @property
    def first_held_seq(self) -> int:
        """The seq of the first event in `events` (0 unless started from a state or released)."""
        return self._first

    @property
    def next_seq(self) -> int:
        return self._state.next_seq

    def events_from(self, seq: int) -> list[SessionEvent]:
        """The held events with seq >= ``seq`` (``seq`` must not be below `first_held_seq`)."""
        if seq < self._first:
            raise ValueError(
                f"session {self.id!r} no longer holds seq {seq} (it holds {self._first} on)"
            )
        return self._events[seq - self._first :]

    def release_stored(self, upto_seq: int) -> None:
        """Let go of the held events below ``upto_seq`` (they are stored elsewhere)."""
        drop = min(max(upto_seq - self._first, 0), len(self._events))
        if drop:
            del self._events[:drop]
            self._first += drop

    def checkpoint_state(self) -> LiveState:
        """The folded state (`SessionStore.write_checkpoint` stores it). Shared, not a copy:
        encode it before the next append."""
        return self._state

    @property
    def todos(self) -> list[TodoItem] | None:
        """The current todo list (latest ``todo/write``), or None before any write."""
        todos = self._state.todos
        return None if todos is None else list(todos)

    @property
    def standing_plan(self) -> list[TodoItem] | None:
        """The todo list a UI shows: None once a later ``turn/start`` begins a new turn."""
        return self.todos if self._state.standing else None

    @property
    def open_turn(self) -> int | None:
        return self._state.structure.open_turn

    @property
    def open_step(self) -> int | None:
        return self._state.structure.open_step

    @property
    def last_turn(self) -> int:
        """The number of the latest turn started (0 before any)."""
        return self._state.structure.last_turn

    def unanswered_calls(self) -> tuple[OpenCall, ...]:
        """Tool calls of the open turn that have no result yet, in call order."""
        return self._state.structure.unanswered_calls()

    def derive_messages(self) -> MessageSnapshot:
        """The model's message history (surface events only), as an immutable snapshot.

        O(1): the session keeps the messages as events are appended; the snapshot is a
        `Sequence` that later appends never change (``list(...)`` gives a plain list). A
        session resumed from a checkpoint builds the messages of its history on the first
        call, once (`CheckpointError` if that checkpoint's nodes were rewritten with their
        digest: see docs/design.md, "Checkpoints").
        """
        return self._state.surface.snapshot()

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
            self._state.next_seq,
            self._clock(),
            data,
            surface_op=surface_op,
            source_event_seqs=source_event_seqs,
            ignorable=ignorable,
        )
        self._commit(event, check_structure=self.strict)
        self._notify(event)
        return event

    def _commit(self, event: SessionEvent, *, check_structure: bool) -> None:
        known(event.type)  # an unregistered type: every installed vocabulary loads once
        self._state.apply(event, check_structure=check_structure)
        self._events.append(event)
        self._track_step(event)

    def _track_step(self, event: SessionEvent) -> None:
        if event.type == STEP_START:
            self._step_start = event.seq
        elif event.type in (STEP_END, TURN_START, TURN_END):
            self._step_start = None

    # -- compaction (docs/format.md, "Compaction") ----------------------------------------------

    def compact(
        self,
        summary: str | Sequence[Mapping[str, Any]],
        *,
        start_seq: int | None = None,
        end_seq: int | None = None,
        trigger: Literal["manual", "auto"] = "manual",
        tokens_before: int | None = None,
        call_record: Mapping[str, Any] | None = None,
    ) -> CompactionResult:
        """Replace the surface span ``start_seq..end_seq`` (seqs of surface nodes; default:
        from the first one up to, not including, the last user prompt) with one summary
        ``user/message``: ``summary`` (text or content blocks), then the current todo list as
        a plain text block. Appends ``compaction/start``, ``compaction/summary``, the message
        and ``compaction/end``, all or nothing.

        `CompactionError` (nothing appended) when the span cuts a tool call from its result,
        reaches into the open step, is empty, or the summary is. ``tokens_before``: the input
        tokens the provider reported for the last request (else an estimate is stored);
        ``call_record``: facts of the call that wrote the summary, kept on
        ``compaction/summary`` (``provider``, ``model``, ``usage``, ``rawOutput`` ...).
        """
        pending, result = plan_compaction(
            self._state,
            summary,
            session_id=self.id,
            start_seq=start_seq,
            end_seq=end_seq,
            trigger=trigger,
            tokens_before=tokens_before,
            call_record=call_record,
            open_step_seq=self._step_start,
        )
        self.append_all(pending)
        return result

    def prune_tool_results(
        self,
        *,
        before_seq: int | None = None,
        keep_last: int = 3,
        placeholder: str = DEFAULT_PLACEHOLDER,
    ) -> PruneResult:
        """Replace the content of old tool results with ``placeholder``: each ``tool/result``
        on the surface below ``before_seq`` (default: all) but the ``keep_last`` latest gets a
        ``compaction/prune`` and a replacement of that one result, identical but for its
        content (calls and pairing stay). All or nothing; an empty result when there is
        nothing to prune."""
        pending, result = plan_prune(
            self._state, before_seq=before_seq, keep_last=keep_last, placeholder=placeholder
        )
        if pending:
            self.append_all(pending)
        return result

    def append_all(self, pending: Sequence[PendingEvent]) -> list[SessionEvent]:
        """Append several events as one: each is checked (in strict mode, the structure too)
        on a trial copy of the state, and only when all pass are they committed, then
        notified in order. Raises what the first refused event raised; nothing is appended
        then."""
        if self._notifying:
            raise RuntimeError(
                f"session {self.id!r}: append from inside a subscriber is not allowed "
                "(subscribers must see events in log order)"
            )
        trial = self._state.copy()
        now = self._clock()
        events: list[SessionEvent] = []
        for item in pending:
            event = SessionEvent(
                item.type,
                trial.next_seq,
                now,
                item.data,
                surface_op=item.surface_op,
                source_event_seqs=item.source_event_seqs,
            )
            known(event.type)
            trial.apply(event, check_structure=self.strict)
            events.append(event)
        self._state = trial
        for event in events:
            self._events.append(event)
            self._track_step(event)
        for event in events:
            self._notify(event)
        return events

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
        return f"Session({self.id!r}, events={self.next_seq}, strict={self.strict})"
