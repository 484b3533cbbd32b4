"""The ``subagent`` tool through the real agent loop with scripted models: child sessions with
todo lists of their own, failures, the depth limit, cancellation, a crash and its repair, and
`SessionStore.children` on every backend.

See docs/format.md, "Subagent sessions".
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from factories import call_ids

from todo_sessions import SessionService, SessionStore
from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.structure import check_structure
from todo_sessions.harness.loop import AgentLoop
from todo_sessions.harness.model import ModelDelta, ScriptedModel, ScriptedResponse
from todo_sessions.harness.subagent import SubagentTool, subagent_session_id
from todo_sessions.harness.tools import (
    TodoWriteTool,
    ToolContext,
    ToolRegistry,
)

CHILD = Path(__file__).resolve().parent / "subagent_child.py"

PARENT_PLAN = {
    "todos": [
        {"content": "survey the tests", "status": "in_progress"},
        {"content": "try the risky fix", "status": "pending"},
    ]
}
CHILD_PLAN = {
    "todos": [
        {"content": "read the tests", "status": "in_progress"},
        {"content": "report", "status": "pending"},
    ]
}
CHILD_PLAN_LATER = {
    "todos": [
        {"content": "read the tests", "status": "completed"},
        {"content": "report", "status": "in_progress"},
    ]
}


class Failing:
    """A model whose every call fails."""

    provider = "scripted"
    model = "failing"

    async def stream(self, messages: Sequence[Any], tools: Sequence[Any]) -> AsyncIterator[Any]:
        raise RuntimeError("disk on fire")
        yield  # pragma: no cover - makes this an async generator


class Routed:
    """One model for a parent and its children: each call goes to the script of the session's
    first user message (the parent's prompt, or a child's task)."""

    provider = "scripted"
    model = "routed"

    def __init__(self, scripts: dict[str, Any]) -> None:
        self.scripts = scripts

    def stream(self, messages: Sequence[Any], tools: Sequence[Any]) -> AsyncIterator[ModelDelta]:
        first = messages[0].content[0].text
        return self.scripts[first].stream(messages, tools)  # type: ignore[no-any-return]


def registry(*tools: Any) -> ToolRegistry:
    out = ToolRegistry()
    out.register(TodoWriteTool())
    for tool in tools:
        out.register(tool)
    return out


def calls_of(events: Sequence[SessionEvent], name: str) -> list[SessionEvent]:
    return [e for e in events if e.type == "tool/call" and e.data["name"] == name]


def result_of(events: Sequence[SessionEvent], call_id: str) -> SessionEvent:
    (found,) = [
        e
        for e in events
        if e.type == "tool/result" and e.data["message"]["source"]["callId"] == call_id
    ]
    return found


def parent_script() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedResponse(
                text="Planning, then delegating the survey.",
                tool_calls=[
                    ("todo_write", PARENT_PLAN),
                    ("subagent", {"task": "survey the tests", "title": "Survey"}),
                ],
            ),
            ScriptedResponse(
                text="Now the risky part.", tool_calls=[("subagent", {"task": "try the fix"})]
            ),
            ScriptedResponse(text="The survey found 3 tests; the fix failed."),
        ]
    )


def survey_script() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedResponse(text="Planning.", tool_calls=[("todo_write", CHILD_PLAN)]),
            ScriptedResponse(text="Read them.", tool_calls=[("todo_write", CHILD_PLAN_LATER)]),
            ScriptedResponse(text="Found 3 tests."),
        ]
    )


async def test_parent_delegates_twice_through_the_real_loop(db_url: str) -> None:
    model = Routed(
        {
            "fix the build": parent_script(),
            "survey the tests": survey_script(),
            "try the fix": Failing(),
        }
    )
    async with SessionService(SessionStore(db_url), strict=True) as service:
        parent = await service.new("parent", cwd="/srv")
        tools = registry(SubagentTool(service))  # the children run on the parent's model
        loop = AgentLoop(parent, model, tools, checkpoint=service.checkpoint_for("parent"))
        outcome = await loop.run_turn("fix the build")
        assert outcome.reason == "completed"
        assert outcome.text == "The survey found 3 tests; the fix failed."
        await service.flush()
        store = service.store
        events = await store.read_from("parent")
        check_structure(events)
        # the parent's own list, untouched by the children's todo_write calls
        assert [t.model_dump() for t in await store.current_todos("parent") or []] == (
            PARENT_PLAN["todos"]
        )
        assert [t.model_dump() for t in parent.todos or []] == PARENT_PLAN["todos"]
        survey_call, fix_call = calls_of(events, "subagent")
        survey_id = subagent_session_id("parent", survey_call.data["callId"])
        fix_id = subagent_session_id("parent", fix_call.data["callId"])
        assert survey_call.data["subagentSessionId"] == survey_id == "parent/subagent/call_1_2"
        assert fix_call.data["subagentSessionId"] == fix_id
        assert not any("subagentSessionId" in e.data for e in calls_of(events, "todo_write"))
        # the child's answer is the result; a failed child is an error result
        survey_result = result_of(events, survey_call.data["callId"])
        assert survey_result.data["message"]["content"][0]["content"] == [
            {"type": "text", "text": "Found 3 tests."}
        ]
        assert "error" not in survey_result.data
        assert survey_result.data["meta"]["structured"]["sessionId"] == survey_id
        fix_result = result_of(events, fix_call.data["callId"])
        block = fix_result.data["message"]["content"][0]
        assert block["isError"] is True
        assert "ended error: disk on fire" in block["content"][0]["text"]
        assert fix_result.data["error"]["code"] == "TOOL_ERROR"
        # the children: their own sessions, not forks, with their own todo lists
        header = await store.header(survey_id)
        assert header.parent_session == "parent" and header.seed_length is None
        assert (header.origin, header.delegation_depth, header.title) == ("subagent", 1, "Survey")
        assert header.cwd == "/srv"
        assert [t.model_dump() for t in await store.current_todos(survey_id) or []] == (
            CHILD_PLAN_LATER["todos"]
        )
        assert await store.current_todos(fix_id) is None
        child_events = await store.read_from(survey_id)
        check_structure(child_events)
        assert child_events[1].data["content"] == [{"type": "text", "text": "survey the tests"}]
        children = await store.children("parent")
        assert [(c.id, c.title, c.status) for c in children] == [
            (survey_id, "Survey", "completed"),
            (fix_id, "try the fix", "failed"),
        ]
        assert [t.content for t in children[0].open_todos] == ["report"]
        assert children[1].open_todos == ()
        assert children[0].to_dict()["openTodos"] == [
            {"content": "report", "status": "in_progress"}
        ]
        assert await store.children(survey_id) == []
        assert service.live_ids() == ["parent"]  # each child was closed after its turn


async def test_children_leaves_forks_out_and_lists_every_backend(db_url: str) -> None:
    async with SessionService(SessionStore(db_url), strict=True) as service:
        parent = await service.new("p")
        parent.append("turn/start", {"turn": 1})
        parent.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await service.flush()
        fork = await service.fork("p", child_id="p-fork")
        fork.append("turn/start", {"turn": 2})
        for number, kind in enumerate(("completed", "aborted", "max-tokens", None)):
            child = await service.new(
                f"c{number}", parent="p", origin="subagent", title=f"t{number}"
            )
            child.append("turn/start", {"turn": 1})
            if kind is not None:
                child.append("turn/end", {"turn": 1, "reason": {"kind": kind}})
        await service.flush()
        found = await service.store.children("p")
        assert [(c.id, c.status, c.origin) for c in found] == [
            ("c0", "completed", "subagent"),
            ("c1", "aborted", "subagent"),
            ("c2", "failed", "subagent"),
            ("c3", "running", "subagent"),  # live here, its turn open
        ]
        assert [c.id for c in await service.store.list(parent="p")].count("p-fork") == 1
        await service.discard("c3")  # no queued events: nothing lost


async def test_a_call_at_the_depth_limit_is_refused(tmp_path: Path) -> None:
    """A child at depth 1 asks for a grandchild; with ``max_depth=1`` that is refused (an
    error result the child's model reads), with ``max_depth=2`` it runs."""

    def script() -> Routed:
        return Routed(
            {
                "go": ScriptedModel(
                    [
                        ScriptedResponse(tool_calls=[("subagent", {"task": "nest"})]),
                        ScriptedResponse(text="done"),
                    ]
                ),
                "nest": ScriptedModel(
                    [
                        ScriptedResponse(tool_calls=[("subagent", {"task": "deeper"})]),
                        ScriptedResponse(text="nested"),
                    ]
                ),
                "deeper": ScriptedModel([ScriptedResponse(text="deepest")]),
            }
        )

    async with SessionService(SessionStore(f"sqlite:///{tmp_path}/s.db"), strict=True) as service:
        for depth in (1, 2):
            top = await service.new(f"top{depth}")
            loop = AgentLoop(top, script(), registry(SubagentTool(service, max_depth=depth)))
            assert (await loop.run_turn("go")).reason == "completed"
            await service.flush()
            (child,) = await service.store.children(f"top{depth}")
            events = await service.store.read_from(child.id)
            (nested_call,) = calls_of(events, "subagent")
            block = result_of(events, nested_call.data["callId"]).data["message"]["content"][0]
            if depth == 1:
                assert block["isError"] is True
                assert "delegation depth 1" in block["content"][0]["text"]
                assert "subagentSessionId" not in nested_call.data
                assert await service.store.children(child.id) == []
            else:
                assert block.get("isError") is None
                assert block["content"][0]["text"] == "deepest"
                (grandchild,) = await service.store.children(child.id)
                assert grandchild.delegation_depth == 2
                assert grandchild.id == nested_call.data["subagentSessionId"]


async def test_invalid_arguments_start_no_child(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[("subagent", {"title": "no task"})]),
            ScriptedResponse(text="ok"),
        ]
    )
    async with SessionService(SessionStore(f"sqlite:///{tmp_path}/s.db"), strict=True) as service:
        top = await service.new("top")
        loop = AgentLoop(top, model, registry(SubagentTool(service)))
        assert (await loop.run_turn("go")).reason == "completed"
        await service.flush()
        events = await service.store.read_from("top")
        (call,) = calls_of(events, "subagent")
        assert "subagentSessionId" not in call.data
        block = result_of(events, call.data["callId"]).data["message"]["content"][0]
        assert block["isError"] is True and "'task' is a required property" in str(block)
        assert await service.store.children("top") == []


async def test_cancelling_the_parent_cancels_the_child(tmp_path: Path) -> None:
    started = asyncio.Event()
    slow = ScriptedModel([ScriptedResponse(text=" ".join(["word"] * 200), delay=0.05)])
    parent_model = ScriptedModel(
        [ScriptedResponse(tool_calls=[("subagent", {"task": "slow work"})])]
    )

    def on_child(child: Any, context: Any) -> None:
        child.subscribe(lambda e: started.set() if e.type == "assistant/chunk" else None)

    async with SessionService(SessionStore(f"sqlite:///{tmp_path}/s.db"), strict=True) as service:
        top = await service.new("top")
        tool = SubagentTool(service, model=slow, on_child=on_child)
        loop = AgentLoop(
            top, parent_model, registry(tool), checkpoint=service.checkpoint_for("top")
        )
        turn = asyncio.ensure_future(loop.run_turn("go"))
        await asyncio.wait_for(started.wait(), 30)
        loop.cancel()
        outcome = await asyncio.wait_for(turn, 30)
        assert outcome.reason == "aborted"
        await service.flush()
        events = await service.store.read_from("top")
        check_structure(events)
        (call,) = calls_of(events, "subagent")
        assert result_of(events, call.data["callId"]).data["error"]["code"] == "TOOL_CANCELLED"
        (child,) = await service.store.children("top")
        assert child.status == "aborted"
        child_events = await service.store.read_from(child.id)
        check_structure(child_events)
        assert child_events[-1].data["reason"] == {"kind": "aborted"}
        assert any(
            e.type == "assistant/message" and e.data.get("interrupted") for e in child_events
        )
        assert service.live_ids() == ["top"]


def run_until_killed(url: str, session_id: str, scenario: str = "in-child") -> None:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), url, session_id, scenario],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != f"READY {scenario}":
            proc.kill()
            raise AssertionError(f"child said {line!r}; stderr:\n{proc.communicate()[1]}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


@pytest.mark.slow
async def test_killed_mid_child_then_resumed_and_repaired(shared_db_url: str) -> None:
    run_until_killed(shared_db_url, "boss")
    async with SessionService(SessionStore(shared_db_url), strict=True) as service:
        store = service.store
        before = await store.read_from("boss")
        (call,) = calls_of(before, "subagent")
        child_id = call.data["subagentSessionId"]
        assert child_id == subagent_session_id("boss", call.data["callId"])
        (child,) = await store.children("boss")
        assert (child.id, child.status) == (child_id, "interrupted")  # its owner is gone
        assert [t.content for t in child.open_todos] == ["read the tests", "report"]
        child_before = await store.read_from(child_id)
        assert child_before[-1].type == "tool/call"  # flushed before the hanging tool ran
        # resuming the parent repairs it and re-runs nothing: the child is left as it was
        boss = await service.resume("boss")
        events = await store.read_from("boss")
        check_structure(events)
        repaired = result_of(events, call.data["callId"])
        assert repaired.data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
        assert events[-1].data["reason"] == {"kind": "interrupted"}
        assert await store.read_from(child_id) == child_before
        assert [t.content for t in boss.todos or []] == ["delegate the survey"]
        calls, results = call_ids(boss.derive_messages())
        assert calls == results
        # the child is repaired by the same repair, on its own
        loaded = await store.load(child_id)
        assert [e.type for e in loaded.closers] == ["tool/result", "step/end", "turn/end"]
        check_structure(loaded.events)
        (after,) = await store.children("boss")
        assert after.status == "interrupted"
        # the parent goes on: a new turn, no child re-run
        model = ScriptedModel([ScriptedResponse(text="Picking up where we were.")])
        loop = AgentLoop(boss, model, registry(SubagentTool(service)))
        assert (await loop.run_turn("carry on")).reason == "completed"
        await service.flush()
        assert [c.id for c in await store.children("boss")] == [child_id]
        assert await store.read_from(child_id) == list(loaded.events)


@pytest.mark.slow
async def test_killed_after_the_child_finished_resumes_without_rerunning_it(
    shared_db_url: str,
) -> None:
    run_until_killed(shared_db_url, "boss", "after-child")
    async with SessionService(SessionStore(shared_db_url), strict=True) as service:
        store = service.store
        before = await store.read_from("boss")
        assert before[-1].type == "tool/call"  # the child's answer never reached the parent's log
        child_id = before[-1].data["subagentSessionId"]
        (child,) = await store.children("boss")
        assert (child.id, child.status) == (child_id, "completed")
        child_log = await store.read_from(child_id)
        boss = await service.resume("boss")
        events = await store.read_from("boss")
        check_structure(events)
        repaired = result_of(events, before[-1].data["callId"])
        assert repaired.data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
        assert await store.read_from(child_id) == child_log  # not re-run, not repaired
        assert (await store.load(child_id)).closers == ()
        assert [c.status for c in await store.children("boss")] == ["completed"]
        assert [t.content for t in boss.todos or []] == ["delegate the survey"]


async def test_a_loop_task_cancelled_mid_stream_ends_aborted(tmp_path: Path) -> None:
    """Cancelling the task that runs a turn (not `AgentLoop.cancel`) while the model streams
    ends the turn ``aborted`` and re-raises the cancel (the stream's pending step is stopped
    before the stream is closed)."""
    streaming = asyncio.Event()
    model = ScriptedModel([ScriptedResponse(text=" ".join(["word"] * 200), delay=0.05)])
    async with SessionService(SessionStore(f"sqlite:///{tmp_path}/s.db"), strict=True) as service:
        top = await service.new("top")
        top.subscribe(lambda e: streaming.set() if e.type == "assistant/chunk" else None)
        loop = AgentLoop(top, model, registry(), checkpoint=service.checkpoint_for("top"))
        turn = asyncio.ensure_future(loop.run_turn("go"))
        await asyncio.wait_for(streaming.wait(), 30)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
        await service.flush()
        events = await service.store.read_from("top")
        check_structure(events)
        assert events[-1].data["reason"] == {"kind": "aborted"}


def test_child_ids_are_derived_from_the_call() -> None:
    assert subagent_session_id("p", "call_7") == "p/subagent/call_7"
    long_parent = "x" * 195
    derived = subagent_session_id(long_parent, "call_7")
    assert derived == subagent_session_id(long_parent, "call_7")  # deterministic
    assert derived.startswith("x" * 150 + "/subagent/") and len(derived) == 150 + 10 + 32
    assert derived != subagent_session_id(long_parent, "call_8")
    controls = subagent_session_id("p", "call\n7")
    assert controls.startswith("p/subagent/") and "\n" not in controls


async def test_refusals_without_a_child(tmp_path: Path) -> None:
    """No owning session, no model, a child session that exists already (a reused call id):
    each is an error result, and nothing runs."""
    async with SessionService(SessionStore(f"sqlite:///{tmp_path}/s.db"), strict=True) as service:
        tools = registry(SubagentTool(service))
        top = await service.new("top")
        args = {"task": "t", "title": " \x00 "}
        no_session = await tools.execute("subagent", args, ToolContext(session=None, call_id="c"))
        assert no_session.is_error and "owning agent session" in no_session.text_content
        no_model = await tools.execute("subagent", args, ToolContext(session=top, call_id="c"))
        assert no_model.is_error and "no model" in no_model.text_content
        model = ScriptedModel([ScriptedResponse(text="done")])
        context = ToolContext(session=top, call_id="c", model=model)
        first = await tools.execute("subagent", args, context)
        assert first.text_content == "done" and not first.is_error
        (child,) = await service.store.children("top")
        assert child.title == "t"  # a blank title falls back to the task
        again = await tools.execute("subagent", args, context)
        assert again.is_error and "exists already: not re-run" in again.text_content
        assert len(model.calls) == 1
