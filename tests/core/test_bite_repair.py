"""The repair closers compared whole, on the wire (issue #17).

Other tests check single fields of the closing ``tool/result``; here every closer is compared
with the complete expected event, so no key, id or text can change unnoticed.
"""

from __future__ import annotations

from typing import Any

import pytest
from logs import T0, LogBuilder

from todo_sessions.core.catalog import validate_event
from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.repair import (
    NOT_STARTED_ERROR,
    OUTCOME_UNKNOWN_ERROR,
    interrupted_turn_closers,
)
from todo_sessions.core.structure import check_structure

SID = "S"
RETRY = (
    "retry only if the operation is read-only or idempotent; if it may have side effects, "
    "first verify external state or ask the user"
)


def _result(
    seq: int, call_id: str, text: str, error: dict[str, str], cites: list[int] | None
) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "type": "tool/result",
        "seq": seq,
        "time": T0 + 5,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {
                "id": f"{SID}:repair:{seq}",
                "role": "user",
                "source": {"kind": "tool", "callId": call_id},
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": call_id,
                        "content": [{"type": "text", "text": text}],
                        "isError": True,
                    }
                ],
            },
            "error": error,
        },
        "surfaceOp": "append",
    }
    if cites is not None:
        wire["sourceEventSeqs"] = cites
    return wire


def _interrupted_log() -> LogBuilder:
    b = LogBuilder()
    b.turn_start()  # 0
    b.user("go")  # 1
    b.step_start()  # 2
    b.assistant(calls=[("c1", "grep")])  # 3
    b.tool_call("c1", "grep")  # 4
    b.assistant(calls=[("c2", "edit")])  # 5
    return b


def test_the_closers_in_full() -> None:
    b = _interrupted_log()
    closers = interrupted_turn_closers(b.events, session_id=SID)
    assert [c.to_dict() for c in closers] == [
        _result(
            6,
            "c1",
            "The outcome of tool call 'grep' (c1) is unknown: the session was interrupted "
            "before it reported a result, so it may or may not have taken effect; "
            f"{RETRY}.",
            {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"},
            [4],
        ),
        _result(
            7,
            "c2",
            "The tool call 'edit' (c2) was interrupted before it started; it did not run and "
            "may be retried.",
            {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"},
            None,
        ),
        {"type": "step/end", "seq": 8, "time": T0 + 5, "data": {"turn": 1, "step": 1}},
        {
            "type": "turn/end",
            "seq": 9,
            "time": T0 + 5,
            "data": {"turn": 1, "reason": {"kind": "interrupted"}},
        },
    ]
    for closer in closers:
        validate_event(closer)
    check_structure([*b.events, *closers])


def test_a_call_without_a_name_is_named_by_its_id() -> None:
    # a non-strict log: a tool/call without a name, a tool-call block without a name
    events = [
        SessionEvent("turn/start", 0, T0, {"turn": 1}),
        SessionEvent("step/start", 1, T0 + 1, {"turn": 1, "step": 1}),
        SessionEvent("tool/call", 2, T0 + 2, {"turn": 1, "step": 1, "callId": "k1"}),
        SessionEvent(
            "assistant/message",
            3,
            T0 + 5,
            {"turn": 1, "step": 1, "message": {"content": [{"type": "tool-call", "id": "k2"}]}},
        ),
    ]
    first, second, _, _ = interrupted_turn_closers(events, session_id=SID)
    assert first.to_dict() == _result(
        4,
        "k1",
        "The outcome of tool call k1 is unknown: the session was interrupted before it "
        f"reported a result, so it may or may not have taken effect; {RETRY}.",
        OUTCOME_UNKNOWN_ERROR,
        [2],
    )
    assert second.to_dict() == _result(
        5,
        "k2",
        "The tool call k2 was interrupted before it started; it did not run and may be retried.",
        NOT_STARTED_ERROR,
        None,
    )


def test_the_error_constants() -> None:
    b = _interrupted_log()
    first = interrupted_turn_closers(b.events, session_id=SID)
    assert OUTCOME_UNKNOWN_ERROR == {
        "name": "ToolOutcomeUnknownError",
        "code": "TOOL_OUTCOME_UNKNOWN",
    }
    assert NOT_STARTED_ERROR == {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
    assert first == interrupted_turn_closers(b.events, session_id=SID)


@pytest.mark.parametrize("session_id", ["", None, 7, b"s"])
def test_session_id_must_be_a_non_empty_string(session_id: Any) -> None:
    with pytest.raises(ValueError) as info:
        interrupted_turn_closers([], session_id=session_id)
    assert str(info.value) == f"session_id must be a non-empty string, got {session_id!r}"
