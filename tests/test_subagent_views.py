"""Subagent sessions in the viewer (nested under the parent's tool call, with a link) and in
the command line's ``show`` (marked on the call, listed under the heading, and on the child).

See docs/format.md, "Subagent sessions".
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from test_subagent import Failing, Routed, parent_script, registry, survey_script

from todo_sessions import SessionService, SessionStore
from todo_sessions.cli import main
from todo_sessions.harness.loop import AgentLoop
from todo_sessions.harness.subagent import SubagentTool, subagent_session_id

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from todo_sessions.web import create_app

SURVEY = subagent_session_id("boss", "call_1_2")
FIX = subagent_session_id("boss", "call_2_1")


async def _build(url: str) -> None:
    model = Routed(
        {
            "fix the build": parent_script(),
            "survey the tests": survey_script(),
            "try the fix": Failing(),
        }
    )
    async with SessionService(SessionStore(url)) as service:
        boss = await service.new("boss", cwd="/srv", title="The boss")
        loop = AgentLoop(boss, model, registry(SubagentTool(service)))
        assert (await loop.run_turn("fix the build")).reason == "completed"
        await service.fork("boss", child_id="boss-fork")  # a fork: never a subagent


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('sub') / 'sub.db'}"
    asyncio.run(_build(url))
    yield url


def test_the_children_are_the_two_subagents(built: str) -> None:
    async def children() -> list[tuple[str, str]]:
        async with SessionStore(built) as store:
            return [(c.id, c.status) for c in await store.children("boss")]

    assert asyncio.run(children()) == [(SURVEY, "completed"), (FIX, "failed")]


def test_the_viewer_nests_each_child_under_its_call(built: str) -> None:
    with TestClient(create_app(built, allowed_hosts=["testserver"])) as client:
        page = client.get("/sessions/boss")
        assert page.status_code == 200
        for html in (page.text, client.get("/api/sessions/boss/timeline").json()["html"]):
            calls = [c.split("</li>")[0] for c in html.split('<li class="ev call"')[1:]]
            nested = [c for c in calls if 'class="subagent"' in c]
            assert len(nested) == 2
            survey, fix = nested
            assert f'href="/sessions/{quote(SURVEY, safe="")}"' in survey
            assert ">Survey</a>" in survey and "st-completed" in survey
            assert "1 open todo<" in survey
            assert f'href="/sessions/{quote(FIX, safe="")}"' in fix
            assert ">try the fix</a>" in fix and "st-failed" in fix
            assert len(calls) == 3  # and the todo_write call has nothing nested
            assert all("todo_write" in c for c in calls if c not in nested)
        child = client.get(f"/sessions/{quote(SURVEY, safe='')}")
        assert child.status_code == 200
        assert '<a id="parent" href="/sessions/boss">boss</a>' in child.text
        assert "started by" in child.text
        fork = client.get("/sessions/boss-fork").text
        assert "forked from" in fork


def test_show_marks_the_calls_the_children_and_the_child(built: str) -> None:
    def show(*args: str) -> str:
        out = CliRunner().invoke(main, ["--db", built, "show", *args], terminal_width=200)
        assert out.exit_code == 0, out.output
        return out.output

    text = show("boss")
    assert f"⤷ subagent session {SURVEY}" in text
    assert f"⤷ subagent session {FIX}" in text
    assert f"subagent {SURVEY}  completed  Survey  1 open todo\n" in text
    assert f"subagent {FIX}  failed  try the fix" in text
    child = show(SURVEY)
    assert "subagent session of boss (delegation depth 1, origin subagent)" in child
    assert "forked from" not in child
    assert "⤷" not in child
    assert "forked from boss (" in show("boss-fork")
    shown = json.loads(show("boss", "--json"))
    assert [(c["id"], c["status"]) for c in shown["subagents"]] == [
        (SURVEY, "completed"),
        (FIX, "failed"),
    ]
    assert shown["subagents"][0]["openTodos"] == [{"content": "report", "status": "in_progress"}]
    assert json.loads(show(SURVEY, "--json"))["subagents"] == []


def test_the_tool_call_records_the_child_id(built: str, tmp_path: Path) -> None:
    async def calls() -> list[str]:
        async with SessionStore(built) as store:
            events = await store.read_from("boss")
        return [
            e.data["subagentSessionId"]
            for e in events
            if e.type == "tool/call" and e.data["name"] == "subagent"
        ]

    assert asyncio.run(calls()) == [SURVEY, FIX]
