"""Out-of-range and unencodable values on the viewer's and the ACP agent's entry points
(issue 39, item 7; the command line's are in test_cli_bounds.py): every query parameter of
every route, every session id an ACP client names. An integer past 64 bits, a NUL, a broken
UTF-8 sequence is a 4xx (never a 500: nothing reaches the driver) or ``invalid_params`` /
``resource_not_found``, never an internal error."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx2")

from factories import header, turn
from starlette.testclient import TestClient

from todo_sessions import SessionService, SessionStore, SyncSessionStore
from todo_sessions.web.app import create_app

HOSTILE = [
    "\x00",
    "a\x00b",
    str(2**63),
    str(-(2**63) - 1),
    "9" * 40,
    "-1",
    "1e3",
    "٣",
    "%ED%A0%80",
    "%ff",
    "x" * 5000,
]
"""Values as a client sends them (``%`` sequences left for the server to decode)."""
PARAMS = [
    "q",
    "id",
    "cwd",
    "tag",
    "text",
    "parent",
    "open_todos",
    "since",
    "until",
    "limit",
    "before",
    "at",
    "seq",
    "html",
]
ROUTES = [
    "/",
    "/open",
    "/search",
    "/api/search",
    "/api/sessions",
    "/api/sessions/s1/state",
    "/api/sessions/s1/timeline",
    "/api/sessions/s1/export",
    "/api/sessions/s1/message",
    "/sessions/s1",
]
FILTERS = [
    (route, name)
    for route in ("/", "/api/sessions", "/search", "/api/search")
    for name in ("cwd", "tag", "text", "parent")
    if "search" not in route or name in ("cwd", "tag")  # what a search is narrowed by
]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    url = f"sqlite:///{tmp_path_factory.mktemp('entry')}/web.db"
    with SyncSessionStore(url) as store:
        store.create(header("s1", cwd="/repo"))
        store.append("s1", turn(0, text="needle"))
    app = create_app(url, allowed_hosts=["testserver"])
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def _query(name: str, value: str, route: str) -> str:
    encoded = value if "%" in value else quote(value, safe="")
    extra = "&q=needle" if route.endswith("search") and name != "q" else ""
    return f"{route}?{name}={encoded}{extra}"


@pytest.mark.parametrize("route", ROUTES)
def test_no_parameter_value_reaches_the_driver(client: TestClient, route: str) -> None:
    for name in PARAMS:
        for value in HOSTILE:
            answer = client.get(_query(name, value, route))
            assert answer.status_code < 500, (route, name, value, answer.text[:200])
    for value in HOSTILE:  # the session id of the path
        path = route.replace("s1", quote(value, safe="") if "%" not in value else value)
        if path != route:
            assert client.get(path).status_code < 500, (path, value)
            forked = client.post(f"/api/sessions/{quote(value, safe='')}/fork")
            assert forked.status_code < 500, value


@pytest.mark.parametrize(("route", "name"), FILTERS)
def test_a_nul_in_a_filter_is_a_400(client: TestClient, route: str, name: str) -> None:
    answer = client.get(_query(name, "a\x00b", route))
    assert answer.status_code == 400, answer.text[:200]
    assert "NUL" in answer.text


@pytest.mark.parametrize("route", ["/api/search", "/api/sessions/s1/state", "/sessions/s1"])
@pytest.mark.parametrize("name", ["before", "at", "limit", "seq"])
def test_an_integer_past_64_bits_is_a_400(client: TestClient, route: str, name: str) -> None:
    answer = client.get(_query(name, str(2**63), route))
    assert answer.status_code in (200, 400), answer.text[:200]  # 200: a parameter not read
    if answer.status_code == 400:
        problem = f"{name} must be <= {2**63 - 1}"
        assert problem in answer.text or html.escape(problem) in answer.text


# -- the ACP agent --------------------------------------------------------------------------------

acp = pytest.importorskip("acp")

BAD_IDS = ["a\x00b", "\ud800", "x" * 5000, "", " ", "\x7f"]
BAD_CWDS = ["/a\x00", "/\udc80"]


async def test_acp_requests_naming_bad_ids_or_cwds_are_client_errors(tmp_path: Path) -> None:
    from todo_sessions.acp.agent import TodoSessionsAgent

    service = SessionService(SessionStore(f"sqlite:///{tmp_path}/acp.db"))
    agent = TodoSessionsAgent(service)
    try:
        created = (await agent.new_session(cwd="/tmp")).session_id
        calls: list[tuple[str, Any]] = []
        for sid in BAD_IDS:
            calls += [
                ("load", lambda s=sid: agent.load_session(cwd="/tmp", session_id=s)),
                ("resume", lambda s=sid: agent.resume_session(cwd="/tmp", session_id=s)),
                ("close", lambda s=sid: agent.close_session(session_id=s)),
                ("delete", lambda s=sid: agent.delete_session(session_id=s)),
                ("fork", lambda s=sid: agent.fork_session(cwd="/tmp", session_id=s)),
                ("prompt", lambda s=sid: agent.prompt(session_id=s, prompt=[])),
            ]
        calls.append(("list", lambda: agent.list_sessions(cwd="/" * 5000)))
        for cwd in BAD_CWDS:
            calls += [
                ("new", lambda c=cwd: agent.new_session(cwd=c)),
                ("list", lambda c=cwd: agent.list_sessions(cwd=c)),
                ("load", lambda c=cwd: agent.load_session(cwd=c, session_id=created)),
                ("fork", lambda c=cwd: agent.fork_session(cwd=c, session_id=created)),
            ]
        for name, call in calls:
            with pytest.raises(acp.RequestError) as caught:
                await call()
            assert caught.value.code in (-32602, -32002), (name, caught.value)
    finally:
        await agent.aclose()
        await service.aclose()
