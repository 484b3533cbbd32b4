"""Importing Claude Code transcripts and Codex rollout files (todo_sessions.importers) from the
committed corpus tests/fixtures/importers: the mapping (todos, messages, tool calls with the
agent's own names and arguments, children), the byte-identical export, and that the imported
sessions work with the store's projections, search and verify, on every backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from todo_sessions import SessionStore, verify_session
from todo_sessions.importers import (
    CodexImporter,
    FileResult,
    export_session,
    get_importer,
    import_paths,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"
CODEX_ROOT = FIXTURES / "codex" / "sessions"
CLAUDE_ROOT = FIXTURES / "claude-code" / "projects"
CODEX_MAIN = "codex-0199d0a4-7b1e-7c30-9f2a-3c4d5e6f7a8b"
CODEX_CHILD = "codex-0199d0a5-1111-7222-8333-444455556666"
ROOTS = {"codex": CODEX_ROOT, "claude-code": CLAUDE_ROOT}


def source_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def events_of(store: SessionStore, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [e.data_copy() for e in await store.read_from(session_id) if e.type == kind]


async def imported(store: SessionStore, agent: str) -> dict[str, FileResult]:
    results = await import_paths(store, get_importer(agent), [ROOTS[agent]])
    return {r.session_id: r for r in results}


def texts(message: Any) -> list[str]:
    return [b.text for b in message.content if getattr(b, "type", None) == "text"]


async def test_codex_plan_calls_messages_and_child(store: SessionStore) -> None:
    results = await imported(store, "codex")
    assert {r.status for r in results.values()} == {"created"}
    assert all(not r.warnings and not r.unknown_kinds for r in results.values())
    main_file = results[CODEX_MAIN].path
    # the plan: each update_plan a todo/write snapshot of its (step, status) list
    plans = [
        json.loads(e["payload"]["arguments"])["plan"]
        for e in source_lines(main_file)
        if e["payload"].get("name") == "update_plan"
    ]
    writes = await events_of(store, CODEX_MAIN, "todo/write")
    assert [[(t["content"], t["status"]) for t in w["todos"]] for w in writes] == [
        [(p["step"], p["status"]) for p in plan] for plan in plans
    ]
    todos = await store.current_todos(CODEX_MAIN)
    assert [(t.content, t.status) for t in todos or []] == [
        ("Read cli.py", "completed"),
        ("Add the --json flag", "completed"),
    ]
    # tool calls: Codex's own names and argument strings, in order
    calls = [
        (e["payload"]["name"], e["payload"].get("arguments", e["payload"].get("input")))
        for e in source_lines(main_file)
        if e["payload"].get("type") in ("function_call", "custom_tool_call")
    ]
    stored = await events_of(store, CODEX_MAIN, "tool/call")
    assert [(c["name"], c["arguments"]) for c in stored] == calls
    assert [c["name"] for c in stored] == [
        "update_plan",
        "shell",
        "spawn_agent",
        "apply_patch",
        "update_plan",
    ]
    results_ = await events_of(store, CODEX_MAIN, "tool/result")
    assert [r["message"]["source"]["callId"] for r in results_] == [
        f"call_{i}" for i in range(1, 6)
    ]
    # messages: the prompt (not the injected context), reasoning, the answer
    messages = await store.derive_messages(CODEX_MAIN)
    assert messages[0].role == "user"
    assert texts(messages[0]) == ["Add a --json flag to the CLI"]
    assert texts(messages[-1]) == ["Added `--json`: the CLI now prints JSON when asked."]
    assert messages[1].content[0].type == "reasoning"
    assert sum(m.role == "user" and m.source.kind == "user" for m in messages) == 1
    # the header, metadata and the child
    summary = await store.summary(CODEX_MAIN)
    assert summary.cwd == "/home/ada/proj"
    assert "agent:codex" in summary.tags
    assert summary.metadata["codex"]["model"] == "gpt-5-codex"
    assert summary.metadata["codex"]["token_usage"]["total_tokens"] == 2120
    child = await store.summary(CODEX_CHILD)
    assert child.parent == CODEX_MAIN
    assert (await store.header(CODEX_CHILD)).delegation_depth == 1
    assert [s.id for s in await store.list(parent=CODEX_MAIN)] == [CODEX_CHILD]
    # search and verify
    hits = await store.search("argparse")
    assert {h.session_id for h in hits} == {CODEX_MAIN}
    assert any(h.event_type == "tool/call" for h in hits)
    for session_id in (CODEX_MAIN, CODEX_CHILD):
        assert await verify_session(store, session_id) == []


async def test_claude_code_todos_calls_child_and_title(store: SessionStore) -> None:
    pytest.importorskip("claude_agent_sdk")
    results = await imported(store, "claude-code")
    main, child = sorted(results.values(), key=lambda r: len(r.session_id))
    assert (main.status, child.status) == ("created", "created")
    assert not main.warnings and not main.unknown_kinds
    todos = await store.current_todos(main.session_id)
    assert [(t.content, t.status) for t in todos or []] == [
        ("Read cli.py", "completed"),
        ("Add the --json flag", "completed"),
    ]
    calls = await events_of(store, main.session_id, "tool/call")
    assert [c["name"] for c in calls] == ["TodoWrite", "Bash", "Task", "TodoWrite"]
    assert json.loads(calls[1]["arguments"]) == {
        "command": "grep -n argparse cli.py",
        "description": "Find the parser",
    }
    messages = await store.derive_messages(main.session_id)
    assert texts(messages[0]) == ["Add a --json flag to the CLI, café style"]
    assert texts(messages[-1]) == ["Added `--json`: the CLI now prints JSON when asked."]
    summary = await store.summary(main.session_id)
    assert summary.title == "JSON output"  # customTitle beats the summary line
    assert summary.cwd == "/home/ada/proj"
    assert "agent:claude-code" in summary.tags
    sub = await store.summary(child.session_id)
    assert sub.parent == main.session_id
    assert [c["name"] for c in await events_of(store, child.session_id, "tool/call")] == ["Grep"]
    hits = await store.search("callers")
    assert {h.session_id for h in hits} == {main.session_id, child.session_id}
    # Claude Code writes no end-of-turn line: the last turn stays open, and verify says so
    problems = await verify_session(store, main.session_id)
    assert [p.kind for p in problems] == ["interrupted"]


@pytest.mark.parametrize("agent", ["codex", "claude-code"])
async def test_export_is_byte_identical_and_reimport_adds_nothing(agent: str) -> None:
    if agent == "claude-code":
        pytest.importorskip("claude_agent_sdk")
    importer = get_importer(agent)
    async with SessionStore("sqlite://") as store:
        first = await imported(store, agent)
        counts = {sid: (await store.summary(sid)).next_seq for sid in first}
        again = await imported(store, agent)
        assert {r.status for r in again.values()} == {"unchanged"}
        assert all(r.lines == 0 and not r.warnings for r in again.values())
        for sid, result in first.items():
            assert (await store.summary(sid)).next_seq == counts[sid]
            assert await export_session(store, importer, sid) == result.path.read_bytes()


def test_discovery_orders_parents_first_and_takes_files() -> None:
    files = sorted(CODEX_ROOT.rglob("*.jsonl"), reverse=True)  # the child first
    sources = CodexImporter().discover(files)
    assert [s.session_id for s in sources] == [CODEX_MAIN, CODEX_CHILD]
    assert sources[1].parent == CODEX_MAIN


def line(kind: str, payload: dict[str, Any]) -> str:
    return json.dumps({"timestamp": "2025-10-11T09:00:00.000Z", "type": kind, "payload": payload})


async def test_codex_line_shapes_of_older_and_newer_releases(tmp_path: Path) -> None:
    prompt = {"type": "item_completed", "item": {"type": "UserMessage", "content": []}}
    prompt["item"]["content"] = [{"type": "text", "text": "Run it", "text_elements": []}]
    shell = {"type": "local_shell_call", "call_id": "c1", "status": "completed"}
    shell["action"] = {"type": "exec", "command": ["ls"]}
    failed = {"type": "function_call_output", "call_id": "c1"}
    failed["output"] = {"content": "ls: denied", "success": False}
    lines = [
        line("session_meta", {"id": "t1", "cwd": "/w", "source": "cli"}),
        line("event_msg", {"type": "user_message", "message": "Run it"}),
        line("event_msg", prompt),  # the same prompt as a newer release's item: one turn
        line("response_item", shell),
        line("response_item", failed),
        line("event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
        line("event_msg", {"type": "user_message", "message": "Again"}),
        line("compacted", {"message": "Summary: ls was denied."}),
        line("event_msg", {"type": "thread_name_updated", "thread_name": "Listing"}),
    ]
    path = tmp_path / "rollout-2025-10-11T09-00-00-t1.jsonl"
    path.write_text("".join(text + "\n" for text in lines), encoding="utf-8")
    async with SessionStore("sqlite://") as store:
        [result] = await import_paths(store, CodexImporter(), [path])
        assert (result.session_id, result.status, result.warnings) == ("codex-t1", "created", [])
        events = await store.read_from("codex-t1")
        starts = [e.data_copy()["turn"] for e in events if e.type == "turn/start"]
        ends = [e.data_copy()["reason"]["kind"] for e in events if e.type == "turn/end"]
        assert (starts, ends) == ([1, 2], ["interrupted"])
        [call] = [e.data_copy() for e in events if e.type == "tool/call"]
        assert (call["name"], json.loads(call["arguments"])) == ("local_shell", shell["action"])
        [answer] = [e.data_copy()["message"] for e in events if e.type == "tool/result"]
        assert answer["content"][0]["isError"] is True
        assert answer["content"][0]["content"] == [{"type": "text", "text": "ls: denied"}]
        messages = await store.derive_messages("codex-t1")
        assert [(m.source.kind, texts(m)) for m in messages] == [
            ("compaction", ["Summary: ls was denied."])
        ]
        assert (await store.summary("codex-t1")).title == "Listing"
        assert await export_session(store, CodexImporter(), "codex-t1") == path.read_bytes()
