"""Compaction through the store: on every backend, `SessionService.compact` and
`prune_tool_results` store their events in one append, a checkpoint follows, and a session
resumed from that checkpoint sees the compacted history; the same through the sync API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from todo_sessions import (
    CompactionError,
    SessionService,
    SessionStore,
    SyncSessionService,
    verify_session,
)
from todo_sessions.core.compaction import PLAN_HEADING
from todo_sessions.core.verify import verify_events
from todo_sessions.harness import AgentLoop, ScriptedModel, ScriptedResponse
from todo_sessions.harness.tools import TodoWriteTool, ToolContext, ToolRegistry, ToolResult

PLAN = {
    "todos": [{"content": "read", "status": "completed"}, {"content": "fix", "status": "pending"}]
}


class Reader:
    name = "read"
    description = "reads"
    parameters: dict[str, Any] = {"type": "object"}

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult.text("file text " * 40)


def tools() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(TodoWriteTool())
    registry.register(Reader())
    return registry


def script(turns: int) -> list[ScriptedResponse]:
    responses = []
    for _ in range(turns):
        responses.append(ScriptedResponse(tool_calls=[("todo_write", PLAN), ("read", {})]))
        responses.append(ScriptedResponse(text="read it"))
    return responses


async def test_compaction_is_stored_and_a_resume_from_its_checkpoint_sees_it(
    shared_db_url: str,
) -> None:
    async with SessionService(SessionStore(shared_db_url), flush_interval=None) as service:
        session = await service.new("comp")
        loop = AgentLoop(
            session, ScriptedModel(script(3)), tools(), checkpoint=service.checkpoint_for("comp")
        )
        for n in range(3):
            await loop.run_turn(f"turn {n}")
        before_seq = session.next_seq
        before = list(session.derive_messages())
        result = await service.compact("comp", "Read the files three times.")
        assert service.pending("comp") == 0
        assert result.start_seq == before_seq and result.end_seq == before_seq + 3
        after = list(session.derive_messages())
        assert after[0].content[0].text == "Read the files three times."  # type: ignore[union-attr]
        assert after[0].content[1].text.startswith(PLAN_HEADING)  # type: ignore[union-attr]
        assert after[1:] == before[-5:]  # the last turn: prompt, calls, two results, answer
        store = service.store
        assert await store.derive_messages("comp") == after
        assert await store.derive_messages("comp", upto_seq=before_seq) == before
        assert [c.seq for c in await store.checkpoints("comp")][-1] == session.next_seq

        with pytest.raises(CompactionError) as refused:
            calls = session.checkpoint_state().surface.seqs[2]  # the message with the calls
            await service.compact("comp", "again", end_seq=calls)
        assert refused.value.reason == "cuts-call"
        assert session.next_seq == before_seq + 4 and service.pending("comp") == 0

    async with SessionService(SessionStore(shared_db_url), flush_interval=None) as service:
        resumed = await service.store.resume_state("comp")
        assert resumed.from_checkpoint == before_seq + 4
        assert resumed.state.surface.messages() == after
        session = await service.resume("comp")
        assert list(session.derive_messages()) == after
        assert session.todos is not None and [t.content for t in session.todos] == ["read", "fix"]
        # go on: one more turn, then prune every result but the latest
        loop = AgentLoop(
            session, ScriptedModel(script(1)), tools(), checkpoint=service.checkpoint_for("comp")
        )
        await loop.run_turn("turn 3")
        with pytest.raises(CompactionError, match="open turn"):
            await service.prune_tool_results("comp", keep_last=1)
        session.append("turn/start", {"turn": 5})
        pruned = await service.prune_tool_results("comp", keep_last=1)
        session.append("turn/end", {"turn": 5, "reason": {"kind": "completed"}})
        await service.flush("comp")
        assert [p.call_id for p in pruned.pruned] == ["call_5_1", "call_5_2", "call_1_1"]
        events = await service.store.read_from("comp")
        assert verify_events(events) == []
        # every checkpoint, before and after the compaction, is what a fold recomputes
        checkpoints = [c.seq for c in await service.store.checkpoints("comp")]
        assert any(seq <= before_seq for seq in checkpoints)
        assert any(seq > before_seq + 4 for seq in checkpoints)
        assert await verify_session(service.store, "comp") == []
        assert len(events) == session.next_seq
        messages = await service.store.derive_messages("comp")
        assert messages == list(session.derive_messages())
        texts = [m.content[0].content[0].text for m in messages if m.source.kind == "tool"]  # type: ignore[union-attr]
        assert texts[:-1] == ["[tool result pruned to save context]"] * (len(texts) - 1)
        assert texts[-1].startswith("file text")


def test_the_sync_api_compacts_and_prunes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sync.db'}"
    with SyncSessionService(url, flush_interval=None) as service:
        session = service.new("sync")
        session.append("turn/start", {"turn": 1})
        for n in range(2):
            session.append(
                "user/message",
                {
                    "id": f"u{n}",
                    "role": "user",
                    "content": [{"type": "text", "text": f"q{n}"}],
                    "source": {"kind": "user"},
                },
                surface_op="append",
            )
        result = service.compact("sync", "asked once")
        assert result.replaced == (1,)
        assert service.prune_tool_results("sync").pruned == ()  # no tool results
        service.close("sync")
        messages = service.store.derive_messages("sync")
        assert [m.id for m in messages] == [f"sync:c{result.message_seq}", "u1"]
