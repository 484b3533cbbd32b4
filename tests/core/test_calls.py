"""Tool calls whose ids repeat: a model may number calls per response (``call_0`` each step)."""

from __future__ import annotations

import pytest
from factories import call_ids
from logs import LogBuilder

from todo_sessions import StructureError
from todo_sessions.core.repair import interrupted_turn_closers
from todo_sessions.core.structure import check_structure
from todo_sessions.core.surface import derive_messages


def reused_id_log() -> LogBuilder:
    b = LogBuilder()
    b.turn_start()
    b.user("go")
    b.tool_step("call_0")  # step 1: call_0 asked, run, answered
    b.step_start()  # step 2: the model numbers its calls from 0 again
    b.assistant("again", calls=["call_0"])
    b.tool_call("call_0")
    return b


def test_a_reused_call_id_in_a_later_step_is_a_new_call() -> None:
    b = reused_id_log()
    check_structure(b.events)
    b.tool_result("call_0", "second result", cites=[b.next_seq - 1])
    b.step_end()
    b.turn_end()
    check_structure(b.events)


def test_repair_answers_the_unanswered_reuse() -> None:
    b = reused_id_log()
    closers = interrupted_turn_closers(b.events, session_id="s")
    assert [e.type for e in closers] == ["tool/result", "step/end", "turn/end"]
    assert closers[0].data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert closers[0].source_event_seqs == (b.next_seq - 1,)
    assert closers[0].data["step"] == 2
    repaired = [*b.events, *closers]
    check_structure(repaired)
    calls, answered = call_ids(derive_messages(repaired))
    assert calls == answered == ["call_0", "call_0"]


def test_a_second_result_for_an_answered_call_is_refused() -> None:
    b = LogBuilder()
    b.turn_start()
    b.user("go")
    b.step_start()
    b.assistant("", calls=["c1"])
    b.tool_call("c1")
    b.tool_result("c1")
    b.tool_result("c1", "again")
    with pytest.raises(StructureError, match="already has a result") as info:
        check_structure(b.events)
    assert info.value.rule == "duplicate-result"
