"""The 2026 session lifecycle over real stdio, with the official Python SDK as the client.

``todo-sessions acp`` runs as a subprocess; the client is the SDK's own JSON-RPC
`Connection` with the SDK's client router. Every request is built from the schema's request
model and every answer validated by the schema's response model (`acp.utils.request_model`);
every ``session/update`` on the wire is validated by `SessionNotification` and must
serialise back to exactly what was sent. The raw wire is recorded in arrival order by a
connection observer.

(``session/delete`` goes through the same connection: the Python SDK's client has no
method for it, although its schema has the request.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypeVar

import acp
import pytest
from acp.client.router import build_client_router
from acp.connection import Connection, StreamEvent
from acp.schema import (
    ClientCapabilities,
    CloseSessionRequest,
    CloseSessionResponse,
    DeleteSessionRequest,
    DeleteSessionResponse,
    ForkSessionRequest,
    ForkSessionResponse,
    InitializeRequest,
    InitializeResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    NewSessionRequest,
    NewSessionResponse,
    PlanCapabilities,
    PromptRequest,
    PromptResponse,
    ResumeSessionRequest,
    ResumeSessionResponse,
    SessionNotification,
)
from acp.utils import request_model, serialize_params
from logs import LogBuilder
from pydantic import BaseModel

from todo_sessions import SessionHeader, SessionNotFoundError, SessionService, SessionStore
from todo_sessions.acp.agent import LIST_PAGE_SIZE
from todo_sessions.acp.listing import encode_cursor
from todo_sessions.acp.usage import tokens_used

pytestmark = pytest.mark.slow

M = TypeVar("M", bound=BaseModel)

NOT_FOUND = -32002
INVALID_PARAMS = -32602
INVALID_REQUEST = -32600


class Client:
    """A client that records the wire; answers no permission requests."""

    def __init__(self) -> None:
        self.wire: list[dict[str, Any]] = []

    def observe(self, event: StreamEvent) -> None:
        if event.direction.value == "incoming":
            self.wire.append(event.message)

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
        raise acp.RequestError.method_not_found("session/request_permission")

    def updates(self, session_id: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for m in self.wire[since:]
            if m.get("method") == "session/update"
            and (session_id is None or m["params"]["sessionId"] == session_id)
        ]


class Agent:
    """``todo-sessions acp`` over stdio, driven through the SDK's connection."""

    def __init__(self, conn: Connection, client: Client) -> None:
        self.conn = conn
        self.client = client

    async def call(self, method: str, request: BaseModel, response: type[M]) -> M:
        return await request_model(self.conn, method, request, response)

    async def raw(self, method: str, params: Any) -> Any:
        return await self.conn.send_request(method, params)

    async def error(self, method: str, params: Any) -> acp.RequestError:
        with pytest.raises(acp.RequestError) as info:
            await self.conn.send_request(method, params)
        return info.value

    async def initialize(self, **capabilities: Any) -> InitializeResponse:
        request = InitializeRequest(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(**capabilities),
        )
        return await self.call("initialize", request, InitializeResponse)

    async def list(self, cwd: str | None = None, cursor: str | None = None) -> ListSessionsResponse:
        request = ListSessionsRequest(cwd=cwd, cursor=cursor)
        return await self.call("session/list", request, ListSessionsResponse)

    async def list_all(self, cwd: str | None = None) -> list[list[Any]]:
        pages, cursor = [], None
        while True:
            page = await self.list(cwd, cursor)
            pages.append(page.sessions)
            cursor = page.next_cursor
            if cursor is None:
                return pages

    async def prompt(self, session_id: str, text: str) -> PromptResponse:
        request = PromptRequest(session_id=session_id, prompt=[acp.text_block(text)])
        return await self.call("session/prompt", request, PromptResponse)


def agent_env(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "TODO_SESSIONS_URL": url,
        "PYTHONPATH": os.pathsep.join(sys.path),
    }


@contextlib.asynccontextmanager
async def running_agent(url: str) -> AsyncIterator[Agent]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "todo_sessions",
        "acp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=agent_env(url),
        limit=50 * 1024 * 1024,
    )
    assert process.stdin is not None and process.stdout is not None
    client = Client()
    conn = Connection(
        build_client_router(client),  # type: ignore[arg-type]
        process.stdin,
        process.stdout,
        observers=[client.observe],
    )
    try:
        yield Agent(conn, client)
    finally:
        await conn.close()
        with contextlib.suppress(ProcessLookupError):
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 20)
        except TimeoutError:  # pragma: no cover - a hung agent
            process.kill()
            await process.wait()
            raise
    validate_wire(client.wire)


def validate_wire(wire: list[dict[str, Any]]) -> None:
    """Every notification is a valid `SessionNotification` that serialises back exactly."""
    for message in wire:
        if message.get("method") == "session/update":
            model = SessionNotification.model_validate(message["params"])
            assert serialize_params(model) == message["params"]


async def seed(
    store: SessionStore, session_id: str, cwd: str, *, title: str | None = None, text: str
) -> None:
    """A stored session of one completed turn whose prompt is ``text``."""
    log = LogBuilder()
    log.exchange(text, answer="done")
    await store.create(SessionHeader(id=session_id, created_at=1, cwd=cwd, title=title))
    await store.append(session_id, log.events)


# -- the whole flow ---------------------------------------------------------------------------


async def test_the_session_lifecycle_end_to_end(tmp_path: Path) -> None:
    """new → prompt → list (every page, the cwd filter, bad cursors) → close → resume (no
    replay) → prompt → fork → delete → list again, and bad params. On SQLite only: the
    bridge reads the store through its public API, whose backends have their own suites."""
    shared_db_url = f"sqlite:///{tmp_path}/flow.db"
    project, other = str(tmp_path / "project"), str(tmp_path / "other")
    many = LIST_PAGE_SIZE * 2 + 7  # three pages in the project, with the new session
    async with SessionStore(shared_db_url) as store:
        for n in range(many):
            title = f"stored {n}" if n % 2 else None
            await seed(store, f"p{n:03d}", project, title=title, text=f"task {n}\ndetails")
        for n in range(3):
            await seed(store, f"o{n}", other, text=f"elsewhere {n}")
        store_id = store.store_id

    async with running_agent(shared_db_url) as agent:
        init = await agent.initialize(plan=PlanCapabilities())
        caps = init.agent_capabilities
        assert caps is not None and caps.load_session
        sessions = caps.session_capabilities
        assert sessions is not None
        for name in ("list", "resume", "close", "delete", "fork"):
            assert getattr(sessions, name) is not None, name
        wired = agent.client.wire[-1]["result"]["agentCapabilities"]["sessionCapabilities"]
        assert set(wired) == {"list", "resume", "close", "delete", "fork"}

        # new → prompt: a client with the plan capability gets plan_update, never plan
        new = await agent.call(
            "session/new", NewSessionRequest(cwd=project, mcp_servers=[]), NewSessionResponse
        )
        sid = new.session_id
        assert (await agent.prompt(sid, "write the tests\nship it")).stop_reason == "end_turn"
        updates = agent.client.updates(sid)
        plans = [u["entries"] for u in updates if u["sessionUpdate"] == "plan"]
        items = [u["plan"] for u in updates if u["sessionUpdate"] == "plan_update"]
        assert plans == [] and items
        assert all(i["type"] == "items" and i["planId"] == "main" for i in items)
        assert updates[-1]["sessionUpdate"] == "usage_update"

        # list: every page, newest activity first, titles, _meta, the cwd filter
        pages = await agent.list_all()
        assert [len(p) for p in pages] == [LIST_PAGE_SIZE, LIST_PAGE_SIZE, 11]
        listed = [s for page in pages for s in page]
        async with SessionStore(shared_db_url) as store:
            expected = await store.list(limit=1000)
        assert [s.session_id for s in listed] == [s.id for s in expected]
        assert listed[0].session_id == sid and listed[0].title == "write the tests"
        by_id = {s.session_id: s for s in listed}
        assert by_id["p001"].title == "stored 1"
        assert by_id["p002"].title == "task 2"  # untitled: its first user message's first line
        assert by_id["p002"].cwd == project and by_id["p002"].updated_at is not None
        assert by_id["p002"].updated_at.endswith("Z")
        assert by_id["p002"].field_meta == {"tags": [], "eventCount": 7, "openTodos": False}
        assert by_id[sid].field_meta is not None and by_id[sid].field_meta["openTodos"] is False
        others = await agent.list_all(cwd=other)
        assert [[s.session_id for s in p] for p in others] == [["o2", "o1", "o0"]]

        # cursors: malformed, from another store, of the wrong type
        for bad in ("not a cursor", "eyJ2IjoxfQ", encode_cursor("another-store", 5, "p001")):
            error = await agent.error("session/list", {"cursor": bad})
            assert error.code == INVALID_PARAMS, bad
        assert (await agent.error("session/list", {"cursor": 5})).code == INVALID_PARAMS
        assert encode_cursor(store_id, 5, "p001") != "not a cursor"

        # close (idempotent) → resume without replay → prompt
        await agent.call("session/close", CloseSessionRequest(session_id=sid), CloseSessionResponse)
        await agent.call("session/close", CloseSessionRequest(session_id=sid), CloseSessionResponse)
        async with SessionStore(shared_db_url) as store:
            holder = (await store.lease_holders([sid])).get(sid)
            assert holder is None or not holder.live(int(time.time() * 1000))  # given back
            stored_before = await store.count(sid)
        mark = len(agent.client.wire)
        await agent.call(
            "session/resume",
            ResumeSessionRequest(session_id=sid, cwd=project, mcp_servers=[]),
            ResumeSessionResponse,
        )
        resumed = agent.client.updates(sid, since=mark)
        assert [u["sessionUpdate"] for u in resumed] == ["session_info_update"]
        assert resumed[0]["title"] == "write the tests"
        assert (await agent.prompt(sid, "one more")).stop_reason == "end_turn"

        # fork: the new session lists with its parent
        fork = await agent.call(
            "session/fork",
            ForkSessionRequest(session_id=sid, cwd=project, mcp_servers=[]),
            ForkSessionResponse,
        )
        assert fork.session_id != sid
        listed = [s for page in await agent.list_all(cwd=project) for s in page]
        forked = next(s for s in listed if s.session_id == fork.session_id)
        assert forked.field_meta is not None and forked.field_meta["parentSessionId"] == sid

        # delete the fork: then it is not found anywhere, and the list no longer has it
        await agent.call(
            "session/delete",
            DeleteSessionRequest(session_id=fork.session_id),
            DeleteSessionResponse,
        )
        load = {"sessionId": fork.session_id, "cwd": project, "mcpServers": []}
        assert (await agent.error("session/load", load)).code == NOT_FOUND
        assert (await agent.error("session/resume", load)).code == NOT_FOUND
        gone = {"sessionId": fork.session_id}
        assert (await agent.error("session/close", gone)).code == NOT_FOUND
        assert (await agent.error("session/delete", gone)).code == NOT_FOUND
        assert (await agent.error("session/fork", load)).code == NOT_FOUND
        prompt = {"sessionId": fork.session_id, "prompt": [{"type": "text", "text": "hi"}]}
        assert (await agent.error("session/prompt", prompt)).code == NOT_FOUND
        ids = [s.session_id for page in await agent.list_all() for s in page]
        assert fork.session_id not in ids and sid in ids and len(ids) == many + 4

        # bad params: wrong types, missing fields, a malformed id; the agent keeps serving
        assert (await agent.error("session/close", {"sessionId": 42})).code == INVALID_PARAMS
        assert (await agent.error("session/resume", {"sessionId": sid})).code == INVALID_PARAMS
        assert (await agent.error("session/delete", {})).code == INVALID_PARAMS
        assert (await agent.error("session/delete", [])).code == INVALID_PARAMS
        bad_id = {"sessionId": "x" * 300, "cwd": project}
        assert (await agent.error("session/resume", bad_id)).code == INVALID_PARAMS
        assert (await agent.raw("session/list", {"cwd": other}))["sessions"]

    async with SessionStore(shared_db_url) as store:
        assert await store.count(sid) > stored_before
        with pytest.raises(SessionNotFoundError):
            await store.summary(fork.session_id)


# -- session info and usage -------------------------------------------------------------------


async def test_info_usage_and_leases(tmp_path: Path) -> None:
    """``session/load`` ends with ``session_info_update`` and ``usage_update`` (equal to
    `SessionStore.usage`); a retitle by another process reaches the client while the session
    is open, and nothing after ``session/close``. Then leases: ``session/resume`` and
    ``session/delete`` of a session another live service holds are refused, naming the
    holder, and nothing is written. (One agent process for all of it: each start costs
    seconds of imports on a loaded CI machine.)"""
    url = f"sqlite:///{tmp_path}/info.db"
    log = LogBuilder()
    for turn, usage in enumerate(
        [
            {"input_tokens": 1200, "output_tokens": 300, "cache_read_input_tokens": 50},
            {"input_tokens": 1500, "output_tokens": 120},
        ]
    ):
        log.turn_start()
        log.user(f"question {turn}")
        if turn == 0:
            log.add("request/context", {"provider": "fake", "contextWindow": 200_000})
        log.step_start()
        message = {
            "id": log.new_id(),
            "role": "assistant",
            "content": [{"type": "text", "text": f"answer {turn}"}],
            "source": {"kind": "model", "provider": "fake", "model": "fake-1"},
        }
        data = {"turn": log.turn, "step": log.step, "message": message, "usage": usage}
        log.add("assistant/message", data, surface_op="append", source_event_seqs=())
        log.step_end()
        log.turn_end()
    async with SessionStore(url) as store:
        await store.create(SessionHeader(id="s", created_at=1, cwd=str(tmp_path), title="first"))
        await store.append("s", log.events)
        stored = await store.usage("s")

    async with running_agent(url) as agent:
        await agent.initialize()
        await agent.call(
            "session/load",
            LoadSessionRequest(session_id="s", cwd=str(tmp_path), mcp_servers=[]),
            LoadSessionResponse,
        )
        updates = agent.client.updates("s")
        assert [u["sessionUpdate"] for u in updates[-2:]] == ["session_info_update", "usage_update"]
        assert updates[-2]["title"] == "first" and updates[-2]["_meta"] == {"tags": []}
        usage = updates[-1]
        assert usage["used"] == tokens_used(stored.total) == 1200 + 300 + 50 + 1500 + 120
        assert usage["size"] == 200_000 and "cost" not in usage

        # another process (this test's) retitles and tags the open session
        mark = len(agent.client.wire)
        async with SessionStore(url) as other:
            await other.update_meta("s", title="renamed elsewhere")
            await other.update_meta("s", add_tags=["urgent"])
        infos: list[dict[str, Any]] = []
        for _ in range(200):
            infos = [
                u
                for u in agent.client.updates("s", since=mark)
                if u["sessionUpdate"] == "session_info_update"
            ]
            if len(infos) >= 2:
                break
            await asyncio.sleep(0.05)
        assert [i["title"] for i in infos] == ["renamed elsewhere", "renamed elsewhere"]
        assert infos[-1]["_meta"] == {"tags": ["urgent"]}

        # closed: no further updates for it
        await agent.call("session/close", CloseSessionRequest(session_id="s"), CloseSessionResponse)
        mark = len(agent.client.wire)
        async with SessionStore(url) as store:
            await store.update_meta("s", title="after close")
        await asyncio.sleep(0.6)  # three follow intervals: an update would have arrived
        assert agent.client.updates("s", since=mark) == []

        # leases: another live service holds a session
        async with SessionStore(url) as store:
            await seed(store, "held", str(tmp_path), text="mine")
            holder = SessionService(SessionStore(url), owner="editor-two")
            async with holder:
                await holder.resume("held")
                before = await store.read("held")
                leases_before = await store.lease_holders(["held"])
                params = {"sessionId": "held", "cwd": str(tmp_path), "mcpServers": []}
                refused = await agent.error("session/resume", params)
                assert refused.code == INVALID_REQUEST
                assert "editor-two" in str(refused) and "editor-two" in refused.data["holder"]
                prompt = {"sessionId": "held", "prompt": [{"type": "text", "text": "hi"}]}
                assert (await agent.error("session/prompt", prompt)).code == INVALID_REQUEST
                deleted = await agent.error("session/delete", {"sessionId": "held"})
                assert deleted.code == INVALID_REQUEST and "editor-two" in str(deleted)
                after = await store.read("held")
                assert after.events == before.events and after.revision == before.revision
                assert await store.lease_holders(["held"]) == leases_before

                await holder.close("held")  # given back: now the agent may have it
                await agent.raw("session/resume", params)
                assert (await agent.raw("session/prompt", prompt))["stopReason"] == "end_turn"
                await agent.raw("session/delete", {"sessionId": "held"})
            assert [s.id for s in await store.list()] == ["s"]
