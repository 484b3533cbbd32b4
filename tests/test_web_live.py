"""Live updates without a browser: a client of the event stream of ``todo-sessions serve``
sees the events another process appends, and the state API then shows the new todo list."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx2")

import httpx2 as httpx
from test_web import DEMO, append_turn_elsewhere, make_demo, serving

from todo_sessions import SyncSessionStore
from todo_sessions.web.messages import messages_json

pytestmark = pytest.mark.slow


def read_events(lines: Any, until_seq: int) -> list[dict[str, Any]]:
    """The ``append`` events of a server-sent event stream, up to seq ``until_seq``."""
    events: list[dict[str, Any]] = []
    kind = None
    for line in lines:
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: ") and kind == "append":
            events.append(json.loads(line.removeprefix("data: ")))
            if events[-1]["seq"] >= until_seq:
                return events
        elif line == "":
            kind = None
    raise AssertionError(f"the stream ended before seq {until_seq}: {events}")


def test_a_stream_client_sees_another_writers_events(tmp_path: Any) -> None:
    see_another_writer(f"sqlite:///{tmp_path / 'live.db'}")


@pytest.mark.postgres
def test_a_stream_client_sees_another_writers_events_on_postgresql(fresh_pg_url: str) -> None:
    see_another_writer(fresh_pg_url)  # woken by LISTEN/NOTIFY


def see_another_writer(url: str) -> None:
    make_demo(url)
    with SyncSessionStore(url) as store:
        start = store.summary(DEMO).next_seq
    with serving(url) as base, httpx.Client(base_url=base, timeout=30) as client:
        events_url = f"/api/sessions/{DEMO}/events"
        with client.stream("GET", events_url, params={"from": start}) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            lines = stream.iter_lines()
            assert next(lines) == ": following"  # subscribed before the other writer starts
            last = append_turn_elsewhere(url, DEMO, 3, "from <i>another</i> process")
            events = read_events(lines, last)
        assert [e["seq"] for e in events] == list(range(start, last + 1))
        assert [e["type"] for e in events] == [
            "turn/start",
            "user/message",
            "todo/write",
            "turn/end",
        ]
        assert f'data-seq="{start + 2}"' in events[2]["html"]
        assert "from &lt;i&gt;another&lt;/i&gt; process" in events[1]["html"]

        state = client.get(f"/api/sessions/{DEMO}/state").json()
        assert state["at"] == last
        assert state["todos"] == [
            {"content": "from <i>another</i> process", "status": "in_progress"},
            {"content": "and then", "status": "pending"},
        ]
        assert state["todoWriteSeq"] == start + 2
        with SyncSessionStore(url) as store:
            assert state["messages"] == messages_json(store.derive_messages(DEMO))


def test_a_stream_from_an_old_seq_replays_then_follows(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'replay.db'}"
    make_demo(url)
    with serving(url) as base, httpx.Client(base_url=base, timeout=30) as client:
        with client.stream("GET", f"/api/sessions/{DEMO}/events", params={"from": 130}) as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": following"
            events = read_events(lines, 137)
        assert [e["seq"] for e in events] == list(range(130, 138))


def test_a_reconnecting_client_goes_on_after_its_last_event(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'resume.db'}"
    make_demo(url)
    with serving(url) as base, httpx.Client(base_url=base, timeout=30) as client:
        headers = {"Last-Event-ID": "134"}  # what EventSource sends when it reconnects
        events_url = f"/api/sessions/{DEMO}/events"
        with client.stream("GET", events_url, params={"from": 0}, headers=headers) as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": following"
            events = read_events(lines, 137)
        assert [e["seq"] for e in events] == [135, 136, 137]
        for odd in ("²", "-1", "1e3", "99999999999999999999999", "x"):  # not a seq we sent
            headers = {"Last-Event-ID": odd.encode()}  # bytes: "²" is not ASCII
            with client.stream("GET", events_url, params={"from": 136}, headers=headers) as stream:
                assert stream.status_code == 200, odd  # ignored, never a 500
                lines = stream.iter_lines()
                assert next(lines) == ": following"
                assert [e["seq"] for e in read_events(lines, 137)] == [136, 137]
