"""Compactions on the timeline: `show` and the web viewer mark each one (range, trigger,
tokens), and the message pane / `messages --at` show the history before and after it; the ACP
replay shows the summary as a user message and the plan as the plan."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from todo_sessions import SyncSessionService
from todo_sessions.cli import main

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from todo_sessions.web import create_app

PLAN = [{"content": "read", "status": "completed"}, {"content": "fix", "status": "in_progress"}]


def _user(n: int) -> dict[str, Any]:
    return {
        "id": f"u{n}",
        "role": "user",
        "content": [{"type": "text", "text": f"question {n}"}],
        "source": {"kind": "user"},
    }


def _turn(session: Any, turn: int) -> None:
    session.append("turn/start", {"turn": turn})
    session.append("user/message", _user(turn), surface_op="append")
    session.append("step/start", {"turn": turn, "step": 1})
    message = {
        "id": f"a{turn}",
        "role": "assistant",
        "content": [{"type": "tool-call", "id": f"c{turn}", "name": "read", "arguments": "{}"}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    session.append(
        "assistant/message", {"turn": turn, "step": 1, "message": message}, surface_op="append"
    )
    call = session.append(
        "tool/call",
        {"turn": turn, "step": 1, "callId": f"c{turn}", "name": "read", "arguments": "{}"},
    )
    result = {
        "id": f"r{turn}",
        "role": "user",
        "source": {"kind": "tool", "callId": f"c{turn}"},
        "content": [
            {
                "type": "tool-result",
                "toolCallId": f"c{turn}",
                "content": [{"type": "text", "text": "long output"}],
            }
        ],
    }
    session.append(
        "tool/result",
        {"turn": turn, "step": 1, "message": result},
        surface_op="append",
        source_event_seqs=[call.seq],
    )
    session.append("todo/write", {"todos": PLAN})
    session.append("step/end", {"turn": turn, "step": 1})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('views') / 'views.db'}"
    with SyncSessionService(url, flush_interval=None) as service:
        session = service.new("cv")
        _turn(session, 1)
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        _turn(session, 2)
        before = session.next_seq - 1
        result = service.compact("cv", "Asked once and read a file.", tokens_before=1500)
        pruned = service.prune_tool_results("cv", keep_last=0)
        session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
        service.close("cv")
    seqs = {"before": before, "start": result.start_seq, "end": result.end_seq}
    seqs["prune"] = pruned.pruned[0].original_seq
    yield url, seqs


def test_show_marks_the_compaction_and_the_prune(built: tuple[str, dict[str, int]]) -> None:
    url, seqs = built
    out = CliRunner().invoke(main, ["--db", url, "show", "cv"], terminal_width=200)
    assert out.exit_code == 0, out.output
    assert "compaction (manual): seqs 1..5 replaced (3 messages), tokens 1500 →" in out.output
    assert f"pruned tool result {seqs['prune']}" in out.output
    assert "(replaces earlier history)" in out.output


def test_messages_before_and_after(built: tuple[str, dict[str, int]]) -> None:
    url, seqs = built

    def ids(at: int) -> list[str]:
        out = CliRunner().invoke(main, ["--db", url, "messages", "cv", "--at", str(at), "--json"])
        assert out.exit_code == 0, out.output
        return [m["id"] for m in json.loads(out.output)]

    assert ids(seqs["before"]) == ["u1", "a1", "r1", "u2", "a2", "r2"]
    after = ids(seqs["end"])
    assert after == [f"cv:c{seqs['start'] + 2}", "u2", "a2", "r2"]


def test_the_web_timeline_marks_it_and_the_pane_follows(
    built: tuple[str, dict[str, int]],
) -> None:
    url, seqs = built
    with TestClient(create_app(url, allowed_hosts=["testserver"])) as client:
        page = client.get(f"/api/sessions/{quote('cv')}/timeline", params={"at": seqs["start"]})
        assert page.status_code == 200
        html = page.json()["html"]
        assert 'class="ev compaction"' in html
        assert "compaction (manual)" in html and "1500 tokens before" in html
        assert "compaction: seqs 1..5 replaced (3 messages)" in html
        assert f"tool result {seqs['prune']} pruned" in html
        before = client.get("/api/sessions/cv/state", params={"at": seqs["before"]}).json()
        after = client.get("/api/sessions/cv/state", params={"at": seqs["end"]}).json()
    assert [m["id"] for m in before["messages"]] == ["u1", "a1", "r1", "u2", "a2", "r2"]
    assert [m["id"] for m in after["messages"]][1:] == ["u2", "a2", "r2"]
    summary = after["messages"][0]["content"]
    assert summary[0]["text"] == "Asked once and read a file."
    assert "[~] fix" in summary[1]["text"]


def test_acp_replay_shows_the_summary_as_a_user_message_and_keeps_the_plan(
    built: tuple[str, dict[str, int]],
) -> None:
    pytest.importorskip("acp")
    from todo_sessions import SyncSessionStore
    from todo_sessions.acp import replay_updates, update_to_wire

    url, _ = built
    with SyncSessionStore(url) as store:
        events = store.read_from("cv")
    updates = [update_to_wire(u) for u in replay_updates(events)]
    kinds = [u["sessionUpdate"] for u in updates]
    users = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "user_message_chunk"]
    assert users[-2:] == [
        "Asked once and read a file.",
        "Your todo list when this summary was written (keep it up to date with todo_write):\n"
        "[todos]\n[x] read\n[~] fix",
    ]
    # the last plan the client got is the todo list; the prune updated no tool output
    plans = [u for u in updates if u["sessionUpdate"] == "plan"]
    assert [e["content"] for e in plans[-1]["entries"]] == ["read", "fix"]
    results = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert len(results) == 2  # r1, r2: the pruned rewrite of r2 sent nothing
    assert kinds[-1] != "tool_call_update"
