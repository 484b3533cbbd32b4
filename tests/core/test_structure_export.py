"""A fresh structure checker's exported state: what a checkpoint of an empty log holds
(issue #17; the checkpoint format is core/structure.py's `export`)."""

from __future__ import annotations

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
