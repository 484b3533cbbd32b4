"""Turn and step structure: an incremental checker and `check_structure`.

See docs/format.md, "Turns and steps".

Rules (each violation raises `StructureError` with a short ``rule`` slug and the ``seq``):

- seqs are contiguous from 0 (``seq``);
- turns run 1, 2, 3 and do not nest; steps run 1, 2, … inside the open turn and do not nest;
- ``step/end``, ``assistant/chunk``, ``assistant/message`` and ``tool/call`` name the open
  turn and step;
- a ``tool/result`` answers a ``tool/call`` of the open turn and names that call's step (a repair
  result, ``TOOL_OUTCOME_UNKNOWN``, may name the open step instead: the closers of an earlier
  version answered a call of a closed step so, inside a new step; today's use the code below,
  as the reference's rules want); a
  synthetic "not started" result (``error.code == "TOOL_NOT_STARTED"``) only has to name the
  open turn;
- a ``tool/result`` that replaces another (a content rewrite the surface rules checked, such
  as pruning an earlier turn's output) is not an answer: it only needs an open turn;
- ``turn/end`` names the open turn and needs no open step;
- ``todo/write``, ``request/header`` and ``request/context`` need an open turn;
- ``session/end-seed`` must be outside any open turn;
- ``user/message`` may appear anywhere; other (embedder or unknown) types are not checked.

`StructureChecker.advance` folds an event without checking; it never raises, so crash repair can
read the state of a log written without strict mode.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from ..errors import StructureError
from .envelope import SessionEvent
from .types import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    SESSION_END_SEED,
    STEP_END,
    STEP_START,
    TODO_WRITE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)

__all__ = [
    "NOT_STARTED_CODE",
    "OpenCall",
    "StructureChecker",
    "check_structure",
]

NOT_STARTED_CODE = "TOOL_NOT_STARTED"
"""``error.code`` of a synthetic result for a call that never started (exempt from matching)."""

_NEEDS_TURN = frozenset({TODO_WRITE, REQUEST_HEADER, REQUEST_CONTEXT})
_NEEDS_STEP = frozenset({STEP_END, ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TOOL_CALL})


@dataclass(frozen=True, slots=True)
class OpenCall:
    """A tool call of the open turn that has no ``tool/result`` yet.

    ``call_seq`` is the seq of its ``tool/call`` event (None: it never started), ``block_seq``
    the seq of the ``assistant/message`` holding its tool-call block (None: no block seen).
    ``turn``/``step`` are those of the ``tool/call`` event when there is one, else of the
    assistant message.
    """

    call_id: str
    name: str
    turn: int
    step: int
    call_seq: int | None
    block_seq: int | None


@dataclass(slots=True)
class _Call:
    call_id: str
    name: str
    turn: int
    step: int
    call_seq: int | None = None
    block_seq: int | None = None
    answered: bool = False


def _data(event: SessionEvent) -> Mapping[str, Any]:
    data = event.payload
    return data if isinstance(data, dict) else {}


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _exact(value: Any, kind: type, *, none: bool = False) -> Any:
    """``value`` if it is exactly of ``kind`` (``bool`` is not an ``int`` here), else
    `ValueError`."""
    if (value is None and none) or type(value) is kind:
        return value
    raise ValueError(f"expected {kind.__name__}, got {value!r}")


def _is_not_started(data: Mapping[str, Any]) -> bool:
    error = data.get("error")
    return isinstance(error, dict) and error.get("code") == NOT_STARTED_CODE


def _is_outcome_unknown(data: Mapping[str, Any]) -> bool:
    """A crash-repair result of a started call (``error.code == "TOOL_OUTCOME_UNKNOWN"``)."""
    error = data.get("error")
    return isinstance(error, Mapping) and error.get("code") == "TOOL_OUTCOME_UNKNOWN"


def _is_rewrite(event: SessionEvent) -> bool:
    """A ``tool/result`` replacing another: a rewrite of its content, not an answer."""
    return event.surface_op is not None and event.surface_op != "append"


def _result_call_id(data: Mapping[str, Any]) -> str | None:
    """``message.source.callId`` of a ``tool/result`` payload, if it is a string."""
    message = data.get("message")
    source = message.get("source") if isinstance(message, dict) else None
    call_id = source.get("callId") if isinstance(source, dict) else None
    return call_id if isinstance(call_id, str) else None


def _tool_call_blocks(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(id, name)`` of each tool-call block of an ``assistant/message`` payload."""
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [
        (block["id"], str(block.get("name", "")))
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "tool-call"
        and isinstance(block.get("id"), str)
    ]


class StructureChecker:
    """The turn/step state of a log folded so far.

    `check` raises `StructureError` if an event would break a rule, changing nothing; `apply`
    checks then advances; `advance` advances without checking (never raises).
    """

    __slots__ = (
        "_calls",
        "_last_step",
        "_last_turn",
        "_ordered",
        "next_seq",
        "open_step",
        "open_turn",
    )

    def __init__(self) -> None:
        self.next_seq: int = 0
        """The seq the next event must have."""
        self.open_turn: int | None = None
        """The number of the open turn, or None between turns."""
        self.open_step: int | None = None
        """The number of the open step of the open turn, or None."""
        self._last_turn = 0
        self._last_step = 0
        self._calls: dict[str, _Call] = {}
        """The latest tool call of the open turn with each call id."""
        self._ordered: list[_Call] = []
        """Every tool call of the open turn, in call order (a model may reuse an id in a later
        step once the earlier call is answered: that is a new call)."""

    @property
    def last_step(self) -> int:
        """The number of the latest step started in the open turn (0 before any)."""
        return self._last_step

    @property
    def last_turn(self) -> int:
        """The number of the latest turn started (0 before any)."""
        return self._last_turn

    def call_place(self, call_id: str) -> tuple[int, int] | None:
        """``(turn, step)`` of the latest tool call of the open turn with this id (None: the
        open turn has none)."""
        call = self._calls.get(call_id)
        return None if call is None else (call.turn, call.step)

    def unanswered_calls(self) -> tuple[OpenCall, ...]:
        """The tool calls of the open turn without a result, in call order."""
        return tuple(
            OpenCall(c.call_id, c.name, c.turn, c.step, c.call_seq, c.block_seq)
            for c in self._ordered
            if not c.answered
        )

    # -- checkpoints ----------------------------------------------------------------------------

    def export(self) -> dict[str, Any]:
        """The whole state as plain JSON values (`restore` reads it back)."""
        return {
            "nextSeq": self.next_seq,
            "openTurn": self.open_turn,
            "openStep": self.open_step,
            "lastTurn": self._last_turn,
            "lastStep": self._last_step,
            "calls": [
                [c.call_id, c.name, c.turn, c.step, c.call_seq, c.block_seq, c.answered]
                for c in self._ordered
            ],
        }

    @classmethod
    def restore(cls, state: Mapping[str, Any]) -> StructureChecker:
        """The checker `export` described; `ValueError` when ``state`` is not one."""
        checker = cls()
        try:
            checker.next_seq = _exact(state["nextSeq"], int)
            checker.open_turn = _exact(state["openTurn"], int, none=True)
            checker.open_step = _exact(state["openStep"], int, none=True)
            checker._last_turn = _exact(state["lastTurn"], int)
            checker._last_step = _exact(state["lastStep"], int)
            for call_id, name, turn, step, call_seq, block_seq, answered in state["calls"]:
                call = _Call(
                    _exact(call_id, str),
                    _exact(name, str),
                    _exact(turn, int),
                    _exact(step, int),
                    _exact(call_seq, int, none=True),
                    _exact(block_seq, int, none=True),
                    _exact(answered, bool),
                )
                checker._ordered.append(call)
                checker._calls[call.call_id] = call  # the latest call with each id
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a structure state: {exc!r}") from None
        return checker

    # -- checking -------------------------------------------------------------------------------

    def check(self, event: SessionEvent) -> None:
        """Raise `StructureError` if appending ``event`` next would break a structure rule."""
        if event.seq != self.next_seq:
            self._fail(
                event,
                "seq",
                f"{event.type} has seq {event.seq}, expected seq {self.next_seq} "
                "(seqs run 0, 1, 2, … with no gaps)",
            )
        kind = event.type
        data = _data(event)
        if kind == TURN_START:
            self._check_turn_start(event, data)
        elif kind == TURN_END:
            self._need_turn(event, data)
            if self.open_step is not None:
                self._fail(event, "step-open", f"turn/end while step {self.open_step} is open")
        elif kind == STEP_START:
            self._check_step_start(event, data)
        elif kind in _NEEDS_STEP:
            self._need_step(event, data)
        elif kind == TOOL_RESULT:
            self._check_tool_result(event, data)
        elif kind in _NEEDS_TURN:
            if self.open_turn is None:
                self._fail(event, "outside-turn", f"{kind} appended outside any open turn")
        elif kind == SESSION_END_SEED and self.open_turn is not None:
            self._fail(
                event,
                "seed-inside-turn",
                f"session/end-seed appended inside open turn {self.open_turn}",
            )

    def _fail(self, event: SessionEvent, rule: str, message: str) -> NoReturn:
        raise StructureError(f"{message} (seq {event.seq})", seq=event.seq, rule=rule)

    def _check_turn_start(self, event: SessionEvent, data: Mapping[str, Any]) -> None:
        turn = data.get("turn")
        if self.open_turn is not None:
            self._fail(
                event,
                "turn-nested",
                f"turn/start (turn {turn!r}) while turn {self.open_turn} is still open",
            )
        if _int(turn) != self._last_turn + 1:
            self._fail(
                event,
                "turn-number",
                f"turn/start has turn {turn!r}, expected {self._last_turn + 1}",
            )

    def _check_step_start(self, event: SessionEvent, data: Mapping[str, Any]) -> None:
        self._need_turn(event, data)
        if self.open_step is not None:
            self._fail(
                event,
                "step-nested",
                f"step/start (step {data.get('step')!r}) while step {self.open_step} is still open",
            )
        if _int(data.get("step")) != self._last_step + 1:
            self._fail(
                event,
                "step-number",
                f"step/start has step {data.get('step')!r}, expected {self._last_step + 1}",
            )

    def _need_turn(self, event: SessionEvent, data: Mapping[str, Any]) -> None:
        """The event needs an open turn and must name it."""
        if self.open_turn is None:
            self._fail(event, "outside-turn", f"{event.type} appended outside any open turn")
        if _int(data.get("turn")) != self.open_turn:
            self._fail(
                event,
                "turn-mismatch",
                f"{event.type} names turn {data.get('turn')!r}, but the open turn is "
                f"{self.open_turn}",
            )

    def _need_step(self, event: SessionEvent, data: Mapping[str, Any]) -> None:
        """The event needs an open step and must name the open turn and step."""
        self._need_turn(event, data)
        if self.open_step is None:
            self._fail(event, "outside-step", f"{event.type} appended outside any open step")
        if _int(data.get("step")) != self.open_step:
            self._fail(
                event,
                "step-mismatch",
                f"{event.type} names step {data.get('step')!r}, but the open step is "
                f"{self.open_step}",
            )

    def _check_tool_result(self, event: SessionEvent, data: Mapping[str, Any]) -> None:
        if _is_rewrite(event):
            if self.open_turn is None:
                self._fail(
                    event,
                    "outside-turn",
                    "tool/result surface replacement appended outside any open turn",
                )
            return
        self._need_turn(event, data)
        call_id = _result_call_id(data)
        call = self._calls.get(call_id) if call_id is not None else None
        if call is not None and call.answered:
            self._fail(
                event,
                "duplicate-result",
                f"tool/result answers call {call_id!r}, which already has a result",
            )
        if _is_not_started(data):
            return
        if call is None or call.call_seq is None:
            self._fail(
                event,
                "unknown-call",
                f"tool/result answers call {call_id!r}, which has no tool/call in turn "
                f"{self.open_turn}",
            )
        step = _int(data.get("step"))
        repaired = step is not None and step == self.open_step and _is_outcome_unknown(data)
        if step != call.step and not repaired:
            self._fail(
                event,
                "step-mismatch",
                f"tool/result for call {call_id!r} names step {data.get('step')!r}, but the "
                f"tool/call (seq {call.call_seq}) is in step {call.step} and the open step is "
                f"{self.open_step}",
            )

    # -- advancing ------------------------------------------------------------------------------

    def apply(self, event: SessionEvent) -> None:
        """Check ``event`` (raising `StructureError`, nothing changed) and then advance."""
        self.check(event)
        self.advance(event)

    def advance(self, event: SessionEvent) -> None:
        """Fold ``event`` into the state without checking it (lenient; never raises)."""
        self.next_seq = event.seq + 1
        kind = event.type
        data = _data(event)
        if kind == TURN_START:
            turn = _int(data.get("turn"))
            self.open_turn = turn if turn is not None else self._last_turn + 1
            self._last_turn = self.open_turn
            self.open_step = None
            self._last_step = 0
            self._calls = {}
            self._ordered = []
        elif kind == TURN_END:
            self.open_turn = None
            self.open_step = None
            self._calls = {}
            self._ordered = []
        elif self.open_turn is None:
            return
        elif kind == STEP_START:
            step = _int(data.get("step"))
            self.open_step = step if step is not None else self._last_step + 1
            self._last_step = self.open_step
        elif kind == STEP_END:
            self.open_step = None
        elif kind == ASSISTANT_MESSAGE:
            self._add_blocks(event, data, self.open_turn)
        elif kind == TOOL_CALL:
            self._add_call(event, data, self.open_turn)
        elif kind == TOOL_RESULT and not _is_rewrite(event):
            call_id = _result_call_id(data)
            call = self._calls.get(call_id) if call_id is not None else None
            if call is not None:
                call.answered = True

    def _where(self, data: Mapping[str, Any], open_turn: int) -> tuple[int, int]:
        """The turn and step an event names; else the open turn, and the open step, else the
        last step of the turn, else 1. (A number 0 is a number: the closers must name the same
        turn and step as the ``step/end`` and ``turn/end`` that follow them.)"""
        turn = _int(data.get("turn"))
        step = _int(data.get("step"))
        if step is None:
            step = self.open_step if self.open_step is not None else (self._last_step or 1)
        return (open_turn if turn is None else turn), step

    def _add_blocks(self, event: SessionEvent, data: Mapping[str, Any], open_turn: int) -> None:
        turn, step = self._where(data, open_turn)
        for call_id, name in _tool_call_blocks(data):
            call = self._calls.get(call_id)
            if call is None or call.answered or call.block_seq is not None:
                self._new_call(_Call(call_id, name, turn, step, block_seq=event.seq))
            else:
                call.block_seq = event.seq

    def _add_call(self, event: SessionEvent, data: Mapping[str, Any], open_turn: int) -> None:
        call_id = data.get("callId")
        if not isinstance(call_id, str):
            return
        turn, step = self._where(data, open_turn)
        call = self._calls.get(call_id)
        if call is None or call.answered or call.call_seq is not None:
            name = data.get("name")
            call = _Call(call_id, name if isinstance(name, str) else "", turn, step)
            self._new_call(call)
        call.call_seq = event.seq
        call.turn, call.step = turn, step

    def _new_call(self, call: _Call) -> None:
        self._calls[call.call_id] = call
        self._ordered.append(call)


def check_structure(events: Iterable[SessionEvent]) -> None:
    """Check a whole log against the structure rules; raise `StructureError` at the first
    violation."""
    checker = StructureChecker()
    for event in events:
        checker.apply(event)
