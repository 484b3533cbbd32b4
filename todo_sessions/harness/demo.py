"""The demo: a scripted coding session through the real agent loop into a real store.

Two turns of a model fixing a bug in a tiny in-memory repository: it plans with ``todo_write``,
reads, edits, runs the tests, and moves each todo through pending → in_progress → completed.
Everything goes through `AgentLoop`, `SessionService` (write-behind) and `SessionStore`; only
the model's answers and the repository are canned.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from .._service import SessionService
from ..store.store import SessionStore
from .loop import AgentLoop, TurnOutcome
from .model import ScriptedModel, ScriptedResponse
from .tools.base import ToolContext, ToolResult
from .tools.registry import ToolRegistry
from .tools.todo_write import TodoWriteTool

__all__ = ["DemoResult", "build_tools", "demo_model", "run_demo"]

BUGGY = "def mean(xs):\n    return sum(xs) / (len(xs) - 1)\n"
TESTS = "from calc import mean\n\ndef test_mean():\n    assert mean([1, 2, 3]) == 2\n"


@dataclass
class FakeRepo:
    """A few files in memory, and a test runner that knows what correct code looks like."""

    files: dict[str, str] = field(default_factory=lambda: {"calc.py": BUGGY, "test_calc.py": TESTS})

    def run_tests(self) -> tuple[bool, str]:
        code = self.files["calc.py"]
        ok = "len(xs) - 1" not in code
        tests = self.files["test_calc.py"].count("def test_")
        guarded = "if not xs" in code
        if "test_mean_empty" in self.files["test_calc.py"] and not guarded:
            return False, f"{tests} tests, 1 failed: test_mean_empty (ZeroDivisionError)"
        if not ok:
            return False, f"{tests} tests, 1 failed: test_mean (assert 3.0 == 2)"
        return True, f"{tests} tests passed"


def _tool(name: str, description: str, properties: dict[str, Any], run: Any) -> Any:
    class _Tool:
        def __init__(self) -> None:
            self.name = name
            self.description = description
            self.parameters = {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            }

        async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
            return run(args)

    return _Tool()


def build_tools(repo: FakeRepo) -> ToolRegistry:
    """``todo_write`` plus ``read_file``, ``edit_file`` and ``run_tests`` on the fake repo."""

    def read(args: dict[str, Any]) -> ToolResult:
        path = args["path"]
        if path not in repo.files:
            return ToolResult.error(f"no such file: {path}")
        return ToolResult.text(repo.files[path])

    def edit(args: dict[str, Any]) -> ToolResult:
        path, old, new = args["path"], args["old"], args["new"]
        text = repo.files.get(path, "")
        if old and old not in text:
            return ToolResult.error(f"{path}: text to replace not found")
        repo.files[path] = text.replace(old, new, 1) if old else text + new
        return ToolResult.text(f"edited {path}")

    def tests(args: dict[str, Any]) -> ToolResult:
        ok, summary = repo.run_tests()
        return ToolResult.text(summary, is_error=not ok)

    registry = ToolRegistry()
    registry.register(TodoWriteTool())
    registry.register(
        _tool("read_file", "Read a file of the repository.", {"path": {"type": "string"}}, read)
    )
    registry.register(
        _tool(
            "edit_file",
            "Replace text in a file (old='' appends).",
            {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
            edit,
        )
    )
    registry.register(_tool("run_tests", "Run the test suite.", {}, tests))
    return registry


def _todos(*items: tuple[str, str]) -> dict[str, Any]:
    return {"todos": [{"content": c, "status": s} for c, s in items]}


def _first_turn() -> list[ScriptedResponse]:
    """Turn 1: "The test for mean() fails. Please fix it." (read, fix, verify)."""
    r = ScriptedResponse
    read, fix, verify = "Read calc.py and its test", "Fix the off-by-one in mean()", "Run the tests"
    return [
        r(
            reasoning="Three steps: read, fix, verify.",
            text="I'll plan this first.",
            tool_calls=[
                (
                    "todo_write",
                    _todos((read, "in_progress"), (fix, "pending"), (verify, "pending")),
                ),
                ("read_file", {"path": "calc.py"}),
            ],
        ),
        r(
            text="The divisor is len(xs) - 1; it should be len(xs).",
            tool_calls=[
                (
                    "todo_write",
                    _todos((read, "completed"), (fix, "in_progress"), (verify, "pending")),
                ),
                ("edit_file", {"path": "calc.py", "old": "len(xs) - 1", "new": "len(xs)"}),
            ],
        ),
        r(
            tool_calls=[
                (
                    "todo_write",
                    _todos((read, "completed"), (fix, "completed"), (verify, "in_progress")),
                ),
                ("run_tests", {}),
            ],
        ),
        r(
            text="Fixed: mean() divided by len(xs) - 1. The test passes now.",
            tool_calls=[
                (
                    "todo_write",
                    _todos((read, "completed"), (fix, "completed"), (verify, "completed")),
                )
            ],
        ),
        r(text="All three todos are done."),
    ]


def _second_turn() -> list[ScriptedResponse]:
    """Turn 2: "Also make it safe for an empty list, with a test." (test first, then guard)."""
    r = ScriptedResponse
    guard, test_empty = "Guard mean() against an empty list", "Add a test for the empty list"
    new_test = "\ndef test_mean_empty():\n    assert mean([]) == 0\n"
    guarded = "    if not xs:\n        return 0\n    return sum"
    return [
        r(
            text="Two more steps.",
            tool_calls=[
                ("todo_write", _todos((test_empty, "in_progress"), (guard, "pending"))),
                ("edit_file", {"path": "test_calc.py", "old": "", "new": new_test}),
                ("run_tests", {}),
            ],
        ),
        r(
            text="The new test fails as expected; now the guard.",
            tool_calls=[
                ("todo_write", _todos((test_empty, "completed"), (guard, "in_progress"))),
                ("edit_file", {"path": "calc.py", "old": "    return sum", "new": guarded}),
                ("run_tests", {}),
            ],
        ),
        r(
            text="mean([]) now returns 0 and both tests pass.",
            tool_calls=[("todo_write", _todos((test_empty, "completed"), (guard, "completed")))],
        ),
        r(text="Done."),
    ]


def demo_model() -> ScriptedModel:
    """The canned answers of the two demo turns."""
    return ScriptedModel([*_first_turn(), *_second_turn()])


PROMPTS = (
    "The test for mean() in calc.py fails. Please fix it.",
    "Also make mean() safe for an empty list, with a test.",
)


@dataclass(frozen=True)
class DemoResult:
    session_id: str
    outcomes: tuple[TurnOutcome, ...]


async def run_demo(store: SessionStore, *, session_id: str | None = None) -> DemoResult:
    """Run the scripted session into ``store`` (strict structure checks on)."""
    session_id = session_id or f"demo-{uuid.uuid4().hex[:8]}"
    repo = FakeRepo()
    tools = build_tools(repo)
    model = demo_model()
    service = SessionService(store, strict=True)
    session = await service.new(
        session_id, cwd="/demo/repo", title="Fix mean() in calc.py", origin="demo"
    )
    loop = AgentLoop(session, model, tools, checkpoint=service.checkpoint_for(session_id))
    outcomes = tuple([await loop.run_turn(prompt) for prompt in PROMPTS])
    await service.close(session_id)
    return DemoResult(session_id, outcomes)
