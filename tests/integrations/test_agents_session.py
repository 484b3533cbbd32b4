"""The OpenAI Agents SDK `Session` on the log: the behaviours of the SDK's own session tests
(tests/memory/test_session.py of openai-agents-python) on every backend, a scripted three-turn
`Runner.run` resumed in a new process next to the SDK's `SQLiteSession`, and what pop_item and
clear_session leave in the log."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import RunConfig, Runner, SQLiteSession
from agents.memory import Session, SessionSettings
from agents_script import DONE, PROMPTS, SCRIPT, ScriptedModel, agent, text
from conftest import _empty_pg

from todo_sessions import InvalidEventError, SessionStore, derive_messages
from todo_sessions.core.todos import current_todos
from todo_sessions.integrations.openai_agents import TodoSessionsSession

HERE = Path(__file__).parent


@pytest.fixture
async def session(store: SessionStore) -> TodoSessionsSession:
    return TodoSessionsSession("chat-1", store)


def contents(items: list[Any]) -> list[Any]:
    return [item.get("content") for item in items]


async def test_is_an_agents_session(session: TodoSessionsSession) -> None:
    assert isinstance(session, Session)
    assert isinstance(session.session_settings, SessionSettings)
    assert session.session_settings.limit is None
    limited = TodoSessionsSession("x", session.store, session_settings=SessionSettings(limit=5))
    assert limited.session_settings.limit == 5


async def test_add_get_clear(session: TodoSessionsSession) -> None:
    items: list[Any] = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
    ]
    await session.add_items(items)
    assert await session.get_items() == items
    await session.clear_session()
    assert await session.get_items() == []
    # nothing was deleted: the log keeps both items and the clear
    log = await session.store.read("chat-1")
    assert [e.data for e in log.events if e.type == "agents/item"] == items
    assert [e.data["reason"] for e in log.events if e.type == "agents/retract"] == ["clear"]
    assert derive_messages(log.events) == []


async def test_pop_item(session: TodoSessionsSession) -> None:
    assert await session.pop_item() is None
    items: list[Any] = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
        {"role": "user", "content": "How are you?"},
    ]
    await session.add_items(items)
    assert await session.pop_item() == items[2]
    assert contents(await session.get_items()) == ["Hello", "Hi there!"]
    messages = derive_messages((await session.store.read("chat-1")).events)
    assert [m.content[0].text for m in messages] == ["Hello", "Hi there!"]  # type: ignore[union-attr]
    assert await session.pop_item() == items[1]
    await session.add_items([{"role": "user", "content": "again"}])
    assert await session.pop_item() == {"role": "user", "content": "again"}
    assert await session.pop_item() == items[0]
    assert await session.pop_item() is None
    assert await session.get_items() == []
    log = await session.store.read("chat-1")
    assert derive_messages(log.events) == []
    assert sum(e.type == "agents/item" for e in log.events) == 4


async def test_pop_and_limits_stay_in_their_session(store: SessionStore) -> None:
    one, two = TodoSessionsSession("s1", store), TodoSessionsSession("s2", store)
    await one.add_items([{"role": "user", "content": "Session 1 message"}])
    await two.add_items([{"role": "user", "content": f"Session 2 message {i}"} for i in (1, 2)])
    assert (await two.pop_item() or {}).get("content") == "Session 2 message 2"
    assert contents(await one.get_items()) == ["Session 1 message"]
    assert contents(await two.get_items()) == ["Session 2 message 1"]


async def test_get_items_with_limit(session: TodoSessionsSession) -> None:
    items: list[Any] = []
    for i in (1, 2, 3):
        items += [{"role": "user", "content": f"Message {i}"}]
        items += [{"role": "assistant", "content": f"Response {i}"}]
    await session.add_items(items)
    assert await session.get_items() == items
    assert contents(await session.get_items(limit=2)) == ["Message 3", "Response 3"]
    assert await session.get_items(limit=4) == items[2:]
    assert await session.get_items(limit=10) == items
    assert await session.get_items(limit=0) == []
    limited = TodoSessionsSession(
        "chat-1", session.store, session_settings=SessionSettings(limit=3)
    )
    assert await limited.get_items() == items[-3:]
    assert await limited.get_items(limit=2) == items[-2:]


async def test_unicode_special_characters_and_whole_items(session: TodoSessionsSession) -> None:
    items: list[Any] = [
        {"role": "user", "content": "こんにちは"},
        {"role": "assistant", "content": "😊👍"},
        {"role": "user", "content": "O'Reilly \"; DROP TABLE sessions;--"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hm"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"role": "system", "content": "be brief", "extra": {"nested": [1, 2.5, None, True]}},
    ]
    await session.add_items(items)
    assert await session.get_items() == items


async def test_concurrent_adds_lose_nothing(store: SessionStore) -> None:
    sessions = [TodoSessionsSession("busy", store) for _ in range(5)]
    await asyncio.gather(
        *(
            s.add_items([{"role": "user", "content": f"Message {i}"}])
            for i, s in enumerate(sessions)
        )
    )
    got = contents(await sessions[0].get_items())
    assert sorted(got) == sorted(f"Message {i}" for i in range(5))
    assert len(got) == 5


@pytest.mark.parametrize(
    "bad", [["not an object"], [{"role": "user", "content": float("nan")}], [{"b": b"x"}]]
)
async def test_bad_items_are_typed_errors_and_write_nothing(
    session: TodoSessionsSession, bad: list[Any]
) -> None:
    await session.add_items([{"role": "user", "content": "kept"}])
    with pytest.raises(InvalidEventError):
        await session.add_items([{"role": "user", "content": "lost with the batch"}, *bad])
    assert contents(await session.get_items()) == ["kept"]


async def test_store_passed_in_stays_open_url_store_is_closed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    async with SessionStore(url) as store:
        async with TodoSessionsSession("a", store) as session:
            await session.add_items([{"role": "user", "content": "hi"}])
        assert len(await store.list()) == 1  # still open
    own = TodoSessionsSession("a", url)
    assert contents(await own.get_items()) == ["hi"]
    await own.close()
    with pytest.raises(Exception, match="closed"):
        await own.get_items()


async def _scripted_runs(session: Any, model: ScriptedModel, config: RunConfig | None = None):
    outputs = []
    for prompt in PROMPTS[:2]:
        result = await Runner.run(agent(model), prompt, session=session, run_config=config)
        outputs.append(result.final_output)
    return outputs


@pytest.fixture(params=["sqlite-file", "postgres"])
async def resume_url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Two backends only: the new process costs seconds of SDK import (PgBouncer and the
    in-memory database are covered by the other tests)."""
    if request.param == "sqlite-file":
        return f"sqlite:///{tmp_path}/resume.db"
    url = request.getfixturevalue("pg_database_url")
    await _empty_pg(url)
    return url


async def test_runner_three_turns_resumed_in_a_new_process(resume_url: str, tmp_path: Path) -> None:
    shared_db_url = resume_url
    ours_model, theirs_model = ScriptedModel(SCRIPT[:5]), ScriptedModel(SCRIPT[:5])
    async with SessionStore(shared_db_url) as store:
        ours = TodoSessionsSession("coder-1", store)
        theirs = SQLiteSession("coder-1", tmp_path / "sdk.db")
        assert await _scripted_runs(ours, ours_model) == ["Planned.", "Tests pass."]
        assert await _scripted_runs(theirs, theirs_model) == ["Planned.", "Tests pass."]
        # the model saw the same history through both sessions
        assert ours_model.inputs == theirs_model.inputs
        history = await ours.get_items()
        assert history == await theirs.get_items()
        todos = current_todos((await store.read("coder-1")).events) or []
        assert [t.model_dump() for t in todos] == DONE  # the last todo_write of turn 2
    env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "agents_child.py"),
        shared_db_url,
        "coder-1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(child.communicate(), 120)
    assert child.returncode == 0, err.decode()
    seen = json.loads(out)
    assert seen["output"] == "All done: the parser is fixed."
    # the resumed process sent the whole stored history, then the new prompt
    prompt = {"content": PROMPTS[2], "role": "user"}
    assert seen["input"] == [*json.loads(json.dumps(history)), prompt]
    theirs_model.responses = SCRIPT[5:]
    await Runner.run(agent(theirs_model), PROMPTS[2], session=theirs)
    assert theirs_model.inputs[-1] == seen["input"]

    async with SessionStore(shared_db_url) as store:
        ours = TodoSessionsSession("coder-1", store)
        assert await ours.get_items() == await theirs.get_items()
        total = len(await ours.get_items())
        for _ in range(2):  # pop_item and clear_session as the SDK's own session does them
            assert await ours.pop_item() == await theirs.pop_item()
            assert await ours.get_items() == await theirs.get_items()
        messages = derive_messages((await store.read("coder-1")).events)
        assert len(messages) < len(derive_messages((await store.read("coder-1")).events[:-2]))
        await ours.clear_session()
        await theirs.clear_session()
        assert await ours.get_items() == await theirs.get_items() == []
        log = await store.read("coder-1")
        assert derive_messages(log.events) == []
        assert sum(e.type == "agents/item" for e in log.events) == total  # the log keeps all
        assert [t.model_dump() for t in current_todos(log.events) or []] == DONE
    theirs.close()


async def test_sdk_runner_behaviours(session: TodoSessionsSession) -> None:
    """Runner + session behaviours of the SDK's tests: history is prepended; list input is
    appended; a session_input_callback filters; RunConfig.session_settings limits."""
    model = ScriptedModel([[text("San Francisco", 1)], [text("California", 2)]])
    coder = agent(model)
    await Runner.run(coder, "What city is the Golden Gate Bridge in?", session=session)
    await Runner.run(coder, "What state is it in?", session=session)
    assert len(model.inputs[1]) == 3
    other = TodoSessionsSession("chat-2", session.store)
    await other.add_items([{"role": "user", "content": f"Turn {i}"} for i in range(10)])
    model.responses = [[text("Got it", 3)], [text("name", 4)], [text("x", 5)]]
    config = RunConfig(session_settings=SessionSettings(limit=2))
    await Runner.run(coder, "New question", session=other, run_config=config)
    assert [i["content"] for i in model.inputs[-1]] == ["Turn 8", "Turn 9", "New question"]
    third = TodoSessionsSession("chat-3", session.store)
    history: list[Any] = [
        {"role": "user", "content": "Hello there."},
        {"role": "assistant", "content": "Hi, I'm here to assist you."},
    ]
    await third.add_items(history)
    await Runner.run(coder, [{"role": "user", "content": "Test message"}], session=third)
    assert model.inputs[-1] == [*history, {"role": "user", "content": "Test message"}]
    fourth = TodoSessionsSession("chat-4", session.store)
    await fourth.add_items(history)

    def users_only(old: list[Any], new: list[Any]) -> list[Any]:
        return [item for item in old if item["role"] == "user"] + new

    await Runner.run(
        coder,
        [{"role": "user", "content": "What your name?"}],
        session=fourth,
        run_config=RunConfig(session_input_callback=users_only),
    )
    assert model.inputs[-1] == [history[0], {"role": "user", "content": "What your name?"}]


def test_run_sync_in_another_thread(tmp_path: Path) -> None:
    """``Runner.run_sync`` from a thread with its own loop, on a session opened from a URL."""
    url = f"sqlite:///{tmp_path}/sync.db"

    def run() -> list[Any]:
        model = ScriptedModel([[text("Hello", 1)], [text("I remember", 2)]])
        session = TodoSessionsSession("sync", url)
        loop = asyncio.new_event_loop()  # as the SDK's own tests run it
        asyncio.set_event_loop(loop)
        try:
            Runner.run_sync(agent(model), "Hi there", session=session)
            Runner.run_sync(agent(model), "Remember?", session=session)
            loop.run_until_complete(session.close())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
        return model.inputs

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        inputs = pool.submit(run).result()
    assert next(i.get("content") for i in inputs[1]) == "Hi there"
    assert len(inputs[1]) == 3
