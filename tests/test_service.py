"""`SessionService`: write-behind persistence at checkpoints, resume, ownership.

See docs/design.md, "Write-behind service".
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from factories import T0

from todo_sessions import (
    EventsNotStoredError,
    SeqConflictError,
    SessionEvent,
    SessionExistsError,
    SessionService,
    SessionStore,
    StoreBusyError,
)
from todo_sessions.core.structure import check_structure
from todo_sessions.harness.loop import AgentLoop
from todo_sessions.harness.model import ModelDelta, ScriptedModel, ScriptedResponse
from todo_sessions.harness.tools import TodoWriteTool, ToolContext, ToolRegistry, ToolResult

AT_FLUSH_POINTS: dict[str, Any] = {"flush_interval": None, "retain_events": True}
"""These tests pin the flush points themselves: no timer flush, and the session keeps its
events so they can be compared with the stored log (tests/test_long_sessions.py covers the
timer and the lean default)."""


class StoredSpy:
    """A tool that records the type of the last *stored* event when its body runs."""

    name = "spy"
    description = "records what is stored"
    parameters: dict[str, Any] = {"type": "object"}

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.seen: list[str] = []

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        assert context.session is not None
        stored = await self.store.read_from(context.session.id)
        self.seen.append(stored[-1].type)
        return ToolResult.text("ok")


class SpyModel(ScriptedModel):
    """A scripted model that records the last stored event type at each call."""

    store: SessionStore | None = None
    seen: list[str]

    async def stream(
        self, messages: Sequence[Any], tools: Sequence[Any]
    ) -> AsyncIterator[ModelDelta]:
        assert self.store is not None
        stored = await self.store.read_from("svc")
        self.seen.append(stored[-1].type)
        async for delta in super().stream(messages, tools):
            yield delta


async def test_checkpoints_flush_before_model_calls_and_before_tools(db_url: str) -> None:
    async with SessionService(SessionStore(db_url), strict=True, **AT_FLUSH_POINTS) as service:
        session = await service.new("svc", cwd="/repo")
        spy = StoredSpy(service.store)
        tools = ToolRegistry()
        tools.register(spy)
        tools.register(TodoWriteTool())
        model = SpyModel(
            [
                ScriptedResponse(tool_calls=[("todo_write", {"todos": []}), ("spy", {})]),
                ScriptedResponse(text="done"),
            ]
        )
        model.store, model.seen = service.store, []
        loop = AgentLoop(session, model, tools, checkpoint=service.checkpoint_for("svc"))
        await loop.run_turn("go")
        assert model.seen == ["step/start", "step/start"]
        assert spy.seen == ["tool/call"]
        assert service.pending("svc") == 0  # flushed at turn/end
        assert await service.store.read_from("svc") == list(session.events)


async def test_new_resume_and_one_live_owner(shared_db_url: str) -> None:
    async with SessionService(SessionStore(shared_db_url), **AT_FLUSH_POINTS) as service:
        session = await service.new("owned")
        with pytest.raises(SessionExistsError):
            await service.new("owned")
        session.append("turn/start", {"turn": 1})
        with pytest.raises(SessionExistsError):
            await service.resume("owned")
        await service.close("owned")
        resumed = await service.resume("owned")  # the open turn is repaired on resume
        stored = await service.store.read_from("owned")
        assert [e.type for e in stored] == ["turn/start", "turn/end"]
        assert stored[-1].data["reason"] == {"kind": "interrupted"}
        assert resumed.next_seq == 2 and resumed.open_turn is None
        assert list(resumed.events) == []  # resumed from the stored state, not the log


async def test_failed_flush_is_retried_at_the_next_checkpoint(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = SessionStore(db_url)
    real_append = store.append
    failures = [StoreBusyError("database is locked (simulated)") for _ in range(3)]

    async def flaky_append(session_id: str, events: Any, **kw: Any) -> str:
        if failures:
            raise failures.pop()
        return await real_append(session_id, events, **kw)

    store.append = flaky_append  # type: ignore[method-assign]
    async with SessionService(store, **AT_FLUSH_POINTS) as service:
        session = await service.new("flaky")
        session.append("turn/start", {"turn": 1})
        with caplog.at_level(logging.WARNING, logger="todo_sessions.service"):
            await service.checkpoint("flaky", "before-model")
        assert "stay queued" in caplog.text
        assert isinstance(service.last_flush_error, StoreBusyError)
        assert service.pending("flaky") == 1
        session.append("todo/write", {"todos": []})
        await service.checkpoint("flaky", "turn-end")
        assert service.pending("flaky") == 0 and service.last_flush_error is None
        assert [e.type for e in await store.read_from("flaky")] == ["turn/start", "todo/write"]


async def test_another_writer_is_a_conflict_not_a_silent_merge(shared_db_url: str) -> None:
    async with SessionService(SessionStore(shared_db_url), **AT_FLUSH_POINTS) as service:
        session = await service.new("contested")
        session.append("turn/start", {"turn": 1})
        await service.flush("contested")
        async with SessionStore(shared_db_url) as intruder:
            await intruder.append("contested", [SessionEvent("todo/write", 1, T0, {"todos": []})])
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        with pytest.raises(SeqConflictError):
            await service.checkpoint("contested", "turn-end")
        assert service.pending("contested") == 1  # kept, not dropped
        service._live.pop("contested")  # the owner gives up; nothing else to drain


async def test_close_drains_and_fork_owns_the_child(shared_db_url: str) -> None:
    async with SessionService(
        SessionStore(shared_db_url), strict=True, **AT_FLUSH_POINTS
    ) as service:
        session = await service.new("parent")
        loop = AgentLoop(session, ScriptedModel([ScriptedResponse(text="hi")]), ToolRegistry())
        await loop.run_turn("hello")  # no checkpoint wired: everything is still queued
        assert service.pending("parent") == len(session.events)
        child = await service.fork("parent", child_id="child")
        assert child.header.parent_session == "parent"
        assert child.events[-1].type == "session/end-seed"
        check_structure(list(child.events))
    async with SessionStore(shared_db_url) as store:
        assert {s.id for s in await store.list()} == {"parent", "child"}


class Effect:
    """A tool with a side effect we can count."""

    name = "deploy"
    description = "deploys"
    parameters: dict[str, Any] = {"type": "object"}

    def __init__(self) -> None:
        self.runs = 0

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        self.runs += 1
        return ToolResult.text("deployed")


async def test_a_tool_never_runs_when_its_call_cannot_be_stored(tmp_path: Any) -> None:
    store = SessionStore(f"sqlite:///{tmp_path}/s.db")
    real_append = store.append
    broken = {"on": False}

    async def append(session_id: str, events: Any, **kw: Any) -> str:
        if broken["on"]:
            raise StoreBusyError("database is locked (simulated, for good)")
        return await real_append(session_id, events, **kw)

    store.append = append  # type: ignore[method-assign]
    effect = Effect()
    async with SessionService(store, strict=True, **AT_FLUSH_POINTS) as service:
        session = await service.new("effects")
        tools = ToolRegistry()
        tools.register(effect)
        model = ScriptedModel([ScriptedResponse(tool_calls=[("deploy", {}), ("deploy", {})])])

        async def checkpoint(name: str) -> None:
            broken["on"] = name == "before-tool"  # the store fails exactly there
            await service.checkpoint("effects", name)

        outcome = await AgentLoop(session, model, tools, checkpoint=checkpoint).run_turn("ship")
        assert effect.runs == 0
        assert outcome.reason == "error"
        results = [e for e in session.events if e.type == "tool/result"]
        assert [r.data["error"]["code"] for r in results] == ["TOOL_NOT_STARTED"] * 2
        assert "could not be recorded durably" in results[0].data_json
        check_structure(list(session.events))
        broken["on"] = False
    async with SessionStore(f"sqlite:///{tmp_path}/s.db") as reopened:
        stored = await reopened.read_from("effects")
    assert stored[-1].data["reason"]["kind"] == "error" and len(stored) == len(session.events)


async def test_a_cancelled_flush_does_not_wedge_the_session(tmp_path: Any) -> None:
    async with SessionService(
        SessionStore(f"sqlite:///{tmp_path}/s.db"), **AT_FLUSH_POINTS
    ) as service:
        session = await service.new("big")
        session.append("turn/start", {"turn": 1})
        for i in range(3000):
            session.append("request/context", {"i": i, "pad": "x" * 200})
        flushing = asyncio.create_task(service.flush("big"))
        await asyncio.sleep(0)  # the append is under way in the writer thread
        flushing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await flushing
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await service.flush("big")  # no SeqConflictError: the cancelled write was recorded
        assert service.pending("big") == 0
        assert await service.store.count("big") == len(session.events)


async def test_aclose_drains_every_session_even_when_one_fails(shared_db_url: str) -> None:
    service = SessionService(SessionStore(shared_db_url), **AT_FLUSH_POINTS)
    first = await service.new("first")
    first.append("turn/start", {"turn": 1})
    await service.flush("first")
    async with SessionStore(shared_db_url) as intruder:
        await intruder.append("first", [SessionEvent("request/context", 1, T0, {"x": 1})])
    first.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    second = await service.new("second")
    second.append("turn/start", {"turn": 1})
    with pytest.raises(ExceptionGroup) as info:
        await service.aclose()
    [error] = info.value.exceptions
    assert isinstance(error, EventsNotStoredError)
    assert isinstance(error.reason, SeqConflictError)  # final: saved at once, not retried
    assert (error.session_id, error.count) == ("first", 1)
    saved = (await asyncio.to_thread(Path(error.path).read_text)).splitlines()
    assert len(saved) == 2 and json.loads(saved[1])["type"] == "turn/end"
    async with SessionStore(shared_db_url) as store:
        assert await store.count("second") == 1  # drained despite the failure before it
