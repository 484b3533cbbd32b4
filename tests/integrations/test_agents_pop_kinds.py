"""`pop_item` and `clear_session` of every kind of item the OpenAI Agents SDK stores (issue 39,
item 6): items that put nothing on the model's surface (reasoning, system and developer
messages, hosted tool calls, a malformed item) were refused by the retract's own check, and
such an item could never be popped. A popped item never comes back, in this session object or
a new one reading the log."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents")

from todo_sessions import SessionStore, derive_messages, verify_session
from todo_sessions.integrations.openai_agents import TodoSessionsSession

KINDS: dict[str, dict[str, Any]] = {
    "user": {"role": "user", "content": "hello"},
    "assistant": {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "hi", "annotations": []}],
    },
    "system": {"role": "system", "content": "be brief"},
    "developer": {"role": "developer", "content": [{"type": "input_text", "text": "be brief"}]},
    "assistant without content": {"role": "assistant", "content": []},
    "assistant with a number": {"role": "assistant", "content": 7},
    "reasoning": {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "thinking"}],
    },
    "encrypted reasoning": {
        "type": "reasoning",
        "id": "rs_2",
        "summary": [],
        "encrypted_content": "x",
    },
    "function call": {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    "function call without id": {"type": "function_call", "name": "f", "arguments": "{}"},
    "function output": {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    "computer call": {
        "type": "computer_call",
        "id": "cu_1",
        "call_id": "c2",
        "action": {"type": "click", "x": 1, "y": 2, "button": "left"},
        "pending_safety_checks": [],
        "status": "completed",
    },
    "computer output": {
        "type": "computer_call_output",
        "call_id": "c2",
        "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA=="},
    },
    "file search": {
        "type": "file_search_call",
        "id": "fs_1",
        "queries": ["q"],
        "status": "completed",
    },
    "web search": {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    "image generation": {"type": "image_generation_call", "id": "ig_1", "status": "completed"},
    "code interpreter": {
        "type": "code_interpreter_call",
        "id": "ci_1",
        "code": "1",
        "container_id": "c",
        "outputs": [],
        "status": "completed",
    },
    "local shell": {
        "type": "local_shell_call",
        "id": "ls_1",
        "call_id": "c3",
        "action": {"type": "exec", "command": ["ls"], "env": {}},
        "status": "completed",
    },
    "local shell output": {"type": "local_shell_call_output", "id": "c3", "output": "a"},
    "mcp call": {
        "type": "mcp_call",
        "id": "mcp_1",
        "server_label": "s",
        "name": "t",
        "arguments": "{}",
    },
    "mcp approval": {
        "type": "mcp_approval_request",
        "id": "ma",
        "server_label": "s",
        "name": "t",
        "arguments": "{}",
    },
    "item reference": {"type": "item_reference", "id": "msg_0"},
    "unknown kind": {"type": "something_new", "payload": [1, 2]},
}

UNPAIRED = ("function call", "function output")
"""A call without its output (or the reverse) is a problem of the items themselves."""

BEFORE: list[list[dict[str, Any]]] = [
    [],
    [{"role": "user", "content": "first"}],
    [{"role": "user", "content": "first"}, {"role": "assistant", "content": "answer"}],
]


async def _healthy(store: SessionStore, session_id: str) -> None:
    problems = await verify_session(store, session_id)
    assert [p for p in problems if not p.warning] == []  # an SDK session's last turn stays open


@pytest.mark.parametrize("kind", list(KINDS))
async def test_every_item_kind_pops_and_clears(store: SessionStore, kind: str) -> None:
    item = KINDS[kind]
    for n, before in enumerate(BEFORE):
        sid = f"pop-{n}"
        session = TodoSessionsSession(sid, store)
        await session.add_items([*before, item])
        assert await session.pop_item() == item
        assert await session.get_items() == before
        # a new object, folding the log from the start, agrees: the item never comes back
        assert await TodoSessionsSession(sid, store).get_items() == before
        await session.add_items([{"role": "user", "content": "later"}])
        assert await session.pop_item() == {"role": "user", "content": "later"}
        assert await session.get_items() == before
        shown = derive_messages((await store.read(sid)).events)
        assert len(shown) == len(before)  # the popped items are not in the history
        await session.add_items([item, item])
        await session.clear_session()
        assert await session.get_items() == []
        assert await TodoSessionsSession(sid, store).get_items() == []
        assert derive_messages((await store.read(sid)).events) == []
        if kind not in UNPAIRED:
            await _healthy(store, sid)


async def test_a_mixed_history_pops_back_to_empty(store: SessionStore) -> None:
    items = list(KINDS.values())
    session = TodoSessionsSession("mixed", store)
    await session.add_items(items)
    for n in reversed(range(len(items))):
        assert await session.pop_item() == items[n]
        assert await TodoSessionsSession("mixed", store).get_items() == items[:n]
    assert await session.pop_item() is None
    assert await session.get_items() == []
    assert derive_messages((await store.read("mixed")).events) == []
    await _healthy(store, "mixed")
