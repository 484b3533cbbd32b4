"""How Claude Code transcript lines map onto typed events: the task tools folded into todo/write
snapshots, TodoWrite lists, unknown lines kept whole, content blocks."""

from __future__ import annotations

from typing import Any

from todo_sessions import derive_messages
from todo_sessions.core.todos import current_todos
from todo_sessions.integrations.claude_agent_sdk import TodoSessionsStore, session_id_for

KEY = {"project_key": "p", "session_id": "s"}


def uses(n: int, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    content = [
        {"type": "tool_use", "id": f"t{n}.{i}", "name": name, "input": args}
        for i, (name, args) in enumerate(calls)
    ]
    message = {"role": "assistant", "model": "m", "content": content}
    return {"type": "assistant", "uuid": f"a{n}", "message": message}


def prompt(n: int, text: str) -> dict[str, Any]:
    return {"type": "user", "uuid": f"u{n}", "message": {"role": "user", "content": text}}


async def snapshots(adapter: TodoSessionsStore) -> list[list[tuple[str, str]]]:
    log = await adapter.store.read(session_id_for(KEY))
    return [
        [(t["content"], t["status"]) for t in e.data["todos"]]
        for e in log.events
        if e.type == "todo/write"
    ]


async def test_task_tools_fold_into_whole_list_snapshots() -> None:
    async with TodoSessionsStore("sqlite://") as adapter:
        await adapter.append(KEY, [prompt(1, "Release")])
        await adapter.append(
            KEY,
            [
                uses(
                    2,
                    ("TaskCreate", {"subject": "Tag", "description": "d"}),
                    ("TaskCreate", {"subject": "Build", "description": "d"}),
                ),
                uses(3, ("TaskUpdate", {"taskId": "1", "status": "in_progress"})),
                uses(4, ("TaskList", {})),  # reads only: no snapshot
                uses(5, ("TaskUpdate", {"taskId": "9", "status": "completed"})),  # unknown id
            ],
        )
        # a new adapter (a new process) continues the numbering from the log
        again = TodoSessionsStore(adapter.store)
        await again.append(
            KEY,
            [
                uses(
                    6,
                    ("TaskUpdate", {"taskId": "1", "status": "completed"}),
                    ("TaskUpdate", {"taskId": "2", "subject": "Build wheels"}),
                ),
                uses(
                    7,
                    ("TaskCreate", {"subject": "Publish", "description": "d"}),
                    ("TaskUpdate", {"taskId": "2", "status": "deleted"}),
                ),
                uses(8, ("TaskCreate", {"subject": "Publish", "description": "again"})),
            ],
        )
        assert await snapshots(adapter) == [
            [("Tag", "pending"), ("Build", "pending")],
            [("Tag", "in_progress"), ("Build", "pending")],
            [("Tag", "completed"), ("Build wheels", "pending")],
            [("Tag", "completed"), ("Publish", "pending")],
            [
                ("Tag", "completed"),
                ("Publish (task 3)", "pending"),
                ("Publish (task 4)", "pending"),
            ],
        ]


async def test_todowrite_lists_and_lines_the_mapping_does_not_know() -> None:
    good = {"todos": [{"content": " Plan ", "status": "in_progress", "activeForm": "Planning"}]}
    twice = {
        "todos": [{"content": "x", "status": "pending"}, {"content": "x", "status": "pending"}]
    }
    lines = [
        prompt(1, "Go"),
        uses(2, ("TodoWrite", good)),
        uses(3, ("TodoWrite", twice)),  # breaks the list rules: no snapshot, line kept
        uses(4, ("TodoWrite", {"todos": "not a list"})),
        {"type": "queue-operation", "operation": "enqueue", "content": "later"},
        {"type": "system", "subtype": "turn_duration", "uuid": "sys1", "durationMs": 5},
        {
            "type": "assistant",
            "uuid": "a5",
            "message": {
                "role": "assistant",
                "model": "m",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "server_tool_use", "id": "x", "name": "web_search"},
                    {"type": "text", "text": "done"},
                ],
            },
        },
    ]
    async with TodoSessionsStore("sqlite://") as adapter:
        await adapter.append(KEY, lines)
        assert await adapter.load(KEY) == lines  # every line, whole
        assert await snapshots(adapter) == [[("Plan", "in_progress")]]
        log = await adapter.store.read(session_id_for(KEY))
        assert [t.content for t in current_todos(log.events) or []] == ["Plan"]
        last = derive_messages(log.events)[-1]
        blocks = [b.model_dump(by_alias=True, exclude_unset=True) for b in last.content]
        assert blocks == [
            {"type": "reasoning", "text": "hmm"},
            {"type": "server_tool_use", "id": "x", "name": "web_search"},
            {"type": "text", "text": "done"},
        ]
