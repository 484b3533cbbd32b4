"""Crash repair: the events that close a turn left open when a process died.

See docs/design.md, "Crash repair".

For a log whose last turn is open, `interrupted_turn_closers` returns, in order:

1. one error ``tool/result`` (surfaceOp ``"append"``) per unanswered tool call of the open step,
   in call order: ``TOOL_OUTCOME_UNKNOWN`` (citing its ``tool/call``) when the call started,
   ``TOOL_NOT_STARTED`` (citing nothing) when only the assistant's tool-call block exists;
2. ``step/end`` if a step is open;
3. if calls of steps already closed are unanswered: a ``step/start`` of the next step, their
   results (naming that step, where the reference's turn/step rules want a result), its
   ``step/end``;
4. ``turn/end`` with reason ``{"kind": "interrupted"}``.

The closers are a pure function of the log and the session id: seqs continue the log, ``time``
is the last event's, message ids are derived from the session id and seqs. So ``load`` appends
exactly what ``inspect`` showed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .envelope import SessionEvent
from .structure import NOT_STARTED_CODE, OpenCall, StructureChecker
from .types import STEP_END, STEP_START, TOOL_RESULT, TURN_END

__all__ = [
    "CLOSED_STEP_ERROR",
    "NOT_STARTED_ERROR",
    "OUTCOME_UNKNOWN_ERROR",
    "closers_for",
    "interrupted_turn_closers",
]

OUTCOME_UNKNOWN_ERROR: dict[str, str] = {
    "name": "ToolOutcomeUnknownError",
    "code": "TOOL_OUTCOME_UNKNOWN",
}
NOT_STARTED_ERROR: dict[str, str] = {"name": "ToolNotStartedError", "code": NOT_STARTED_CODE}
CLOSED_STEP_ERROR: dict[str, str] = {"name": "ToolOutcomeUnknownError", "code": NOT_STARTED_CODE}
"""The error of a started call of a closed step, answered in a step of its own: the reference's
turn/step rules accept a result without a ``tool/call`` in its step only with the code
``TOOL_NOT_STARTED``; the name, the cited ``tool/call`` and the text say the outcome is
unknown (docs/design.md, "Crash repair")."""

_RETRY_ADVICE = (
    "retry only if the operation is read-only or idempotent; if it may have side effects, "
    "first verify external state or ask the user"
)


def _label(call: OpenCall) -> str:
    return f"tool call {call.name!r} ({call.call_id})" if call.name else f"tool call {call.call_id}"


def _result_text(call: OpenCall) -> str:
    if call.call_seq is not None:
        return (
            f"The outcome of {_label(call)} is unknown: the session "
            "was interrupted before it reported a result, so it may or may not have taken "
            f"effect; {_RETRY_ADVICE}."
        )
    return (
        f"The {_label(call)} was interrupted before it started; it did not run and may be retried."
    )


def _closing_result(
    call: OpenCall, *, session_id: str, seq: int, time: int, closed_step: bool = False
) -> SessionEvent:
    started = call.call_seq is not None
    error = OUTCOME_UNKNOWN_ERROR if started else NOT_STARTED_ERROR
    if started and closed_step:
        error = CLOSED_STEP_ERROR
    data: dict[str, Any] = {
        "turn": call.turn,
        "step": call.step,
        "message": {
            "id": f"{session_id}:repair:{seq}",
            "role": "user",
            "source": {"kind": "tool", "callId": call.call_id},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call.call_id,
                    "content": [{"type": "text", "text": _result_text(call)}],
                    "isError": True,
                }
            ],
        },
        "error": dict(error),
    }
    return SessionEvent(
        TOOL_RESULT,
        seq,
        time,
        data,
        surface_op="append",
        source_event_seqs=[call.call_seq] if call.call_seq is not None else None,
    )


def interrupted_turn_closers(
    events: Sequence[SessionEvent], *, session_id: str
) -> list[SessionEvent]:
    """The events that close the log's open last turn; ``[]`` if no turn is open.

    Works on logs written without strict mode too (the turn/step state is read leniently); the
    closers pass `validate_event` and `check_structure` when the log itself is well structured.
    """
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
    state = StructureChecker()
    for event in events:
        state.advance(event)
    if not events:
        return []
    return closers_for(state, last_time=events[-1].time, session_id=session_id)


def closers_for(state: StructureChecker, *, last_time: int, session_id: str) -> list[SessionEvent]:
    """`interrupted_turn_closers` from a folded turn/step state (a checkpoint's, say) and the
    time of the log's last event, without the events themselves."""
    turn = state.open_turn
    if turn is None:
        return []
    seq, time = state.next_seq, last_time
    closers: list[SessionEvent] = []
    calls = state.unanswered_calls()
    open_step = state.open_step
    elsewhere = [call for call in calls if open_step is None or call.step != open_step]
    for call in calls:
        if call not in elsewhere:
            closers.append(_closing_result(call, session_id=session_id, seq=seq, time=time))
            seq += 1
    if open_step is not None:
        closers.append(SessionEvent(STEP_END, seq, time, {"turn": turn, "step": open_step}))
        seq += 1
    if elsewhere:  # calls of steps already closed: answered inside a step of their own
        step = {"turn": turn, "step": state.last_step + 1}
        closers.append(SessionEvent(STEP_START, seq, time, step))
        seq += 1
        for call in elsewhere:
            moved = replace(call, step=step["step"])
            closers.append(
                _closing_result(moved, session_id=session_id, seq=seq, time=time, closed_step=True)
            )
            seq += 1
        closers.append(SessionEvent(STEP_END, seq, time, step))
        seq += 1
    closers.append(
        SessionEvent(TURN_END, seq, time, {"turn": turn, "reason": {"kind": "interrupted"}})
    )
    return closers
