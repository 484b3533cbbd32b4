"""A fresh structure checker's exported state: what a checkpoint of an empty log holds
(issue #17; the checkpoint format is core/structure.py's `export`)."""

from __future__ import annotations

import pytest
from logs import LogBuilder

from todo_sessions.core.structure import StructureChecker


def test_a_fresh_checker_exports_the_empty_state() -> None:
    state = StructureChecker().export()
    assert state == {
        "nextSeq": 0,
        "openTurn": None,
        "openStep": None,
        "lastTurn": 0,
        "lastStep": 0,
        "calls": [],
    }
    assert StructureChecker.restore(state).export() == state


def test_restore_takes_exact_types_only() -> None:
    state = StructureChecker().export()
    for key, bad in [
        ("nextSeq", None),
        ("nextSeq", True),
        ("lastTurn", None),
        ("lastStep", None),
        ("lastStep", 1.0),
        ("openTurn", "1"),
    ]:
        with pytest.raises(ValueError):
            StructureChecker.restore({**state, key: bad})
    restored = StructureChecker.restore({**state, "openTurn": 2, "openStep": None})
    assert (restored.open_turn, restored.open_step) == (2, None)


def test_open_calls_survive_export_and_restore() -> None:
    b = LogBuilder()
    b.turn_start()
    b.step_start()
    b.assistant(calls=["c1", "c2"])
    b.tool_call("c1")
    b.tool_result("c1")
    b.tool_call("c2")
    checker = StructureChecker()
    for event in b.events:
        checker.advance(event)
    state = checker.export()
    assert state["calls"] == [
        ["c1", "read", 1, 1, 3, 2, True],
        ["c2", "read", 1, 1, 5, 2, False],
    ]
    restored = StructureChecker.restore(state)
    assert restored.export() == state
    assert restored.unanswered_calls() == checker.unanswered_calls()
    assert [c.call_id for c in restored.unanswered_calls()] == ["c2"]
    b.tool_result("c2")
    for each in (checker, restored):
        each.advance(b.events[-1])
    assert restored.export() == checker.export() and restored.unanswered_calls() == ()


def test_a_state_that_is_not_one_is_refused_naming_why() -> None:
    state = StructureChecker().export()
    with pytest.raises(ValueError) as info:
        StructureChecker.restore({k: v for k, v in state.items() if k != "nextSeq"})
    assert str(info.value) == "not a structure state: KeyError('nextSeq')"
    with pytest.raises(ValueError) as info:
        StructureChecker.restore({**state, "lastTurn": None})
    assert str(info.value) == "not a structure state: ValueError('expected int, got None')"
    with pytest.raises(ValueError) as info:
        StructureChecker.restore({**state, "calls": [["c1", "read", 1, 1, None, None, 1]]})
    assert str(info.value) == "not a structure state: ValueError('expected bool, got 1')"
