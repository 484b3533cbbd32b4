"""The Claude Agent SDK's store-aware helpers on `TodoSessionsStore`, next to the SDK's own
`InMemorySessionStore`: a realistic transcript (a prompt, an assistant planning with TodoWrite
and running a shell tool, the results, a sub-agent sidechain, a compact boundary and summary)
imported with `import_session_to_store`, then listed, read, forked and deleted; and what
todo-sessions itself shows of it (the plan, the conversation, the compaction)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    InMemorySessionStore,
    delete_session_via_store,
    fork_session_via_store,
    get_session_messages_from_store,
    import_session_to_store,
    list_sessions_from_store,
    list_subagents_from_store,
    project_key_for_directory,
)
from click.testing import CliRunner
from starlette.testclient import TestClient

from todo_sessions import SessionStore, derive_messages
from todo_sessions.acp.mapping import replay_updates, update_to_wire
from todo_sessions.cli import main
from todo_sessions.core.todos import current_todos
from todo_sessions.integrations.claude_agent_sdk import TodoSessionsStore, session_id_for
from todo_sessions.web import create_app

SESSION = "0b6d3c5e-8f7a-4c1e-9d2b-3a4f5e6d7c8b"
AGENT = "a1b2c3d"
TODOS = [
    {"content": "Read the failing test", "status": "completed", "activeForm": "Reading"},
    {"content": "Fix the parser", "status": "in_progress", "activeForm": "Fixing the parser"},
]


def _line(n: int, parent: int | None, kind: str, message: Any = None, **extra: Any) -> dict:
    entry: dict[str, Any] = {
        "parentUuid": None if parent is None else f"00000000-0000-4000-8000-{parent:012d}",
        "isSidechain": False,
        "userType": "external",
        "cwd": "",
        "sessionId": SESSION,
        "version": "2.1.332",
        "gitBranch": "main",
        "type": kind,
        "uuid": f"00000000-0000-4000-8000-{n:012d}",
        "timestamp": f"2026-01-01T00:00:{n:02d}.000Z",
    }
    if message is not None:
        entry["message"] = message
    entry.update(extra)
    return entry


def _assistant(n: int, parent: int, *content: dict[str, Any]) -> dict[str, Any]:
    message = {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": list(content),
        "stop_reason": None,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }
    return _line(n, parent, "assistant", message, requestId=f"req_{n}")


def _result(n: int, parent: int, call: str, text: str, **extra: Any) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": call, "content": text}
    return _line(n, parent, "user", {"role": "user", "content": [block]}, **extra)


def transcript(cwd: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    main_lines = [
        _line(1, None, "user", {"role": "user", "content": "Fix the failing parser test"}),
        _assistant(2, 1, {"type": "text", "text": "I'll plan first."}),
        _assistant(
            3, 2, {"type": "tool_use", "id": "t1", "name": "TodoWrite", "input": {"todos": TODOS}}
        ),
        _result(
            4,
            3,
            "t1",
            "Todos have been modified successfully",
            toolUseResult={"oldTodos": [], "newTodos": TODOS},
        ),
        _assistant(
            5,
            4,
            {
                "type": "tool_use",
                "id": "t2",
                "name": "Bash",
                "input": {"command": "pytest -q", "description": "Run tests"},
            },
        ),
        _result(
            6,
            5,
            "t2",
            "1 failed, 4 passed",
            toolUseResult={"stdout": "1 failed, 4 passed", "stderr": ""},
        ),
        _assistant(
            7,
            6,
            {
                "type": "tool_use",
                "id": "t3",
                "name": "Task",
                "input": {
                    "description": "Find the bug",
                    "prompt": "Look at parse()",
                    "subagent_type": "general-purpose",
                },
            },
        ),
        _result(8, 7, "t3", "The bug is an off-by-one in parse()"),
        _line(
            9,
            None,
            "system",
            None,
            subtype="compact_boundary",
            content="Conversation compacted",
            level="info",
            isMeta=False,
            logicalParentUuid="00000000-0000-4000-8000-000000000008",
            compactMetadata={"trigger": "auto", "preTokens": 150000},
        ),
        _line(
            10,
            9,
            "user",
            {
                "role": "user",
                "content": "This session is being continued. "
                "Summary: the parser has an off-by-one; the plan is to fix it.",
            },
            isCompactSummary=True,
            isVisibleInTranscriptOnly=True,
        ),
        _assistant(11, 10, {"type": "text", "text": "Fixed the off-by-one; tests pass."}),
        {"type": "custom-title", "customTitle": "Parser fix", "sessionId": SESSION},
    ]
    for line in main_lines:
        if "cwd" in line:
            line["cwd"] = cwd
    sub_lines = [
        _line(
            101,
            None,
            "user",
            {"role": "user", "content": "Look at parse()"},
            isSidechain=True,
            agentId=AGENT,
            cwd=cwd,
        ),
        _assistant(102, 101, {"type": "text", "text": "The bug is an off-by-one in parse()"}),
    ]
    sub_lines[1].update(isSidechain=True, agentId=AGENT, cwd=cwd)
    return main_lines, sub_lines


@pytest.fixture
def local_transcript(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The transcript on disk, where Claude Code keeps it; returns the project directory."""
    project = tmp_path / "project"
    project.mkdir()
    config = tmp_path / "claude-config"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    folder = config / "projects" / project_key_for_directory(str(project))
    (folder / SESSION / "subagents").mkdir(parents=True)
    main_lines, sub_lines = transcript(os.path.realpath(project))
    (folder / f"{SESSION}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in main_lines))
    sub_file = folder / SESSION / "subagents" / f"agent-{AGENT}.jsonl"
    sub_file.write_text("".join(json.dumps(e) + "\n" for e in sub_lines))
    return str(project)


def _viewer_page(url: str, session_id: str) -> str:
    with TestClient(create_app(url, allowed_hosts=["testserver"])) as client:
        response = client.get(f"/sessions/{session_id}")
        assert response.status_code == 200
        return response.text


def _info(info: Any) -> dict[str, Any]:
    fields = dict(vars(info))
    fields.pop("last_modified")  # each store's own write time
    return fields


def _message(message: Any) -> tuple[Any, Any]:
    return message.type, message.message


async def test_sdk_helpers_give_what_they_give_for_the_sdks_own_store(
    db_url: str, local_transcript: str
) -> None:
    project = local_transcript
    theirs = InMemorySessionStore()
    async with SessionStore(db_url) as store:
        ours = TodoSessionsStore(store)
        for target in (ours, theirs):
            await import_session_to_store(SESSION, target, directory=project, batch_size=4)
        key = {"project_key": project_key_for_directory(project), "session_id": SESSION}
        once = await ours.load(key)  # type: ignore[arg-type]
        assert once == await theirs.load(key)  # type: ignore[arg-type]
        # importing again adds nothing but the line without a uuid (the SDK's rule: lines
        # without one are not deduplicated); the SDK's in-memory store would add every line
        await import_session_to_store(SESSION, ours, directory=project)
        again = await ours.load(key)  # type: ignore[arg-type]
        assert again == [*once, once[-1]] and "uuid" not in once[-1]
        await theirs.append(key, [once[-1]])  # type: ignore[arg-type,list-item]

        listed = await list_sessions_from_store(ours, directory=project)
        expected = await list_sessions_from_store(theirs, directory=project)
        assert [_info(i) for i in listed] == [_info(i) for i in expected]
        assert listed[0].custom_title == "Parser fix"
        got = await get_session_messages_from_store(ours, SESSION, directory=project)
        want = await get_session_messages_from_store(theirs, SESSION, directory=project)
        assert [_message(m) for m in got] == [_message(m) for m in want] and got
        assert await list_subagents_from_store(ours, SESSION, directory=project) == [AGENT]

        # todo-sessions reads the same session as a native one
        sid = session_id_for(key)
        log = await store.read(sid)
        assert [t.model_dump() for t in current_todos(log.events) or []] == [
            {"content": t["content"], "status": t["status"]} for t in TODOS
        ]
        texts = [json.dumps(m.model_dump(by_alias=True)) for m in derive_messages(log.events)]
        # the compaction summary replaced what it summarises; what follows it stays
        assert len(texts) == 2 and "Summary: the parser" in texts[0] and "Fixed" in texts[1]
        kinds = {e.type for e in log.events}
        assert {"tool/call", "tool/result", "todo/write", "turn/start"} <= kinds
        [child] = await store.list(parent=sid)
        assert child.metadata["claude"]["subpath"] == f"subagents/agent-{AGENT}"
        # ... and so does the ACP bridge's replay: the plan, the tool calls, the answer
        wire = [update_to_wire(u) for u in replay_updates(log.events)]
        plans = [u for u in wire if u["sessionUpdate"] == "plan"]
        assert [e["content"] for e in plans[-1]["entries"]] == [t["content"] for t in TODOS]
        assert any(u["sessionUpdate"] == "tool_call" for u in wire)
        said = "".join(
            u["content"].get("text", "")
            for u in wire
            if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert "Fixed" in said
        if db_url != "sqlite://":  # an in-memory database is this process's only
            for command, wanted in (
                (["todos"], "[~] Fix the parser"),
                (["messages"], "Fixed"),
                (["show"], "(replaces earlier history)"),
                (["show", "-v"], "claude/entry"),  # every line is there, kept whole
            ):
                result = await asyncio.to_thread(
                    CliRunner().invoke, main, ["--db", db_url, *command, sid]
                )
                assert result.exit_code == 0 and wanted in result.output, result.output
            # turns, steps, calls and the surface are well formed; a transcript does not say
            # when its last turn ends, so that turn is open (as in an interrupted session)
            result = await asyncio.to_thread(
                CliRunner().invoke, main, ["--db", db_url, "verify", sid]
            )
            assert result.exit_code == 0 and "1 warning(s)" in result.output, result.output
            assert "[interrupted, warning] the last turn is still open" in result.output
            page = await asyncio.to_thread(_viewer_page, db_url, sid)
            assert "Fix the parser" in page and "Fixed the off-by-one" in page

        forked = await fork_session_via_store(ours, SESSION, directory=project, title="Branch")
        their_fork = await fork_session_via_store(theirs, SESSION, directory=project)
        ours_forked = await get_session_messages_from_store(
            ours, forked.session_id, directory=project
        )
        theirs_forked = await get_session_messages_from_store(
            theirs, their_fork.session_id, directory=project
        )
        assert [m.message for m in ours_forked] == [m.message for m in theirs_forked]
        assert len(await list_sessions_from_store(ours, directory=project)) == 2

        for target in (ours, theirs):
            await delete_session_via_store(target, SESSION, directory=project)
        assert await ours.load(key) is None  # type: ignore[arg-type]
        assert await ours.list_subkeys(key) == []  # type: ignore[arg-type]
        remaining = await list_sessions_from_store(ours, directory=project)
        assert [i.session_id for i in remaining] == [forked.session_id]
        assert [s.id for s in await store.list(parent=sid)] == []
