"""The mapping of opencode's messages onto typed events (docs/format.md, "opencode sessions").

Each message is kept whole first (one ``opencode/message`` event: ``{info, parts}`` as
``opencode export`` shows it); then:

- a user message with text parts (not ``synthetic``, not ``ignored``): the open turn ends
  (completed), a turn starts, ``user/message``; a user message with a ``compaction`` part (a
  compaction request) only makes sure a turn is open;
- an assistant message: per step (its parts between ``step-start`` and ``step-finish``)
  ``step/start``, ``assistant/message`` (reasoning, text and tool-call blocks, the step's
  token usage, source ``{kind: "model", provider, model}``), a ``tool/call`` per tool part
  with opencode's own tool name and its input as arguments, a ``todo/write`` for a
  ``todowrite`` (its ``todos`` without the ``cancelled`` ones), ``step/end``, then a
  ``tool/result`` per finished tool part (``completed``: its output; ``error``: its error);
  a finish other than ``tool-calls`` ends the turn (``completed``; an error ends it
  ``interrupted`` for an abort, ``error`` otherwise);
- an assistant message that is a compaction summary (``summary: true``): a ``user/message``
  (source kind ``compaction``, its text) replacing the surface so far.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.envelope import SessionEvent
from ..core.todos import todo_list_problem
from ..core.types import (
    ASSISTANT_MESSAGE,
    SESSION_META,
    TODO_WRITE,
    TOOL_CALL,
    TURN_END,
    USER_MESSAGE,
)
from ..integrations._common import Batch, LogState
from ._vocabulary import OPENCODE_MESSAGE, OPENCODE_SESSION
from .base import FileResult, compact_json

__all__ = [
    "MESSAGE_TYPE",
    "PART_KINDS",
    "SESSION_TYPE",
    "OpencodeState",
    "map_message",
    "pending_messages",
    "todos_of",
]

MESSAGE_TYPE = OPENCODE_MESSAGE
"""One message, kept whole: ``{info, parts}`` as ``opencode export`` shows it."""
SESSION_TYPE = OPENCODE_SESSION
"""The session's info as ``opencode export`` shows it (``{info}``), and its database row
(``row``) when it was read from one; a new one each time it changed."""
PART_KINDS = frozenset(
    {
        "text",
        "reasoning",
        "tool",
        "step-start",
        "step-finish",
        "file",
        "snapshot",
        "patch",
        "agent",
        "retry",
        "compaction",
        "subtask",
    }
)
_ENDS_TURN_NOT = frozenset({"tool-calls", "unknown"})


class OpencodeState(LogState):
    """The fold the mapping and the import need beyond `LogState`: the messages kept (their
    ids, with their JSON), the session info kept last, the title."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: dict[str, str] = {}
        self.info: dict[str, Any] | None = None
        self.title: str | None = None

    def advance(self, event: SessionEvent) -> None:
        super().advance(event)
        if event.type == MESSAGE_TYPE:
            info = event.payload.get("info")
            if isinstance(info, dict) and isinstance(info.get("id"), str):
                self.messages[info["id"]] = event.data_json
        elif event.type == SESSION_TYPE and isinstance(event.payload.get("info"), dict):
            self.info = event.payload["info"]
        elif event.type == SESSION_META and "title" in event.payload:
            self.title = event.payload["title"]


def todos_of(tool_input: Any) -> list[dict[str, str]] | None:
    """A ``todowrite`` input's ``todos`` as a ``todo/write`` list: ``{content, status}`` of
    each, the ``cancelled`` ones left out (the list has no such status); None when it breaks
    the rules of a todo list."""
    todos = tool_input.get("todos") if isinstance(tool_input, dict) else None
    if not isinstance(todos, list) or not all(isinstance(t, dict) for t in todos):
        return None
    items = [
        {"content": _stripped(t.get("content")), "status": t.get("status")}
        for t in todos
        if t.get("status") != "cancelled"
    ]
    return None if todo_list_problem(items) else items


def _stripped(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _text(parts: list[dict[str, Any]], kind: str) -> list[str]:
    return [
        p["text"]
        for p in parts
        if p.get("type") == kind
        and isinstance(p.get("text"), str)
        and not p.get("synthetic")
        and not p.get("ignored")
    ]


def _steps(parts: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The parts of each step: from a ``step-start`` to the next (parts before the first
    ``step-start`` are a step of their own)."""
    steps: list[list[dict[str, Any]]] = []
    for part in parts:
        if part.get("type") == "step-start" or not steps:
            steps.append([])
        steps[-1].append(part)
    return [s for s in steps if any(p.get("type") in ("text", "reasoning", "tool") for p in s)]


def _tool_parts(parts: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for part in parts:
        call_id, tool = part.get("callID"), part.get("tool")
        state = part.get("state")
        if part.get("type") != "tool" or not isinstance(state, dict):
            continue
        if isinstance(call_id, str) and call_id and isinstance(tool, str) and tool:
            out.append((call_id, tool, state))
    return out


def _arguments(state: Mapping[str, Any]) -> str:
    value = state.get("input", {})
    return value if isinstance(value, str) else compact_json(value)


def _result_text(state: Mapping[str, Any]) -> tuple[str, bool] | None:
    status = state.get("status")
    if status == "completed":
        output = state.get("output")
        return (output if isinstance(output, str) else compact_json(output)), False
    if status == "error":
        error = state.get("error")
        return (error if isinstance(error, str) else compact_json(error)), True
    return None


class _Mapper:
    def __init__(self, batch: Batch, state: OpencodeState, entry: dict[str, Any]) -> None:
        self.batch, self.state = batch, state
        self.info: dict[str, Any] = entry["info"]
        parts = entry.get("parts")
        self.parts = [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
        self.id = str(self.info["id"])

    def run(self) -> None:
        role = self.info.get("role")
        if role == "user":
            self._user()
        elif role == "assistant" and self.info.get("summary") is True:
            self._compaction()
        elif role == "assistant":
            self._assistant()

    def _user(self) -> None:
        texts = _text(self.parts, "text")
        if texts:
            self.batch.new_turn()
            content = [{"type": "text", "text": t} for t in texts]
            message = {"id": self.id, "role": "user", "content": content}
            self.batch.add(USER_MESSAGE, {**message, "source": {"kind": "user"}}, surface=True)
        elif any(p.get("type") == "compaction" for p in self.parts):
            self.batch.ensure_turn()

    def _compaction(self) -> None:
        texts = _text(self.parts, "text")
        if not texts:
            return
        self.batch.close_step()
        self.batch.ensure_turn()
        content = [{"type": "text", "text": "\n\n".join(texts)}]
        source = {"kind": "compaction"}
        summary = {"id": self.id, "role": "user", "content": content, "source": source}
        span = list(self.state.surface)
        if span:
            self.batch.add(USER_MESSAGE, summary, replace=(span[0], span[-1], span))
        else:
            self.batch.add(USER_MESSAGE, summary, surface=True)

    def _assistant(self) -> None:
        for n, step in enumerate(_steps(self.parts)):
            self._step(step, f"{self.id}:{n}" if n else self.id)
        self._end()

    def _step(self, parts: list[dict[str, Any]], message_id: str) -> None:
        blocks: list[dict[str, Any]] = []
        for part in parts:
            kind, text = part.get("type"), part.get("text")
            visible = not part.get("synthetic") and not part.get("ignored")
            if kind in ("text", "reasoning") and isinstance(text, str) and text and visible:
                blocks.append({"type": "text" if kind == "text" else "reasoning", "text": text})
        calls = _tool_parts(parts)
        for call_id, tool, state in calls:
            arguments = _arguments(state)
            blocks.append(
                {"type": "tool-call", "id": call_id, "name": tool, "arguments": arguments}
            )
        if not blocks:
            return
        turn, step = self.batch.open_step()
        provider, model = self.info.get("providerID"), self.info.get("modelID")
        source = {"kind": "model", "provider": str(provider or "opencode")}
        source["model"] = str(model or "unknown")
        message = {"id": message_id, "role": "assistant", "content": blocks, "source": source}
        data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
        finish = next((p for p in parts if p.get("type") == "step-finish"), None)
        if finish is not None and isinstance(finish.get("tokens"), dict):
            data["usage"] = finish["tokens"]
        self.batch.add(ASSISTANT_MESSAGE, data, surface=True)
        for call_id, tool, state in calls:
            call = {"turn": turn, "step": step, "callId": call_id, "name": tool}
            self.batch.add(TOOL_CALL, {**call, "arguments": _arguments(state)})
            todos = todos_of(state.get("input")) if tool == "todowrite" else None
            if todos is not None:
                self.batch.add(TODO_WRITE, {"todos": todos})
        self.batch.close_step()
        for call_id, _, state in calls:
            result = _result_text(state)
            if result is not None:
                blocks = [{"type": "text", "text": result[0]}]
                self.batch.tool_result(call_id, blocks, result[1], f"{self.id}:{call_id}")

    def _end(self) -> None:
        error, finish = self.info.get("error"), self.info.get("finish")
        if self.state.open_turn is None:
            return
        reason: dict[str, Any] | None = None
        if isinstance(error, dict):
            if error.get("name") == "MessageAbortedError":
                reason = {"kind": "interrupted"}
            else:
                data = error.get("data")
                text = data.get("message") if isinstance(data, dict) else None
                message = text if isinstance(text, str) and text else json.dumps(error)
                reason = {"kind": "error", "error": {"message": message}}
                if isinstance(error.get("name"), str) and error["name"]:
                    reason["error"]["code"] = error["name"]
        elif isinstance(finish, str) and finish not in _ENDS_TURN_NOT:
            reason = {"kind": "completed"}
        if reason is not None:
            self.batch.close_step()
            self.batch.add(TURN_END, {"turn": self.state.open_turn, "reason": reason})


def map_message(batch: Batch, state: OpencodeState, entry: dict[str, Any]) -> None:
    """The typed events of one message (its ``opencode/message`` event is in the batch)."""
    _Mapper(batch, state, entry).run()


def _complete(message: Mapping[str, Any]) -> bool:
    info = message["info"]
    time = info.get("time")
    if info.get("role") == "assistant":
        return info.get("error") is not None or (
            isinstance(time, dict) and time.get("completed") is not None
        )
    return "summary" in info


def pending_messages(
    messages: list[dict[str, Any]], state: OpencodeState, result: FileResult
) -> tuple[list[dict[str, Any]], bool]:
    """The messages to append: those not kept yet, complete, in order up to the first one
    that is not (reported); kept messages that changed since are reported. And whether a
    message was left for later (opencode is still at work on the session)."""
    done = [_complete(m) for m in messages]
    later_done = [False] * len(messages)  # whether a message after it is complete
    for i in range(len(messages) - 2, -1, -1):
        later_done[i] = done[i + 1] or later_done[i + 1]
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        mid = message["info"]["id"]
        kept = state.messages.get(mid)
        if kept is not None:
            if json.loads(kept) != message:
                result.warnings.append(
                    f"{result.path}: message {mid} changed after it was imported; kept as imported"
                )
            continue
        if not (done[i] or (message["info"].get("role") == "user" and later_done[i])):
            result.warnings.append(
                f"{result.path}: message {mid} is not complete yet (opencode is still "
                "writing it, or was stopped); left for the next import"
            )
            return out, True
        out.append(message)
    return out, False
