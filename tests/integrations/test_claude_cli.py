"""The real client: the Claude Code CLI bundled in the claude-agent-sdk wheel, run offline
against a local fake Anthropic Messages server (loopback, a dummy key, telemetry and
nonessential traffic off), with `TodoSessionsStore` as its session store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query
from click.testing import CliRunner
from fake_anthropic import FakeAnthropic

from todo_sessions import SessionStore
from todo_sessions.cli import main
from todo_sessions.integrations.claude_agent_sdk import TodoSessionsStore

FIRST, SECOND = "Plan the release, then run echo", "Mark it done"


def _texts(body: dict[str, Any]) -> str:
    return json.dumps(body.get("messages", []))


def reply(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Script by what the request holds: side requests (no tools) get a short text."""
    if not body.get("tools"):
        return [{"type": "text", "text": "ok"}]
    last = body["messages"][-1]["content"]
    answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
    if answered:
        return [{"type": "text", "text": "Done."}]
    if SECOND in _texts(body):
        update = {"taskId": "1", "status": "completed"}
        return [{"type": "tool_use", "id": "toolu_3", "name": "TaskUpdate", "input": update}]
    create = {"subject": "Release 1.0", "description": "cut the release"}
    shell = {"command": "echo hello-from-bash", "description": "say hello"}
    return [
        {"type": "text", "text": "Planning."},
        {"type": "tool_use", "id": "toolu_1", "name": "TaskCreate", "input": create},
        {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": shell},
    ]


def options(fake: FakeAnthropic, config_dir: Path, cwd: Path, store: Any, **kw: Any):
    env = {
        "ANTHROPIC_BASE_URL": fake.url,
        "ANTHROPIC_API_KEY": "sk-ant-test-dummy",
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "TMPDIR": str(config_dir.parent),  # the CLI's scratch files stay in the test's directory
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
    }
    return ClaudeAgentOptions(
        env=env,
        cwd=str(cwd),
        session_store=store,
        allowed_tools=["Bash", "TaskCreate", "TaskUpdate", "TodoWrite"],
        max_turns=4,
        **kw,
    )


async def cli(url: str, *args: str) -> str:
    """``todo-sessions --db URL ARGS`` (in a thread: the command runs its own event loop)."""
    result = await asyncio.to_thread(CliRunner().invoke, main, ["--db", url, *args])
    assert result.exit_code == 0, result.output
    return result.output


async def run(opts: ClaudeAgentOptions, prompt: str) -> ResultMessage:
    result = None
    async for message in query(prompt=prompt, options=opts):
        if isinstance(message, ResultMessage):
            result = message
    assert result is not None and not result.is_error, result
    return result


async def test_claude_code_cli_uses_the_store_and_resumes_from_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/sessions.db"
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with SessionStore(url) as store:
        adapter = TodoSessionsStore(store)
        with FakeAnthropic(reply) as fake:
            first = await run(options(fake, tmp_path / "config-1", cwd, adapter), FIRST)
            [main] = [s for s in await store.list() if s.parent is None]
            log = await store.read(main.id)
            entries = [e.data for e in log.events if e.type == "claude/entry"]
            tool_uses = [
                b["name"]
                for e in entries
                if e.get("type") == "assistant"
                for b in e["message"]["content"]
                if b.get("type") == "tool_use"
            ]
            assert tool_uses == ["TaskCreate", "Bash"]
            results = [e for e in log.events if e.type == "tool/result"]
            assert any("hello-from-bash" in json.dumps(r.data) for r in results)
            listed = await TodoSessionsStore(store).list_sessions(
                main.metadata["claude"]["project_key"]
            )
            assert [s["session_id"] for s in listed] == [first.session_id]

            shown = await cli(url, "todos", main.id)
            assert "[ ] Release 1.0" in shown

            # a new config directory: the only copy of the history is the store
            before = len(fake.requests)
            assert not (tmp_path / "config-2").exists()
            resumed = options(fake, tmp_path / "config-2", cwd, adapter, resume=first.session_id)
            await run(resumed, SECOND)
            turn_two = [r for r in fake.requests[before:] if r.get("tools")]
            assert FIRST in _texts(turn_two[0]) and "hello-from-bash" in _texts(turn_two[0])
        assert "[x] Release 1.0" in await cli(url, "todos", main.id)
        messages = await cli(url, "messages", main.id)
        assert FIRST in messages and SECOND in messages
