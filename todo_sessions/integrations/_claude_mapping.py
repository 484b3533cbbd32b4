"""How a Claude Code transcript line maps onto typed events: the mapping of the Claude Agent
SDK store (`todo_sessions.integrations.claude_agent_sdk`) and of the Claude Code importer
(`todo_sessions.importers.claude_code`). No SDK import.

Prompts open turns, assistant content becomes ``assistant/message`` (tool uses also
``tool/call``), tool results ``tool/result``, a compaction summary replaces the surface it
summarises, and every ``TodoWrite`` call and every ``TaskCreate`` / ``TaskUpdate`` change of
the task list a ``todo/write`` snapshot.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from ..core.envelope import SessionEvent
from ..core.todos import todo_list_problem
from ..core.types import ASSISTANT_MESSAGE, TODO_WRITE, TOOL_CALL, USER_MESSAGE
from ._common import Batch, LogState
from ._vocabulary import CLAUDE_ENTRY as ENTRY_TYPE

__all__ = [
    "ENTRY_TYPE",
    "TASK_NOTIFICATION",
    "ClaudeState",
    "blocks_of",
    "is_task_notification",
    "map_entry",
    "tool_uses",
]


def blocks_of(content: Any) -> list[dict[str, Any]]:
    """Anthropic content (a string or blocks) as this library's blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            blocks.append({"type": "text", "text": block["text"]})
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            blocks.append({"type": "reasoning", "text": block["thinking"]})
        elif kind == "tool_use" and isinstance(block.get("id"), str):
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
            blocks.append(
                {
                    "type": "tool-call",
                    "id": block["id"],
                    "name": str(block.get("name") or "tool"),
                    "arguments": arguments,
                }
            )
        elif kind == "image" and isinstance(block.get("source"), dict):
            source = block["source"]
            if isinstance(source.get("data"), str) and isinstance(source.get("media_type"), str):
                blocks.append(
                    {"type": "image", "mediaType": source["media_type"], "data": source["data"]}
                )
            else:
                blocks.append(dict(block))
        elif isinstance(kind, str) and kind not in ("tool_result",):
            blocks.append(dict(block))  # kept verbatim (an unknown block)
    return blocks


class _Tasks:
    """The task list of ``TaskCreate`` / ``TaskUpdate``: ids in creation order."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, str]] = {}
        self.created = 0

    def create(self, args: Mapping[str, Any], result_text: str | None = None) -> bool:
        subject = args.get("subject")
        if not isinstance(subject, str) or not subject.strip():
            return False
        self.created += 1
        self.items[str(self.created)] = {"content": subject.strip(), "status": "pending"}
        return True

    def update(self, args: Mapping[str, Any]) -> bool:
        task = self.items.get(str(args.get("taskId")))
        if task is None:
            return False
        status = args.get("status")
        if status == "deleted":
            del self.items[str(args.get("taskId"))]
            return True
        changed = False
        if status in ("pending", "in_progress", "completed"):
            task["status"], changed = status, True
        subject = args.get("subject")
        if isinstance(subject, str) and subject.strip():
            task["content"], changed = subject.strip(), True
        return changed

    def snapshot(self) -> list[dict[str, str]]:
        """The list as ``todo/write`` items; a subject that is not unique gets `` (task N)``."""
        counts: dict[str, int] = {}
        for item in self.items.values():
            counts[item["content"]] = counts.get(item["content"], 0) + 1
        return [
            {**item, "content": f"{item['content']} (task {task_id})"}
            if counts[item["content"]] > 1
            else dict(item)
            for task_id, item in self.items.items()
        ]


class ClaudeState(LogState):
    """The fold of a Claude transcript's log: the core's, plus the line uuids seen and the
    ``TaskCreate`` / ``TaskUpdate`` task list."""

    def __init__(self) -> None:
        super().__init__()
        self.uuids: set[str] = set()
        self.tasks = _Tasks()
        self.task_changed = False
        """Whether the last ``claude/entry`` changed the task list."""

    def advance(self, event: SessionEvent) -> None:
        super().advance(event)
        if event.type == ENTRY_TYPE:
            entry = event.payload
            uuid = entry.get("uuid")
            if isinstance(uuid, str):
                self.uuids.add(uuid)
            changes = [self._fold_task(name, args) for name, args in tool_uses(entry)]
            self.task_changed = any(changes)

    def copy(self) -> ClaudeState:
        twin = super().copy()
        twin.tasks = copy.deepcopy(self.tasks)  # its items change in place
        return twin

    def _fold_task(self, name: str, args: Mapping[str, Any]) -> bool:
        if name == "TaskCreate":
            return self.tasks.create(args)
        if name == "TaskUpdate":
            return self.tasks.update(args)
        return False


def tool_uses(entry: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    message = entry.get("message")
    if entry.get("type") != "assistant" or not isinstance(message, dict):
        return []
    content = message.get("content")
    uses: list[tuple[str, Mapping[str, Any]]] = []
    for b in content if isinstance(content, list) else []:
        if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("name"), str):
            uses.append((b["name"], b["input"] if isinstance(b.get("input"), dict) else {}))
    return uses


def _todo_snapshot(args: Mapping[str, Any]) -> list[dict[str, str]] | None:
    todos = args.get("todos")
    if not isinstance(todos, list):
        return None
    items = [
        {"content": t["content"].strip(), "status": t.get("status")}
        for t in todos
        if isinstance(t, dict) and isinstance(t.get("content"), str)
    ]
    return None if len(items) != len(todos) or todo_list_problem(items) else items


TASK_NOTIFICATION = "task-notification"
"""The source kind of a user line that is a task notification, not a prompt."""
_NOTIFICATION_TAG = "<task-notification>"


def is_task_notification(entry: Mapping[str, Any], blocks: list[dict[str, Any]]) -> bool:
    """Whether a user line is a task notification (a background task's or sub-agent's result
    that Claude Code delivers to the model as a user line): its ``origin`` says so (``{kind:
    "task-notification", ...}``, as Claude Code 2.1 writes it), or its text starts with the
    ``<task-notification>`` element (as the versions before ``origin`` write it)."""
    origin = entry.get("origin")
    if isinstance(origin, dict) and origin.get("kind") == TASK_NOTIFICATION:
        return True
    first = blocks[0] if blocks else None
    text = first.get("text") if first is not None and first.get("type") == "text" else None
    return isinstance(text, str) and text.lstrip().startswith(_NOTIFICATION_TAG)


def map_entry(batch: Batch, state: ClaudeState, entry: dict[str, Any]) -> None:
    """The typed events of one transcript line (after its ``claude/entry``)."""
    kind, message = entry.get("type"), entry.get("message")
    given = entry.get("uuid")
    uuid = given if isinstance(given, str) else f"seq-{batch.state.next_seq}"
    if kind == "user" and isinstance(message, dict):
        _map_user(batch, state, entry, message, uuid)
    elif kind == "assistant" and isinstance(message, dict):
        _map_assistant(batch, state, entry, message, uuid)


def _map_user(
    batch: Batch, state: ClaudeState, entry: dict[str, Any], message: dict[str, Any], uuid: str
) -> None:
    """A user line: tool results, a compaction summary, or a prompt (a meta line in the turn)."""
    content = message.get("content")
    results = [
        b
        for b in (content if isinstance(content, list) else [])
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    for block in results:
        call_id = block.get("tool_use_id")
        if isinstance(call_id, str) and call_id:
            inner = blocks_of(block.get("content", ""))
            batch.tool_result(call_id, inner, block.get("is_error") is True, f"{uuid}:{call_id}")
    blocks = [] if results else blocks_of(content)
    if not blocks:
        return
    if entry.get("isCompactSummary") is True:
        batch.ensure_turn()
        summary: dict[str, Any] = {"id": uuid, "role": "user", "content": blocks}
        summary["source"] = {"kind": "compaction"}
        span = list(state.surface)
        if span:
            batch.add(USER_MESSAGE, summary, replace=(span[0], span[-1], span))
        else:
            batch.add(USER_MESSAGE, summary, surface=True)
        return
    source: dict[str, Any] = {"kind": "user"}
    if is_task_notification(entry, blocks):
        batch.ensure_turn()  # no prompt: the agent's own turn goes on (or one opens for it)
        source = {"kind": TASK_NOTIFICATION}
    elif entry.get("isMeta") is True:
        batch.ensure_turn()
    else:
        batch.new_turn()
    batch.add(
        USER_MESSAGE,
        {"id": uuid, "role": "user", "content": blocks, "source": source},
        surface=True,
    )


def _map_assistant(
    batch: Batch, state: ClaudeState, entry: dict[str, Any], message: dict[str, Any], uuid: str
) -> None:
    """An assistant line: its message, its tool calls, and the todo lists they write."""
    blocks = blocks_of(message.get("content"))
    if not blocks:
        return
    turn, step = batch.open_step()
    model = message.get("model") if isinstance(message.get("model"), str) else "unknown"
    data: dict[str, Any] = {
        "turn": turn,
        "step": step,
        "message": {
            "id": uuid,
            "role": "assistant",
            "content": blocks,
            "source": {"kind": "model", "provider": "anthropic", "model": model},
        },
    }
    if isinstance(message.get("usage"), dict):
        data["usage"] = message["usage"]
    batch.add(ASSISTANT_MESSAGE, data, surface=True)
    for block in blocks:
        if block["type"] == "tool-call":
            call = {
                "turn": turn,
                "step": step,
                "callId": block["id"],
                "name": block["name"],
                "arguments": block["arguments"],
            }
            batch.add(TOOL_CALL, call)
    for name, args in tool_uses(entry):
        todos = _todo_snapshot(args) if name == "TodoWrite" else None
        if todos is not None:
            batch.add(TODO_WRITE, {"todos": todos})
    if state.task_changed:  # one snapshot of the whole task list after the line's changes
        batch.add(TODO_WRITE, {"todos": state.tasks.snapshot()})
    batch.close_step()
