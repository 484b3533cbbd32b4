"""The viewer's endpoints alone: each is a module-level function that reads the app's
settings from ``request.app.state``, so it runs on a plain Starlette app (or on a bare
request) whose state is set by hand, without `create_app`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx2")

from factories import header, turn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import BaseRoute, Route
from starlette.testclient import TestClient

from todo_sessions import SessionStore, SyncSessionStore
from todo_sessions.web.endpoints.fork import api_fork
from todo_sessions.web.endpoints.listing import api_sessions
from todo_sessions.web.endpoints.session import api_message, api_state

SESSION = "/api/sessions/{session_id:path}"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/alone.db"
    with SyncSessionStore(url) as store:
        for name in ("first", "second"):
            store.create(header(name, title=f"the {name}"))
            store.append(name, turn(0, text=f"hello from {name}"))
    return url


def hand_built(url: str, routes: list[BaseRoute], **settings: object) -> Starlette:
    """A plain Starlette app with only ``routes``; its state set here, not by `create_app`."""
    store = SessionStore(url)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with store:
            yield

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.store = store
    for name, value in settings.items():
        setattr(app.state, name, value)
    return app


@pytest.fixture
def client(url: str) -> Iterator[TestClient]:
    routes: list[BaseRoute] = [
        Route("/api/sessions", api_sessions),
        Route(f"{SESSION}/state", api_state),
    ]
    with TestClient(hand_built(url, routes)) as client:
        yield client


def test_the_list_and_the_state_answer_on_an_app_of_their_own(client: TestClient, url: str) -> None:
    listed = client.get("/api/sessions", params={"limit": 1}).json()
    assert [s["id"] for s in listed["sessions"]] == ["second"]
    assert listed["next"] == "second"
    rest = client.get(listed["nextUrl"]).json()
    assert [s["id"] for s in rest["sessions"]] == ["first"]
    state = client.get("/api/sessions/first/state", params={"at": 2}).json()
    with SyncSessionStore(url) as store:
        todos = store.current_todos("first", upto_seq=2)
    assert state["todos"] == [t.model_dump() for t in todos] and state["at"] == 2
    assert state["messages"][0]["content"][0]["text"] == "hello from first"
    # no error handlers wired: an unknown session is still Starlette's 404
    assert client.get("/api/sessions/nobody/state").status_code == 404


def test_message_limit_is_read_from_the_state(url: str) -> None:
    app = hand_built(url, [Route(f"{SESSION}/state", api_state)], message_limit=5)
    with TestClient(app) as client:
        state = client.get("/api/sessions/first/state").json()
    block = state["messages"][0]["content"][0]
    assert block["text"] == "hello" and block["cut"] == {"bytes": len("hello from first")}


def test_a_fork_needs_the_token_the_state_holds(url: str) -> None:
    route = Route(f"{SESSION}/fork", api_fork, methods=["POST"])
    same_site = {"Sec-Fetch-Site": "same-origin"}
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    # writes allowed but no token set: no token is accepted, an empty one neither
    app = hand_built(url, [route], allow_writes=True)
    with TestClient(app) as client:
        refused = client.post(
            "/api/sessions/first/fork", content="fork_token=", headers={**same_site, **form}
        )
        assert refused.status_code == 403
    app = hand_built(url, [route], allow_writes=True, fork_token="secret")
    with TestClient(app) as client:
        forked = client.post(
            "/api/sessions/first/fork?at=5",
            content="fork_token=secret",
            headers={**same_site, **form},
        )
    assert forked.status_code == 201 and forked.json()["inherited"] == 6


def test_an_endpoint_called_with_a_bare_request(url: str) -> None:
    app = Starlette()

    async def call() -> tuple[int, bytes]:
        async with SessionStore(url) as store:
            app.state.store = store
            scope = {
                "type": "http",
                "method": "GET",
                "path": "/api/sessions/second/message",
                "query_string": b"seq=1",
                "headers": [],
                "app": app,
                "path_params": {"session_id": "second"},
            }
            response = await api_message(Request(scope))
            return response.status_code, bytes(response.body)

    status, body = asyncio.run(call())
    assert status == 200 and body.decode() == "hello from second"


def test_the_viewer_imports_nothing_of_the_harness() -> None:
    harness = ("agent", "providers", "tools", "demo", "harness", "acp", "integrations")
    program = (
        "import sys, todo_sessions.web, todo_sessions.web.server\n"
        f"names = tuple('todo_sessions.' + n for n in {harness!r})\n"
        "print(sorted(m for m in sys.modules if m.startswith(names)))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "[]"
