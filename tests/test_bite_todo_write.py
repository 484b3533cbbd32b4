"""The ``todo_write`` tool's schema, description and results, compared whole (issue #17)."""

from __future__ import annotations

from typing import Any

import pytest

from todo_sessions import Session, SessionHeader
from todo_sessions.harness.tools import TodoWriteTool, ToolContext
from todo_sessions.harness.tools.todo_write import TODO_WRITE_PARAMETERS, todo_write_description

SCHEMA = {
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
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                },
                "required": ["content", "status"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["todos"],
    "additionalProperties": False,
}


def test_the_parameters_schema_in_full() -> None:
    assert TODO_WRITE_PARAMETERS == SCHEMA
    tool = TodoWriteTool()
    assert tool.parameters == SCHEMA
    tool.parameters["required"].append("x")  # each instance holds its own copy
    assert TodoWriteTool().parameters == SCHEMA and TODO_WRITE_PARAMETERS == SCHEMA


def test_the_description_is_serial_unless_asked() -> None:
    assert todo_write_description() == TodoWriteTool().description
    assert todo_write_description() == todo_write_description(allow_parallel_in_progress=False)
    assert todo_write_description() != todo_write_description(allow_parallel_in_progress=True)
    assert "Keep at most one todo in_progress" in todo_write_description()
    assert "Several todos may be in_progress" in todo_write_description(
        allow_parallel_in_progress=True
    )
    assert TodoWriteTool().allow_parallel_in_progress is False
    assert TodoWriteTool().name == "todo_write"


def _session() -> Session:
    session = Session(SessionHeader(id="bite", created_at=0), strict=True, clock=lambda: 7)
    session.append("turn/start", {"turn": 1})
    return session


def _context(session: Session | None) -> ToolContext:
    return ToolContext(session=session, call_id="call-1", turn=1, step=1)


def _args(*items: tuple[str, str]) -> dict[str, Any]:
    return {"todos": [{"content": c, "status": s} for c, s in items]}


async def test_a_success_in_full() -> None:
    session = _session()
    result = await TodoWriteTool().run(
        _args((" b ", "in_progress"), ("a", "pending"), ("c", "completed"), ("d", "pending")),
        _context(session),
    )
    todos = [
        {"content": "b", "status": "in_progress"},
        {"content": "a", "status": "pending"},
        {"content": "c", "status": "completed"},
        {"content": "d", "status": "pending"},
    ]
    assert not result.is_error
    assert result.text_content == ("Updated todo list: 2 pending, 1 in progress, 1 completed.")
    assert result.structured == {"pending": 2, "in_progress": 1, "completed": 1, "todos": todos}
    assert session.events[-1].type == "todo/write"
    assert session.events[-1].data_copy() == {"todos": todos}


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (_args(("  ", "pending")), "invalid todo: `content` must be a non-empty string"),
        (_args(("a", "pending"), (" a", "completed")), 'invalid todos: duplicate content "a"'),
        (
            _args(("a", "in_progress"), ("b", "in_progress"), ("c", "in_progress")),
            "invalid todos: at most one task may be in_progress (got 3)",
        ),
        (
            {"todos": "x"},
            "invalid arguments for tool todo_write: $.todos: 'x' is not of type 'array'",
        ),
    ],
    ids=["empty", "duplicate", "two-in-progress", "schema"],
)
async def test_error_results_in_full(args: Any, text: str) -> None:
    session = _session()
    result = await TodoWriteTool().run(args, _context(session))
    assert result.is_error
    assert result.text_content == text
    assert len(session.events) == 1


async def test_no_session_and_a_refused_append() -> None:
    result = await TodoWriteTool().run(_args(("a", "pending")), _context(None))
    assert result.is_error
    assert result.text_content == "todo_write requires an owning agent session"
    outside = Session(SessionHeader(id="bite", created_at=0), strict=True)
    result = await TodoWriteTool().run(_args(("a", "pending")), _context(outside))
    assert result.is_error
    assert result.text_content == (
        "todo_write could not record the todo list: todo/write appended outside any open "
        "turn (seq 0)"
    )
