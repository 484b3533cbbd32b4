"""One JSON shape per result type, on the type (`to_dict`): what the command line's --json,
the viewer's API and the ACP listing write (issue 35, "once each")."""

from __future__ import annotations

import json

from todo_sessions.store.results import CheckpointInfo, PruneReport, SearchHit, SessionSummary


def test_session_summary() -> None:
    summary = SessionSummary(
        id="s1",
        created_at=1,
        updated_at=2,
        cwd="/repo",
        title="fix ünïcode",
        next_seq=7,
        revision="a:b:3",
        parent="s0",
        tags=("x", "y"),
        metadata={"k": {"n": 1}},
        open_todos=True,
    )
    shape = summary.to_dict()
    assert shape == {
        "id": "s1",
        "title": "fix ünïcode",
        "cwd": "/repo",
        "createdAt": 1,
        "updatedAt": 2,
        "events": 7,
        "revision": "a:b:3",
        "parent": "s0",
        "tags": ["x", "y"],
        "metadata": {"k": {"n": 1}},
        "openTodos": True,
    }
    assert json.loads(json.dumps(shape)) == shape  # plain JSON values only
    shape["tags"].append("z")
    shape["metadata"]["other"] = 1
    assert summary.tags == ("x", "y") and "other" not in summary.metadata  # a fresh object


def test_an_empty_summary() -> None:
    shape = SessionSummary("s", 0, 0, None, None, 0, "r").to_dict()
    assert (shape["cwd"], shape["title"], shape["parent"]) == (None, None, None)
    assert (shape["tags"], shape["metadata"], shape["openTodos"]) == ([], {}, False)


def test_search_hit() -> None:
    hit = SearchHit("s1", None, 4, "text", "user/message", "a fix", ((2, 5),), False, 99)
    assert hit.to_dict() == {
        "sessionId": "s1",
        "title": None,
        "seq": 4,
        "kind": "text",
        "type": "user/message",
        "snippet": "a fix",
        "marks": [[2, 5]],
        "inHistory": False,
        "indexId": 99,
    }


def test_checkpoint_info() -> None:
    info = CheckpointInfo(seq=10, format_version=2, created_at=5, size=300)
    assert info.to_dict() == {"seq": 10, "formatVersion": 2, "createdAt": 5, "bytes": 300}


def test_prune_report() -> None:
    report = PruneReport(
        selected=("a", "b", "c"),
        archived={"a": "/x/a.jsonl"},
        deleted=("a",),
        leased=("b",),
        checkpoints_deleted=2,
        dry_run=False,
    )
    assert report.to_dict() == {
        "dryRun": False,
        "selected": ["a", "b", "c"],
        "archived": {"a": "/x/a.jsonl"},
        "deleted": ["a"],
        "skipped": ["b"],
        "checkpointsDeleted": 2,
    }
