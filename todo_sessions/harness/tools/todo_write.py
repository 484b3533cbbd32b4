"""The ``todo_write`` tool: the model replaces the session's todo list.

See docs/format.md, "The todo_write tool".

Validation runs in the documented order and every failure is an ``is_error`` result that appends
nothing: schema violations; empty content after trimming; duplicate content after trimming;
more than one ``in_progress`` (unless ``allow_parallel_in_progress``); no owning session.
On success one ``todo/write`` event with the trimmed list is appended to the calling
agent's session.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ...core.types import TODO_WRITE
from ...errors import InvalidEventError, StructureError
from .base import ToolContext, ToolResult, compile_schema, schema_problem

__all__ = ["TODO_WRITE_PARAMETERS", "TodoWriteTool"]

TODO_WRITE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "todos": {
            "type": "array",
            "description": "The complete, updated todo list. It replaces the previous list.",
            "items": {
                "type": "object",
                "properties": {
                    "content": {
                        "type": "string",
                        "description": "One concrete step, in the imperative. Unique in the list.",
                    },
                    "status": {
                        "type": "string",
                        "enum": ["pending", "in_progress", "completed"],
                    },
                },
                "required": ["content", "status"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["todos"],
    "additionalProperties": False,
}
"""The JSON Schema of the tool's arguments (each tool instance holds its own copy)."""

_VALIDATOR = compile_schema(TODO_WRITE_PARAMETERS)

_DESCRIPTION_HEAD = """\
Create and update the todo list for the current task, so you and the user can follow \
progress through multi-step work.

How it works:
- Send the ENTIRE list on every call. Each call replaces the previous list completely: \
items you leave out are removed. Send an empty list to clear it.
- Each todo is {content, status}; status is pending, in_progress or completed. The content \
identifies the todo, so keep it unique and unchanged while its status changes.

When to use it:
- Before starting multi-step work, plan it: write one todo per concrete step, then start.
- Skip the list for trivial one-step tasks and purely conversational requests; just do them.

Rules:
"""

_SERIAL_RULE = """\
- Keep at most one todo in_progress at a time and, while work remains, exactly one: \
mark the next todo in_progress before you start on it.
"""

_PARALLEL_RULE = """\
- Several todos may be in_progress at once when they are independent work that proceeds \
in parallel; otherwise keep one todo in_progress. While work remains, keep at least one \
todo in_progress.
"""

_DESCRIPTION_TAIL = """\
- Mark a todo completed as soon as it is done; do not batch up completions. Only mark it \
completed when it is fully done; if you are blocked, keep it in_progress and add a todo \
for what must happen first.
- Add todos you discover along the way, and remove ones that turn out to be unnecessary.
"""


def todo_write_description(*, allow_parallel_in_progress: bool = False) -> str:
    """The tool description shown to the model."""
    rule = _PARALLEL_RULE if allow_parallel_in_progress else _SERIAL_RULE
    return _DESCRIPTION_HEAD + rule + _DESCRIPTION_TAIL


class TodoWriteTool:
    """The ``todo_write`` tool. ``allow_parallel_in_progress`` permits several in_progress."""

    name = "todo_write"

    def __init__(self, *, allow_parallel_in_progress: bool = False) -> None:
        self.allow_parallel_in_progress = allow_parallel_in_progress
        self.description = todo_write_description(
            allow_parallel_in_progress=allow_parallel_in_progress
        )
        self.parameters: dict[str, Any] = copy.deepcopy(TODO_WRITE_PARAMETERS)

    def present_call(self, args: dict[str, Any]) -> dict[str, Any] | None:
        """UI presentation: ``{title: "Update todo list", kind: "other", raw_input: todos}``."""
        return {"title": "Update todo list", "kind": "other", "raw_input": args.get("todos")}

    def _check(self, args: Any) -> list[dict[str, str]] | str:
        """The trimmed list, or the error text of the first failed check (checks in order)."""
        problem = schema_problem(_VALIDATOR, args)
        if problem is not None:
            return f"invalid arguments for tool {self.name}: {problem}"
        todos = [
            {"content": item["content"].strip(), "status": item["status"]} for item in args["todos"]
        ]
        if any(not item["content"] for item in todos):
            return "invalid todo: `content` must be a non-empty string"
        seen: set[str] = set()
        for item in todos:
            if item["content"] in seen:
                quoted = json.dumps(item["content"], ensure_ascii=False)
                return f"invalid todos: duplicate content {quoted}"
            seen.add(item["content"])
        in_progress = sum(item["status"] == "in_progress" for item in todos)
        if in_progress > 1 and not self.allow_parallel_in_progress:
            return f"invalid todos: at most one task may be in_progress (got {in_progress})"
        return todos

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        """Validate, append one ``todo/write`` to ``context.session``, report the counts."""
        checked = self._check(args)
        if isinstance(checked, str):
            return ToolResult.error(checked)
        session = context.session
        if session is None:
            return ToolResult.error("todo_write requires an owning agent session")
        try:
            session.append(TODO_WRITE, {"todos": checked})
        except (InvalidEventError, StructureError) as exc:
            return ToolResult.error(f"todo_write could not record the todo list: {exc}")
        counts = {
            status: sum(item["status"] == status for item in checked)
            for status in ("pending", "in_progress", "completed")
        }
        text = (
            f"Updated todo list: {counts['pending']} pending, "
            f"{counts['in_progress']} in progress, {counts['completed']} completed."
        )
        return ToolResult.text(text, structured={**counts, "todos": copy.deepcopy(checked)})
