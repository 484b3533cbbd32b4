"""The tool registry and the ``todo_write`` tool, exercised through the registry.

See docs/format.md, "The todo_write tool".
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from todo_sessions import Session, SessionHeader
from todo_sessions.harness.tools import (
    TodoWriteTool,
    Tool,
    ToolContext,
    ToolRegistry,
    ToolResult,
)


def make_session() -> Session:
    session = Session(SessionHeader(id="tools-test", created_at=0), strict=True, clock=lambda: 0)
    session.append("turn/start", {"turn": 1})
    return session


@pytest.fixture
def session() -> Session:
    return make_session()


@pytest.fixture
def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(TodoWriteTool())
    return reg


def ctx(session: Session | None) -> ToolContext:
    return ToolContext(session=session, call_id="call-1", turn=1, step=1)


async def write(
    registry: ToolRegistry, session: Session | None, args: Any
) -> tuple[ToolResult, int]:
    """Run todo_write; also return how many events it appended."""
    before = len(session.events) if session is not None else 0
    result = await registry.execute("todo_write", args, ctx(session))
    after = len(session.events) if session is not None else 0
    return result, after - before


def todos(*items: tuple[str, str]) -> dict[str, Any]:
    return {"todos": [{"content": c, "status": s} for c, s in items]}


# --- todo_write: failures ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"todos": "do it"}, "$.todos: 'do it' is not of type 'array'"),
        (todos(("a", "done")), "$.todos[0].status: 'done' is not one of"),
        (
            {"todos": [{"content": "a", "status": "pending", "priority": "high"}]},
            "$.todos[0]: Additional properties are not allowed ('priority' was unexpected)",
        ),
        (
            {"todos": [], "merge": True},
            "$: Additional properties are not allowed ('merge' was unexpected)",
        ),
        ({"todos": [{"status": "pending"}]}, "$.todos[0]: 'content' is a required property"),
        ({}, "$: 'todos' is a required property"),
        ({"todos": [{"content": 3, "status": "pending"}]}, "$.todos[0].content: 3 is not of"),
    ],
    ids=[
        "not-array",
        "bad-status",
        "item-extra-key",
        "top-extra-key",
        "no-content",
        "no-todos",
        "content-not-string",
    ],
)
async def test_schema_violations_are_error_results(
    registry: ToolRegistry, session: Session, args: dict[str, Any], expected: str
) -> None:
    result, appended = await write(registry, session, args)
    assert result.is_error
    assert result.text_content.startswith("invalid arguments for tool todo_write: ")
    assert expected in result.text_content
    assert appended == 0
    assert session.todos is None


async def test_direct_run_checks_the_schema_too(session: Session) -> None:
    result = await TodoWriteTool().run({"todos": [{"content": "a"}]}, ctx(session))
    assert result.is_error
    assert "'status' is a required property" in result.text_content
    assert len(session.events) == 1


@pytest.mark.parametrize("content", ["", "   ", "\n\t"])
async def test_empty_content_after_trimming(
    registry: ToolRegistry, session: Session, content: str
) -> None:
    result, appended = await write(
        registry, session, todos(("ok", "pending"), (content, "pending"))
    )
    assert result.is_error
    assert result.text_content == "invalid todo: `content` must be a non-empty string"
    assert appended == 0


async def test_duplicate_content_after_trimming(registry: ToolRegistry, session: Session) -> None:
    args = todos(("Write tests", "pending"), ("  Write tests ", "completed"))
    result, appended = await write(registry, session, args)
    assert result.is_error
    assert result.text_content == 'invalid todos: duplicate content "Write tests"'
    assert appended == 0


async def test_empty_content_is_reported_before_duplicates(
    registry: ToolRegistry, session: Session
) -> None:
    args = todos(("a", "pending"), ("a", "pending"), (" ", "pending"))
    result, _ = await write(registry, session, args)
    assert result.text_content == "invalid todo: `content` must be a non-empty string"


async def test_two_in_progress_rejected(registry: ToolRegistry, session: Session) -> None:
    args = todos(("a", "in_progress"), ("b", "in_progress"), ("c", "in_progress"))
    result, appended = await write(registry, session, args)
    assert result.is_error
    assert result.text_content == "invalid todos: at most one task may be in_progress (got 3)"
    assert appended == 0


async def test_two_in_progress_allowed_with_the_option(session: Session) -> None:
    registry = ToolRegistry()
    registry.register(TodoWriteTool(allow_parallel_in_progress=True))
    result, appended = await write(
        registry, session, todos(("a", "in_progress"), ("b", "in_progress"))
    )
    assert not result.is_error
    assert result.text_content == "Updated todo list: 0 pending, 2 in progress, 0 completed."
    assert appended == 1


async def test_non_agent_caller_is_refused(registry: ToolRegistry) -> None:
    result, _ = await write(registry, None, todos(("a", "pending")))
    assert result.is_error
    assert result.text_content == "todo_write requires an owning agent session"


async def test_validation_comes_before_the_session_check(registry: ToolRegistry) -> None:
    result, _ = await write(registry, None, todos(("a", "in_progress"), ("b", "in_progress")))
    assert result.text_content == "invalid todos: at most one task may be in_progress (got 2)"


async def test_append_refused_by_the_session_is_an_error_result(registry: ToolRegistry) -> None:
    session = Session(SessionHeader(id="no-turn", created_at=0), strict=True)  # no open turn
    result, appended = await write(registry, session, todos(("a", "pending")))
    assert result.is_error
    assert "todo/write appended outside any open turn" in result.text_content
    assert appended == 0


# --- todo_write: success -------------------------------------------------------------------


async def test_success_appends_one_trimmed_todo_write(
    registry: ToolRegistry, session: Session
) -> None:
    args = todos(
        ("  Read the code ", "completed"), ("Fix the bug\n", "in_progress"), ("Ship", "pending")
    )
    result, appended = await write(registry, session, args)
    assert not result.is_error
    assert result.text_content == "Updated todo list: 1 pending, 1 in progress, 1 completed."
    trimmed = [
        {"content": "Read the code", "status": "completed"},
        {"content": "Fix the bug", "status": "in_progress"},
        {"content": "Ship", "status": "pending"},
    ]
    assert result.structured == {"pending": 1, "in_progress": 1, "completed": 1, "todos": trimmed}
    assert appended == 1
    event = session.events[-1]
    assert event.type == "todo/write"
    assert event.data == {"todos": trimmed}
    assert event.surface_op is None
    assert [(t.content, t.status) for t in session.todos or []] == [
        ("Read the code", "completed"),
        ("Fix the bug", "in_progress"),
        ("Ship", "pending"),
    ]
    assert session.derive_messages() == []
    # the caller's arguments were not modified
    assert args["todos"][0]["content"] == "  Read the code "


async def test_second_write_replaces_the_first(registry: ToolRegistry, session: Session) -> None:
    await write(registry, session, todos(("a", "in_progress"), ("b", "pending")))
    result, appended = await write(registry, session, todos(("b", "in_progress")))
    assert not result.is_error
    assert appended == 1
    assert [e.type for e in session.events] == ["turn/start", "todo/write", "todo/write"]
    assert [(t.content, t.status) for t in session.todos or []] == [("b", "in_progress")]


async def test_empty_list_clears(registry: ToolRegistry, session: Session) -> None:
    await write(registry, session, todos(("a", "pending")))
    result, appended = await write(registry, session, {"todos": []})
    assert result.text_content == "Updated todo list: 0 pending, 0 in progress, 0 completed."
    assert appended == 1
    assert session.todos == []


async def test_failures_append_nothing_after_a_success(
    registry: ToolRegistry, session: Session
) -> None:
    await write(registry, session, todos(("a", "in_progress")))
    snapshot = list(session.events)
    for bad in [
        {"todos": 1},
        todos(("", "pending")),
        todos(("x", "pending"), ("x", "pending")),
        todos(("x", "in_progress"), ("y", "in_progress")),
        "{not json",
    ]:
        result, appended = await write(registry, session, bad)
        assert result.is_error
        assert appended == 0
    assert list(session.events) == snapshot
    assert [(t.content, t.status) for t in session.todos or []] == [("a", "in_progress")]


async def test_raw_json_string_arguments(registry: ToolRegistry, session: Session) -> None:
    raw = json.dumps(todos(("a", "in_progress"), ("b", "pending")))
    result, appended = await write(registry, session, raw)
    assert not result.is_error
    assert appended == 1
    assert session.todos is not None and len(session.todos) == 2


@pytest.mark.parametrize("raw", ["{not json", '{"todos": [', "[1, 2]", "42"])
async def test_invalid_json_arguments(registry: ToolRegistry, session: Session, raw: str) -> None:
    result, appended = await write(registry, session, raw)
    assert result.is_error
    assert result.text_content.startswith("invalid arguments for tool todo_write: ")
    assert appended == 0


def test_present_call() -> None:
    registry = ToolRegistry()
    registry.register(TodoWriteTool())
    items = todos(("a", "pending"))["todos"]
    expected = {"title": "Update todo list", "kind": "other", "raw_input": items}
    assert TodoWriteTool().present_call({"todos": items}) == expected
    assert registry.present_call("todo_write", json.dumps({"todos": items})) == expected
    assert registry.present_call("todo_write", "{bad") is None
    assert registry.present_call("nope", {}) is None


def test_parameters_schema_shape() -> None:
    params = TodoWriteTool().parameters
    assert params["type"] == "object"
    assert params["required"] == ["todos"]
    assert params["additionalProperties"] is False
    item = params["properties"]["todos"]["items"]
    assert item["required"] == ["content", "status"]
    assert item["additionalProperties"] is False
    assert item["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]


def test_description_policy_phrases() -> None:
    text = TodoWriteTool().description
    for phrase in [
        "ENTIRE list",
        "replaces the previous list",
        "one todo per concrete step",
        "at most one todo in_progress",
        "exactly one",
        "completed as soon as it is done",
        "trivial one-step tasks",
    ]:
        assert phrase in text, phrase
    assert "Several todos may be in_progress at once" not in text


def test_description_parallel_wording() -> None:
    text = TodoWriteTool(allow_parallel_in_progress=True).description
    assert "Several todos may be in_progress at once" in text
    assert "independent" in text
    assert "at most one todo in_progress" not in text
    assert "ENTIRE list" in text and "completed as soon as it is done" in text


# --- the registry --------------------------------------------------------------------------


class Echo:
    name = "echo"
    description = "Echo the text."
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult.text(args["text"])


class Boom:
    name = "boom"
    description = "Always fails."
    parameters: dict[str, Any] = {"type": "object"}

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        raise self.exc


def test_tools_satisfy_the_protocol() -> None:
    assert isinstance(TodoWriteTool(), Tool)
    assert isinstance(Echo(), Tool)


async def test_unknown_tool(registry: ToolRegistry) -> None:
    result = await registry.execute("nope", {}, ctx(None))
    assert result.is_error
    assert "unknown tool 'nope'" in result.text_content


async def test_tool_exception_becomes_error_result(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()
    registry.register(Boom(RuntimeError("disk on fire")))
    with caplog.at_level(logging.ERROR, logger="todo_sessions.harness.tools"):
        result = await registry.execute("boom", {}, ctx(None))
    assert result.is_error
    assert result.text_content == "tool boom failed: RuntimeError: disk on fire"
    assert any("boom" in r.getMessage() for r in caplog.records)


async def test_cancelled_error_propagates() -> None:
    registry = ToolRegistry()
    registry.register(Boom(asyncio.CancelledError()))
    with pytest.raises(asyncio.CancelledError):
        await registry.execute("boom", {}, ctx(None))


async def test_cancelling_a_running_tool_propagates() -> None:
    started = asyncio.Event()

    class Slow(Echo):
        name = "slow"

        async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
            started.set()
            await asyncio.sleep(60)
            return ToolResult.text("late")

    registry = ToolRegistry()
    registry.register(Slow())
    task = asyncio.create_task(registry.execute("slow", {"text": "x"}, ctx(None)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_schema_is_checked_before_the_tool_runs() -> None:
    ran: list[dict[str, Any]] = []

    class Spy(Echo):
        async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
            ran.append(args)
            return ToolResult.text("ok")

    registry = ToolRegistry()
    registry.register(Spy())
    result = await registry.execute("echo", {"text": 5}, ctx(None))
    assert result.is_error
    assert "$.text: 5 is not of type 'string'" in result.text_content
    assert ran == []
    assert (await registry.execute("echo", '{"text": "hi"}', ctx(None))).text_content == "ok"


def test_register_duplicate_refused(registry: ToolRegistry) -> None:
    with pytest.raises(ValueError, match="already registered"):
        registry.register(TodoWriteTool())


def test_register_invalid_schema_refused() -> None:
    class Bad(Echo):
        parameters: dict[str, Any] = {"type": "no-such-type"}

    with pytest.raises(ValueError, match="not a valid schema"):
        ToolRegistry().register(Bad())


def test_unregister_twice_is_harmless() -> None:
    registry = ToolRegistry()
    handle = registry.register(Echo())
    assert "echo" in registry
    assert handle.unregister() is True
    assert "echo" not in registry
    assert handle.unregister() is False
    assert registry.unregister("echo") is False
    # a stale handle never removes a later registration of the same name
    registry.register(Echo())
    assert handle.unregister() is False
    assert "echo" in registry
    assert registry.unregister("echo") is True
    assert registry.get("echo") is None


def test_definitions() -> None:
    registry = ToolRegistry()
    registry.register(Echo())
    registry.register(TodoWriteTool())
    defs = registry.definitions()
    assert [d["name"] for d in defs] == ["echo", "todo_write"]
    assert defs[1]["description"] == TodoWriteTool().description
    assert defs[1]["parameters"] == TodoWriteTool().parameters
    defs[0]["parameters"]["required"].append("mutated")
    assert Echo.parameters["required"] == ["text"]


def test_tool_result_helpers() -> None:
    result = ToolResult.text("hi", structured={"n": 1})
    assert result.content == [{"type": "text", "text": "hi"}]
    assert not result.is_error and result.structured == {"n": 1}
    err = ToolResult.error("bad")
    assert err.is_error and err.text_content == "bad"
    mixed = ToolResult(
        [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]
    )
    assert mixed.text_content == "a\nb"
