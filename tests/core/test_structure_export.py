"""A fresh structure checker's exported state: what a checkpoint of an empty log holds
(issue #17; the checkpoint format is core/structure.py's `export`)."""

from __future__ import annotations

import pytest

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
