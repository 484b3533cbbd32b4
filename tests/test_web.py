"""The web viewer over HTTP (Starlette's TestClient): pages and the JSON API agree with the
library's projections at any seq, the list's filters agree with `SessionStore.list`, unknown
ids are 404 and bad parameters 400, stored text is escaped, and the server refuses writes
unless told otherwise."""

from __future__ import annotations

import asyncio
import html
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote_plus, urlencode, urlsplit

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx2")

from factories import T0, chunks, header, todo_write, turn, user_message
from markupsafe import escape
from starlette.testclient import TestClient

from todo_sessions import SessionEvent, SessionStore, SyncSessionStore, export_lines
from todo_sessions.harness.demo import run_demo
from todo_sessions.web import create_app
from todo_sessions.web.bounds import TIMELINE_PAGE
from todo_sessions.web.messages import messages_json

DEMO = "demo-web"
HOSTILE_TEXT = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'
HOSTILE_ID = 'evil/"><script>alert(2)</script>?x=1#y'


# -- helpers shared with the browser and live tests -------------------------------------------


def make_demo(url: str, session_id: str = DEMO) -> None:
    async def main() -> None:
        async with SessionStore(url) as store:
            await run_demo(store, session_id=session_id)

    asyncio.run(main())


def todo_pane(page: str) -> list[tuple[str, str, str]]:
    """(content, status, change) of each item of the todo pane in ``page``."""
    pane = page.split('id="todos"', 1)[1] if 'id="todos"' in page else page
    pane = pane.split('id="messages"', 1)[0]
    items = re.findall(
        r'<li class="todo [^"]*" data-status="([^"]*)" data-change="([^"]*)">'
        r'.*?<span class="content">(.*?)</span>',
        pane,
        re.S,
    )
    return [(html.unescape(content), status, change) for status, change, content in items]


def message_roles(page: str) -> list[str]:
    pane = page.split('id="messages"', 1)[1] if 'id="messages"' in page else page
    return re.findall(r'<li class="msg role-[^"]*" data-role="([^"]*)">', pane)


def current(todos: Any) -> list[tuple[str, str]] | None:
    return None if todos is None else [(t.content, t.status) for t in todos]


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('web') / 'web.db'}"
    make_demo(url)
    with SyncSessionStore(url) as store:
        # hostile text everywhere a page shows stored text
        store.create(header(HOSTILE_ID, title=HOSTILE_TEXT, cwd="/" + HOSTILE_TEXT))
        events = turn(0, text=HOSTILE_TEXT)
        events[2] = todo_write(2, (HOSTILE_TEXT, "in_progress"))
        store.append(HOSTILE_ID, events)
        # an interrupted turn that crash repair closes (a started call without a result)
        store.create(header("crashed", title="crashed"))
        call = {"type": "tool-call", "id": "c1", "name": "rm_rf", "arguments": "{}"}
        store.append(
            "crashed",
            [
                SessionEvent("turn/start", 0, T0, {"turn": 1}),
                user_message(1, "go"),
                SessionEvent("step/start", 2, T0, {"turn": 1, "step": 1}),
                SessionEvent(
                    "assistant/message",
                    3,
                    T0,
                    {
                        "turn": 1,
                        "step": 1,
                        "message": {
                            "id": "a1",
                            "role": "assistant",
                            "content": [call],
                            "source": {"kind": "model", "provider": "p", "model": "m"},
                        },
                    },
                    surface_op="append",
                ),
                SessionEvent(
                    "tool/call",
                    4,
                    T0,
                    {"turn": 1, "step": 1, "callId": "c1", "name": "rm_rf", "arguments": "{}"},
                ),
            ],
        )
        store.load("crashed")
        # a long one: more than two timeline pages
        store.create(header("long", title="long"))
        events = []
        for number in range(1, 80):
            events += turn(len(events), number, text=f"message {number}")
        store.append("long", events)
    return url


@pytest.fixture(scope="module")
def client(db: str) -> Iterator[TestClient]:
    with TestClient(create_app(db, allowed_hosts=["testserver"])) as client:
        yield client


@pytest.fixture(scope="module")
def store(db: str) -> Iterator[SyncSessionStore]:
    with SyncSessionStore(db) as store:
        yield store


# -- the session list -----------------------------------------------------------------------------


def test_the_list_shows_every_session_with_counts(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert f'<tr data-id="{DEMO}">' in page.text
    assert "Fix mean() in calc.py" in page.text and "/demo/repo" in page.text
    body = client.get("/api/sessions").json()
    by_id = {s["id"]: s for s in body["sessions"]}
    assert set(by_id) == {DEMO, HOSTILE_ID, "crashed", "long"}
    assert by_id[DEMO]["turns"] == 2
    assert by_id["long"]["events"] == 79 * 6 and by_id["long"]["turns"] == 79
    assert body["next"] is None


def test_the_list_pages_with_before(client: TestClient, store: SyncSessionStore) -> None:
    everything = [s.id for s in store.list()]
    first = client.get("/api/sessions?limit=2").json()
    assert [s["id"] for s in first["sessions"]] == everything[:2]
    assert first["next"] == everything[1]
    second = client.get("/api/sessions", params={"limit": 2, "before": first["next"]}).json()
    assert [s["id"] for s in second["sessions"]] == everything[2:4]
    page = client.get("/?limit=2").text
    link = re.search(r'id="next-page" href="([^"]*)"', page)
    assert link is not None
    follow = client.get(html.unescape(link.group(1))).text
    assert all(f'<tr data-id="{escape(i)}">' in follow for i in everything[2:4])


def test_bad_list_parameters_are_400_or_404(client: TestClient) -> None:
    assert client.get("/api/sessions?limit=0").status_code == 400
    assert client.get("/api/sessions?limit=abc").status_code == 400
    assert client.get("/api/sessions?before=nobody").status_code == 404


# -- the session page at a seq --------------------------------------------------------------------


@pytest.mark.parametrize("at", [0, 1, 16, 17, 36, 40, 70, 100, 137])
def test_the_panes_equal_the_projections_at_that_seq(
    client: TestClient, store: SyncSessionStore, at: int
) -> None:
    todos = store.current_todos(DEMO, upto_seq=at)
    messages = messages_json(store.derive_messages(DEMO, upto_seq=at))

    page = client.get(f"/sessions/{DEMO}", params={"at": at})
    assert page.status_code == 200
    assert f'data-at="{at}"' in page.text
    shown = [(c, s) for c, s, change in todo_pane(page.text) if change != "removed"]
    assert shown == (current(todos) or [])
    assert message_roles(page.text) == [m["role"] for m in messages]

    state = client.get(f"/api/sessions/{DEMO}/state", params={"at": at}).json()
    assert state["at"] == at
    assert state["messages"] == messages
    assert state["todos"] == (None if todos is None else [t.model_dump() for t in todos])

    fragments = client.get(f"/api/sessions/{DEMO}/state", params={"at": at, "html": 1}).json()
    assert "messages" not in fragments and fragments["messageCount"] == len(messages)
    panes = '<div id="todos">' + fragments["html"]["todos"]
    panes += '<div id="messages">' + fragments["html"]["messages"]
    listed = [(c, s) for c, s, change in todo_pane(panes) if change != "removed"]
    assert listed == (current(todos) or [])
    assert message_roles(panes) == [m["role"] for m in messages]


def test_the_todo_pane_marks_what_the_last_write_changed(
    client: TestClient, store: SyncSessionStore
) -> None:
    writes = [e.seq for e in store.read_from(DEMO) if e.type == "todo/write"]
    state = client.get(f"/api/sessions/{DEMO}/state", params={"at": writes[1] + 1}).json()
    assert state["todoWriteSeq"] == writes[1]
    assert state["previousTodoWriteSeq"] == writes[0]
    changes = {c["content"]: (c["change"], c["before"]) for c in state["todoChanges"]}
    assert changes == {
        "Read calc.py and its test": ("status", "in_progress"),
        "Fix the off-by-one in mean()": ("status", "pending"),
        "Run the tests": ("same", None),
    }
    first = client.get(f"/api/sessions/{DEMO}/state", params={"at": writes[0]}).json()
    assert {c["change"] for c in first["todoChanges"]} == {"added"}
    assert first["previousTodoWriteSeq"] is None
    # turn 2 replaces the list: the three old items are removed, two are new
    later = client.get(f"/api/sessions/{DEMO}/state", params={"at": writes[4]}).json()
    kinds = sorted(c["change"] for c in later["todoChanges"])
    assert kinds == ["added", "added", "removed", "removed", "removed"]
    page = client.get(f"/sessions/{DEMO}", params={"at": writes[4]}).text
    assert [change for _, _, change in todo_pane(page)].count("removed") == 3


def test_a_write_far_back_is_found_with_its_changes(tmp_path: Path) -> None:
    """The viewer asks the store for the latest write (one indexed row), however far back it
    is: 20,000 streamed chunks after it change nothing."""
    url = f"sqlite:///{tmp_path / 'far.db'}"
    far = 20_000
    with SyncSessionStore(url) as store:
        store.create(header("far"))
        events = [todo_write(0, ("old", "pending")), *chunks(1, 9)]
        events += [todo_write(10, ("plan", "in_progress"), ("old", "completed"))]
        events += chunks(11, far)
        store.append("far", events)
        end = store.summary("far").next_seq - 1
        assert store.latest_event("far", "todo/write") == events[10]
        assert store.latest_event("far", "todo/write", upto_seq=9) == events[0]
    with TestClient(create_app(url, allowed_hosts=["testserver"])) as client:
        state = client.get("/api/sessions/far/state", params={"at": end}).json()
        assert state["todos"] == [
            {"content": "plan", "status": "in_progress"},
            {"content": "old", "status": "completed"},
        ]
        assert (state["todoWriteSeq"], state["previousTodoWriteSeq"]) == (10, 0)
        changes = [(c["content"], c["change"]) for c in state["todoChanges"]]
        assert changes == [("plan", "added"), ("old", "status")]
        first = client.get("/api/sessions/far/state", params={"at": 9}).json()
        assert (first["todoWriteSeq"], first["previousTodoWriteSeq"]) == (0, None)
        page = client.get("/sessions/far").text
        assert "Written at seq" in page and "are marked" in page
        assert [(c, s, ch) for c, s, ch in todo_pane(page)] == [
            ("plan", "in_progress", "added"),
            ("old", "completed", "status"),
        ]


def test_no_seq_means_the_end_and_past_the_end_is_clamped(
    client: TestClient, store: SyncSessionStore
) -> None:
    last = store.summary(DEMO).next_seq - 1
    assert f'data-at="{last}"' in client.get(f"/sessions/{DEMO}").text
    assert client.get(f"/api/sessions/{DEMO}/state?at=99999").json()["at"] == last
    assert client.get(f"/api/sessions/{DEMO}/state?at=-1").status_code == 400
    assert client.get(f"/api/sessions/{DEMO}/state?at=x").status_code == 400


def test_the_timeline_shows_turns_messages_calls_and_results(client: TestClient) -> None:
    page = client.get(f"/sessions/{DEMO}", params={"at": 20}).text
    assert '<li class="ev turn" data-seq="0"' in page
    assert '<li class="ev user" data-seq="1"' in page
    assert '<li class="ev assistant" data-seq="14"' in page
    assert '<details class="reasoning"><summary>reasoning</summary>' in page  # collapsed
    assert '<li class="ev call" data-seq="18"' in page and "→ read_file" in page
    assert '<li class="ev result" data-seq="19"' in page and "← read_file" in page
    assert '<li class="ev todo" data-seq="16"' in page
    assert '<li class="ev chunk minor" data-seq="3"' in page  # chunks: hidden unless asked for
    assert 'class="ev step" data-seq="2"' in page


def test_repairs_are_marked(client: TestClient) -> None:
    page = client.get("/sessions/crashed").text
    assert re.search(r'<li class="ev result repair" data-seq="5"', page)
    assert "TOOL_OUTCOME_UNKNOWN" in page
    assert re.search(r'<li class="ev end repair" data-seq="7"', page)
    assert "turn 1 ended: interrupted" in page


def test_a_long_session_pages_its_timeline(client: TestClient) -> None:
    page = client.get("/sessions/long", params={"at": TIMELINE_PAGE + 50}).text
    seqs = [int(s) for s in re.findall(r'<li class="ev [^"]*" data-seq="(\d+)"', page)]
    assert seqs == list(range(TIMELINE_PAGE, 2 * TIMELINE_PAGE))
    assert f'data-goto="{TIMELINE_PAGE - 1}"' in page  # earlier events
    later = re.search(r'<p class="pager later"( hidden)?>', page)
    assert later is not None and later.group(1) is None
    body = client.get("/api/sessions/long/timeline", params={"at": 10}).json()
    assert body["start"] == 0
    assert re.findall(r'data-seq="(\d+)"', body["html"])[:3] == ["0", "1", "2"]


def test_a_long_history_shows_its_last_messages(
    client: TestClient, store: SyncSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from todo_sessions.web import bounds

    monkeypatch.setattr(bounds, "MESSAGES_SHOWN", 10)
    every = messages_json(store.derive_messages("long"))
    assert len(every) == 79
    # the pane shows the messages of one window: the timeline page that holds ``at``
    last = 79 * 6 - 1
    start = last - last % TIMELINE_PAGE
    in_window = [e.seq for e in store.read_from("long", start) if e.surface_op is not None]
    messages = every[-len(in_window) :]  # nothing replaced: the history's last messages
    assert len(messages) > 10
    page = client.get("/sessions/long").text
    assert f"{len(messages)} messages as of seq {last}" in page
    assert "the last 10 are shown" in page and f"from the events of seqs {start} to {last}" in page
    assert f'<ol class="messages" start="{len(messages) - 9}">' in page
    shown = re.findall(
        r'<li class="msg role-user" data-role="user">\s*<div class="role">user'
        r'</div>\s*<pre class="block text">(.*?)</pre>',
        page,
    )
    assert shown == [m["content"][0]["text"] for m in messages[-10:]]
    state = client.get("/api/sessions/long/state").json()
    assert state["messages"] == messages and state["messageSeqs"] == in_window
    assert state["window"] == {"start": start, "end": last, "previous": start - 1, "next": None}
    # paging back: the window before holds the messages before
    earlier = client.get("/api/sessions/long/state", params={"at": start - 1}).json()
    assert earlier["window"]["start"] == start - TIMELINE_PAGE
    assert earlier["window"]["next"] == min(start + TIMELINE_PAGE - 1, last)
    assert earlier["messages"] == every[: -len(messages)][-len(earlier["messages"]) :]


def test_unknown_ids_are_404(client: TestClient) -> None:
    page = client.get("/sessions/nobody")
    assert page.status_code == 404
    assert "no session &#39;nobody&#39;" in page.text
    for what in ("state", "timeline", "events", "export"):
        answer = client.get(f"/api/sessions/nobody/{what}")
        assert answer.status_code == 404, what
        assert "nobody" in answer.json()["error"]
    assert client.get("/nowhere").status_code == 404
    assert client.get("/sessions/" + "x" * 300).status_code == 404  # not even a valid id


# -- escaping and the server's defences -----------------------------------------------------------


def test_hostile_content_renders_as_text(client: TestClient) -> None:
    listing = client.get("/").text
    page = client.get("/sessions/" + _quoted(HOSTILE_ID)).text
    fragments = client.get(f"/api/sessions/{_quoted(HOSTILE_ID)}/state?html=1").json()["html"]
    for text in (listing, page, fragments["todos"], fragments["messages"]):
        assert "<script>alert" not in text
        assert "<img src=x" not in text
    escaped = str(escape(HOSTILE_TEXT))
    assert escaped in listing and escaped in page and escaped in fragments["messages"]
    assert escaped in fragments["todos"]
    assert str(escape(HOSTILE_ID)) in page
    assert [c for c, _, _ in todo_pane(page)] == [HOSTILE_TEXT]  # the text itself, intact
    # the JSON API gives the stored text back exactly
    state = client.get(f"/api/sessions/{_quoted(HOSTILE_ID)}/state").json()
    assert state["messages"][0]["content"][0]["text"] == HOSTILE_TEXT


def test_pages_forbid_inline_script_and_foreign_hosts(client: TestClient) -> None:
    answer = client.get("/")
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert client.get("/", headers={"host": "evil.example"}).status_code == 400


def test_the_static_files_are_served(client: TestClient) -> None:
    assert "EventSource" in client.get("/static/app.js").text
    assert client.get("/static/app.css").status_code == 200


def _quoted(session_id: str) -> str:
    from urllib.parse import quote

    return quote(session_id, safe="")


# -- export and fork ------------------------------------------------------------------------------


def test_export_downloads_the_jsonl_of_the_library(client: TestClient, db: str) -> None:
    answer = client.get(f"/api/sessions/{DEMO}/export")
    assert answer.status_code == 200
    assert "attachment" in answer.headers["content-disposition"]

    async def expected() -> list[str]:
        async with SessionStore(db) as store:
            return [line async for line in export_lines(store, DEMO)]

    assert answer.text.splitlines() == asyncio.run(expected())
    assert json.loads(answer.text.splitlines()[0])["header"]["id"] == DEMO


def test_fork_is_refused_by_a_read_only_server(client: TestClient, store: SyncSessionStore) -> None:
    before = [s.id for s in store.list()]
    answer = client.post(f"/api/sessions/{DEMO}/fork?at=40")
    assert answer.status_code == 403
    assert "--allow-writes" in answer.json()["error"]
    assert [s.id for s in store.list()] == before
    assert 'id="fork" type="button" disabled' in client.get(f"/sessions/{DEMO}").text


def test_fork_with_writes_allowed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fork.db'}"
    make_demo(url)
    app = create_app(url, allow_writes=True, allowed_hosts=["testserver"])
    page = {"sec-fetch-site": "same-origin", "content-type": "application/x-www-form-urlencoded"}
    token = f"fork_token={app.state.fork_token}"  # what the page's script sends
    with TestClient(app) as client, SyncSessionStore(url) as store:
        between = next(e.seq for e in store.read_from(DEMO) if e.type == "turn/end")
        answer = client.post(f"/api/sessions/{DEMO}/fork?at={between}", headers=page, content=token)
        assert answer.status_code == 201, answer.text
        child = answer.json()["id"]
        assert answer.json()["url"] == f"/sessions/{child}"
        assert store.header(child).parent_session == DEMO
        assert store.header(child).seed_length == between + 1
        assert client.get(answer.json()["url"]).status_code == 200
        inside = client.post(f"/api/sessions/{DEMO}/fork?at=5", headers=page, content=token)
        assert inside.status_code == 409 and "between turns" in inside.json()["error"]
        foreign = client.post(
            f"/api/sessions/{DEMO}/fork?at={between}", headers={"origin": "http://evil.example"}
        )
        assert foreign.status_code == 403
        past = client.post(f"/api/sessions/{DEMO}/fork?at=99999", headers=page, content=token)
        assert past.status_code == 400
        assert 'id="fork" type="button">' in client.get(f"/sessions/{DEMO}").text
        assert client.get(f"/api/sessions/{DEMO}/state?at={between}").json()["openTurn"] is None
        assert client.get(f"/api/sessions/{DEMO}/state?at=5").json()["openTurn"] == 1
        inside_page = client.get(f"/sessions/{DEMO}?at=5").text
        assert 'id="fork" type="button" disabled title="turn 1 is still open' in inside_page


# -- the command line -----------------------------------------------------------------------------


def test_serve_without_the_extra_names_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.modules['starlette'] = None\n"
        f"sys.argv = ['todo-sessions', '--db', {str(tmp_path / 'a.db')!r}, 'serve']\n"
        "from todo_sessions._console import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "pip install 'todo-sessions[web]'" in lines[0]


# -- a real server, for the browser and live tests ------------------------------------------------


@contextmanager
def serving(url: str, *options: str) -> Iterator[str]:
    """``todo-sessions serve`` in a child process on a port of its own: ``--port 0``, then the
    port it announces on stderr (a port picked here and passed on could be taken by another
    test process in between); yields its base URL."""
    import queue
    import re
    import subprocess
    import sys
    import threading
    import time
    import urllib.request

    command = [sys.executable, "-m", "todo_sessions", "--db", url, "serve", "--port", "0"]
    child = subprocess.Popen(
        [*command, *options], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    lines: queue.Queue[str | None] = queue.Queue()
    err: list[str] = []

    def drain() -> None:  # all of stderr, so that the child never blocks on a full pipe
        assert child.stderr is not None
        for line in child.stderr:
            err.append(line)
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30  # on a busy machine
        announced = None
        while announced is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"serve announced no port: {''.join(err)}") from None
            if line is None:
                child.wait(timeout=10)
                raise AssertionError(f"serve exited: {''.join(err)}")
            announced = re.search(r"serving .* on http://\S+:(\d+)/", line)
        base = f"http://127.0.0.1:{announced[1]}"
        for _ in range(300):  # up to 30 s on a busy machine
            if child.poll() is not None:
                raise AssertionError(f"serve exited: {''.join(err)}")
            try:
                with urllib.request.urlopen(base + "/api/sessions", timeout=2):
                    break
            except OSError:
                time.sleep(0.1)
        else:
            raise AssertionError("serve did not answer")
        yield base
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        reader.join(timeout=10)
        assert child.stderr is not None
        child.stderr.close()


APPEND_TURN = """
import sys
from todo_sessions import SessionEvent, SyncSessionStore
url, session_id, turn, text = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with SyncSessionStore(url) as store:
    s = store.summary(session_id).next_seq
    t = store.summary(session_id).updated_at
    message = {"id": f"live{s}", "role": "user", "content": [{"type": "text", "text": text}],
               "source": {"kind": "user"}}
    todos = [{"content": text, "status": "in_progress"},
             {"content": "and then", "status": "pending"}]
    store.append(session_id, [
        SessionEvent("turn/start", s, t, {"turn": turn}),
        SessionEvent("user/message", s + 1, t, message, surface_op="append"),
        SessionEvent("todo/write", s + 2, t, {"todos": todos}),
        SessionEvent("turn/end", s + 3, t, {"turn": turn, "reason": {"kind": "completed"}}),
    ])
print(s + 3)
"""


def append_turn_elsewhere(url: str, session_id: str, turn: int, text: str) -> int:
    """Another process appends a turn (with a todo write) to the session; its last seq."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", APPEND_TURN, url, session_id, str(turn), text],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(done.stdout.strip())


@pytest.mark.postgres
def test_the_panes_on_postgresql(fresh_pg_url: str) -> None:
    make_demo(fresh_pg_url)
    app = create_app(fresh_pg_url, allowed_hosts=["testserver"])
    with TestClient(app) as client, SyncSessionStore(fresh_pg_url) as store:
        assert [s["id"] for s in client.get("/api/sessions").json()["sessions"]] == [DEMO]
        for at in (16, 70, 137):
            page = client.get(f"/sessions/{DEMO}", params={"at": at}).text
            todos = current(store.current_todos(DEMO, upto_seq=at)) or []
            assert [(c, s) for c, s, ch in todo_pane(page) if ch != "removed"] == todos
            state = client.get(f"/api/sessions/{DEMO}/state", params={"at": at}).json()
            assert state["messages"] == messages_json(store.derive_messages(DEMO, upto_seq=at))


def test_serve_on_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "todo_sessions", "--db", str(tmp_path / "p.db")]
        done = subprocess.run(
            [*command, "serve", "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]


# -- the list's filters ------------------------------------------------------------------------

DAY = 86_400_000
HOSTILE_TAG = '<script>alert("tag")</script>&<b>'
BASE = (T0 // DAY + 400) * DAY
"""Midnight UTC of a day 400 days after T0: session k of the filter tests was last active at
noon of day k from there."""


def _day(k: int) -> str:
    import datetime

    moment = datetime.datetime.fromtimestamp((BASE + k * DAY) / 1000, tz=datetime.UTC)
    return moment.date().isoformat()


def _a_turn(todo: str | None) -> list[SessionEvent]:
    """A small complete turn whose todo list has one item of status ``todo`` (None: no list)."""
    events = turn(0)
    if todo is None:
        del events[2]
        events = [
            SessionEvent(e.type, i, e.time, e.data, surface_op=e.surface_op)
            for i, e in enumerate(events)
        ]
    else:
        events[2] = todo_write(2, ("plan", todo))
    return events


FILTERED = [
    # id, cwd, title, tags, todo status, parent ("fork": a fork of root)
    ("root", "/a", "Root: fix the parser", ["red"], "in_progress", None),
    ("fork1", "/a", "a fork", [], None, "fork"),
    ("sub1", "/b", "sub-agent", ["blue"], "completed", "root"),
    ("plain", "/b", "Plain FIX", [], None, None),
    ("hostile", "/a", "hostile", [HOSTILE_TAG, "red"], "completed", None),
    ("done", None, "all done", ["blue", "red"], "completed", None),
    ("pending", "/a", "Pending work", ["green"], "pending", None),
    ("late", "/b", "late fix", ["red"], "in_progress", None),
    ("untitled", "/a", None, ["red"], "in_progress", None),
    ("sub2", "/a", "second sub-agent", ["red"], "pending", "root"),
]


def make_filtered(url: str, base: int = BASE) -> None:
    """The sessions of `FILTERED`, session k last active at noon of day k after ``base``."""
    now = [base]
    with SyncSessionStore(url, clock=lambda: now[0]) as store:
        for k, (sid, cwd, title, tags, todo, parent) in enumerate(FILTERED):
            now[0] = base + k * DAY + DAY // 2
            if parent == "fork":
                store.fork("root", child_id=sid, title=title)
            else:
                fields: dict[str, Any] = {"title": title, "cwd": cwd}
                if parent is not None:
                    fields["parent_session"] = parent
                store.create(header(sid, **{k: v for k, v in fields.items() if v is not None}))
                store.append(sid, _a_turn(todo))
            metadata = {"note": HOSTILE_TEXT, "k": k} if sid == "hostile" else None
            if tags or metadata:
                store.update_meta(sid, tags=tags, metadata=metadata)


@pytest.fixture(scope="module")
def filtered_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('web-filters') / 'filters.db'}"
    make_filtered(url)
    return url


@pytest.fixture(scope="module")
def fclient(filtered_db: str) -> Iterator[TestClient]:
    with TestClient(create_app(filtered_db, allowed_hosts=["testserver"])) as client:
        yield client


@pytest.fixture(scope="module")
def fstore(filtered_db: str) -> Iterator[SyncSessionStore]:
    with SyncSessionStore(filtered_db) as store:
        yield store


def page_ids(page: str) -> list[str]:
    return [html.unescape(i) for i in re.findall(r'<tr data-id="([^"]*)">', page)]


# (query parameters, the same filters as SessionStore.list takes them)
FILTER_CASES: list[tuple[dict[str, str], dict[str, Any]]] = [
    ({"cwd": "/a"}, {"cwd": "/a"}),
    ({"cwd": "/b"}, {"cwd": "/b"}),
    ({"tag": "red"}, {"tag": "red"}),
    ({"tag": HOSTILE_TAG}, {"tag": HOSTILE_TAG}),
    ({"text": "fix"}, {"text": "fix"}),
    ({"text": "SUB-"}, {"text": "SUB-"}),
    ({"parent": "root"}, {"parent": "root"}),
    ({"open_todos": "yes"}, {"has_open_todos": True}),
    ({"open_todos": "no"}, {"has_open_todos": False}),
    ({"open_todos": "true"}, {"has_open_todos": True}),
    ({"since": _day(4)}, {"since": BASE + 4 * DAY}),
    ({"until": _day(4)}, {"until": BASE + 4 * DAY}),
    ({"since": f"{_day(2)}T12:00:00Z"}, {"since": BASE + 2 * DAY + DAY // 2}),  # inclusive
    ({"until": f"{_day(2)}T12:00:00.001"}, {"until": BASE + 2 * DAY + DAY // 2 + 1}),
    ({"since": f"{_day(3)}T13:00+01:00"}, {"since": BASE + 3 * DAY + DAY // 2}),
    ({"since": _day(2), "until": _day(6)}, {"since": BASE + 2 * DAY, "until": BASE + 6 * DAY}),
    (
        {"cwd": "/a", "tag": "red", "open_todos": "yes"},
        {"cwd": "/a", "tag": "red", "has_open_todos": True},
    ),
    ({"text": "fix", "open_todos": "no"}, {"text": "fix", "has_open_todos": False}),
    ({"parent": "root", "tag": "blue"}, {"parent": "root", "tag": "blue"}),
    ({"tag": "nothing-has-this"}, {"tag": "nothing-has-this"}),
]


@pytest.mark.parametrize(("params", "kwargs"), FILTER_CASES)
def test_each_filter_narrows_the_list_as_the_store_does(
    fclient: TestClient, fstore: SyncSessionStore, params: dict[str, str], kwargs: dict[str, Any]
) -> None:
    everything = [s.id for s in fstore.list(limit=500)]
    expected = [s.id for s in fstore.list(limit=500, **kwargs)]
    if "nothing-has-this" not in params.values():
        assert expected and len(expected) < len(everything)  # the case does narrow
    body = fclient.get("/api/sessions", params=params).json()
    assert [s["id"] for s in body["sessions"]] == expected
    assert body["next"] is None and body["nextUrl"] is None
    page = fclient.get("/", params=params)
    assert page.status_code == 200
    assert page_ids(page.text) == expected
    if not expected:
        assert "No sessions match these filters." in page.text


def test_the_filters_mean_what_they_say(fclient: TestClient) -> None:
    def ids(**params: str) -> set[str]:
        return {s["id"] for s in fclient.get("/api/sessions", params=params).json()["sessions"]}

    assert ids(parent="root") == {"fork1", "sub1", "sub2"}
    assert ids(tag="blue") == {"sub1", "done"}
    assert ids(cwd="/b") == {"sub1", "plain", "late"}
    assert ids(text="FIX") == {"root", "plain", "late"}
    assert ids(open_todos="yes") == {"root", "fork1", "pending", "late", "untitled", "sub2"}
    assert ids(open_todos="no") == {"sub1", "plain", "hostile", "done"}
    assert ids(open_todos="any") == ids() == {f[0] for f in FILTERED}
    # since inclusive, until exclusive, dates at midnight UTC
    assert ids(since=_day(8)) == {"untitled", "sub2"}
    assert ids(until=_day(1)) == {"root"}
    assert ids(since=f"{_day(1)}T12:00:00Z", until=f"{_day(3)}T12:00:00Z") == {"fork1", "sub1"}
    # a blank field (what the form sends) is no filter
    assert ids(cwd="", tag="", text="", parent="", open_todos="", since="", until="") == ids()


def test_a_duration_ago_is_a_moment_and_pages_keep_it(tmp_path: Path) -> None:
    from todo_sessions.store.store import wall_clock_ms

    url = f"sqlite:///{tmp_path / 'recent.db'}"
    base = (wall_clock_ms() // DAY - len(FILTERED)) * DAY
    make_filtered(url, base)
    with (
        TestClient(create_app(url, allowed_hosts=["testserver"])) as client,
        SyncSessionStore(url) as store,
    ):
        now = wall_clock_ms()
        expected = [s.id for s in store.list(limit=500, since=now - 4 * DAY)]
        assert 2 <= len(expected) < len(FILTERED)
        first = client.get("/api/sessions", params={"since": "4d", "limit": 1}).json()
        assert [s["id"] for s in first["sessions"]] == expected[:1]
        # the next page carries the moment the duration meant, not the duration
        assert "since=4d" not in first["nextUrl"] and "since=20" in first["nextUrl"]
        seen = [s["id"] for s in first["sessions"]]
        next_url = first["nextUrl"]
        while next_url is not None:
            body = client.get(next_url).json()
            seen += [s["id"] for s in body["sessions"]]
            next_url = body["nextUrl"]
        assert seen == expected
        page = client.get("/", params={"since": "96h"}).text
        assert page_ids(page) == expected
        # a time is no date: the form shows it as text so that it is kept
        assert re.search(r'<input type="text" name="since" value="20[^"]*Z">', page)


def test_the_views_parse_durations_against_now() -> None:
    from todo_sessions.web.filters import FilterError, parse_filters

    now = BASE + 12_345
    parsed = parse_filters({"since": ["2d"], "until": ["30m"]}, now_ms=now)
    assert parsed.since == now - 2 * DAY and parsed.until == now - 30 * 60_000
    assert parse_filters({"since": [parsed.since_text]}, now_ms=0).since == parsed.since
    assert parse_filters({"until": ["1w"]}, now_ms=now).until == now - 7 * DAY
    with pytest.raises(FilterError, match="since"):
        parse_filters({"since": ["2 days"]}, now_ms=now)


PAGED_CASES: list[tuple[dict[str, str], dict[str, Any]]] = [
    ({"tag": "red"}, {"tag": "red"}),
    ({"cwd": "/a", "open_todos": "yes"}, {"cwd": "/a", "has_open_todos": True}),
    (
        {"tag": "red", "since": _day(1), "until": _day(9)},
        {"tag": "red", "since": BASE + DAY, "until": BASE + 9 * DAY},
    ),
    ({"text": "a", "open_todos": "no"}, {"text": "a", "has_open_todos": False}),
]


@pytest.mark.parametrize(("params", "kwargs"), PAGED_CASES)
@pytest.mark.parametrize("limit", [1, 2, 3])
def test_filters_with_paging_keep_the_filters_in_the_next_link(
    fclient: TestClient,
    fstore: SyncSessionStore,
    params: dict[str, str],
    kwargs: dict[str, Any],
    limit: int,
) -> None:
    expected = [s.id for s in fstore.list(limit=500, **kwargs)]
    assert len(expected) >= limit  # more than one page (the last one may be empty)
    # the pages: each is store.list(limit, before=the last of the page before, filters)
    seen: list[str] = []
    url: str | None = "/?" + urlencode({**params, "limit": limit})
    pages = 0
    while url is not None:
        page = fclient.get(url)
        assert page.status_code == 200
        ids = page_ids(page.text)
        before = fstore.summary(seen[-1]) if seen else None
        assert ids == [s.id for s in fstore.list(limit=limit, before=before, **kwargs)]
        seen += ids
        pages += 1
        link = re.search(r'id="next-page" href="([^"]*)"', page.text)
        url = None if link is None else html.unescape(link.group(1))
        if url is not None:
            query = parse_qs(urlsplit(url).query)
            assert {k: v[0] for k, v in query.items() if k in params} == params
            assert query["limit"] == [str(limit)] and query["before"] == [ids[-1]]
        if pages > 1:  # the way back to the first page keeps the filters
            first = re.search(r'id="first-page" href="([^"]*)"', page.text)
            assert first is not None
            back = parse_qs(urlsplit(html.unescape(first.group(1))).query)
            assert (
                "before" not in back and {k: v[0] for k, v in back.items() if k in params} == params
            )
    assert seen == expected and pages == -(-len(expected) // limit) + (len(expected) % limit == 0)
    # the API pages the same way
    api_seen: list[str] = []
    api_url: str | None = "/api/sessions?" + urlencode({**params, "limit": limit})
    while api_url is not None:
        body = fclient.get(api_url).json()
        api_seen += [s["id"] for s in body["sessions"]]
        api_url = body["nextUrl"]
        if api_url is not None:
            assert api_url.startswith("/api/sessions?") and body["next"] == api_seen[-1]
    assert api_seen == expected


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("since=yesterday", "since"),
        ("until=2026-13-01", "until"),
        ("since=2026-12-01T25:00", "since"),
        ("since=99999999999w", "since"),
        ("open_todos=maybe", "open_todos"),
        ("cwd=%2Fa%00b", "cwd"),
        ("text=" + "x" * 1001, "text"),
        ("tag=red&tag=blue", "tag"),
        ("parent=a&parent=b", "parent"),
        ("limit=0&tag=red", "limit"),
    ],
)
def test_a_bad_filter_is_400_naming_it(fclient: TestClient, query: str, name: str) -> None:
    answer = fclient.get(f"/api/sessions?{query}")
    assert answer.status_code == 400
    message = answer.json()["error"]
    assert message.startswith(name) and "\n" not in message
    page = fclient.get(f"/?{query}")
    assert page.status_code == 400 and escape(message) in page.text


def test_the_list_shows_tags_and_open_todos_as_text(
    fclient: TestClient, fstore: SyncSessionStore
) -> None:
    page = fclient.get("/").text
    assert HOSTILE_TAG not in page and "<script>" not in page
    assert str(escape(HOSTILE_TAG)) in page
    # each tag links to the sessions with it, percent-encoded
    assert f'<a class="tag" href="/?tag={quote_plus(HOSTILE_TAG)}">' in page.replace("&amp;", "&")
    rows = dict(re.findall(r'<tr data-id="([^"]*)">(.*?)</tr>', page, re.S))
    for summary in fstore.list(limit=500):
        row = rows[summary.id]
        tags = re.search(r'<td class="tags">(.*?)</td>', row, re.S)
        assert tags is not None
        shown = [html.unescape(t) for t in re.findall(r'<a class="tag"[^>]*>(.*?)</a>', tags[1])]
        assert shown == list(summary.tags)
        assert ('class="open-todos"' in row) == summary.open_todos
    body = fclient.get("/api/sessions").json()
    by_id = {s["id"]: s for s in body["sessions"]}
    assert by_id["hostile"]["tags"] == [HOSTILE_TAG, "red"]
    assert by_id["hostile"]["metadata"] == {"note": HOSTILE_TEXT, "k": 4}
    assert by_id["sub1"]["parent"] == "root" and by_id["sub1"]["openTodos"] is False
    assert by_id["root"]["openTodos"] is True and by_id["root"]["parent"] is None


def test_the_form_shows_the_filters_it_was_given(fclient: TestClient) -> None:
    params = {
        "text": HOSTILE_TEXT,
        "cwd": "/a",
        "tag": HOSTILE_TAG,
        "parent": "root",
        "open_todos": "no",
        "since": _day(1),
        "until": f"{_day(5)}T06:00Z",
        "limit": "7",
    }
    page = fclient.get("/", params=params)
    assert page.status_code == 200
    text = page.text
    assert HOSTILE_TEXT not in text and HOSTILE_TAG not in text
    assert f'name="text" value="{escape(HOSTILE_TEXT)}"' in text
    assert f'name="tag" value="{escape(HOSTILE_TAG)}"' in text
    assert 'name="cwd" value="/a"' in text and 'name="parent" value="root"' in text
    assert '<option value="no" selected>no</option>' in text
    assert f'<input type="date" name="since" value="{_day(1)}">' in text
    assert f'<input type="text" name="until" value="{_day(5)}T06:00Z">' in text
    assert '<input type="hidden" name="limit" value="7">' in text
    assert 'id="clear-filters" href="/?limit=7"' in text
    plain = fclient.get("/").text
    assert '<option value="" selected>any</option>' in plain
    assert 'id="clear-filters"' not in plain and 'name="limit"' not in plain


def test_the_session_page_shows_tags_parent_and_children(fclient: TestClient) -> None:
    page = fclient.get("/sessions/hostile").text
    assert HOSTILE_TAG not in page and HOSTILE_TEXT not in page
    assert f'<a class="tag" href="/?tag={quote_plus(HOSTILE_TAG)}">' in page.replace("&amp;", "&")
    assert str(escape(HOSTILE_TAG)) in page and "metadata" in page
    assert str(escape(json.dumps(HOSTILE_TEXT)[1:-1])) in page
    # the session/meta event is a row of the timeline (not hidden as minor), as text
    meta_row = re.search(r'<li class="ev meta" data-seq="6" id="seq-6">(.*?)</li>', page, re.S)
    assert meta_row is not None and "set tags, metadata" in meta_row[1]
    sub = fclient.get("/sessions/sub1").text
    assert '<a id="parent" href="/sessions/root">root</a>' in sub and "started by" in sub
    fork = fclient.get("/sessions/fork1").text
    assert "forked from" in fork and '<a id="parent" href="/sessions/root">' in fork
    root = fclient.get("/sessions/root").text
    assert 'id="parent"' not in root
    children = re.search(r'id="children" href="([^"]*)"', root)
    assert children is not None
    assert set(page_ids(fclient.get(html.unescape(children[1])).text)) == {"fork1", "sub1", "sub2"}


@pytest.mark.postgres
def test_the_filters_on_postgresql(fresh_pg_url: str) -> None:
    make_filtered(fresh_pg_url)
    app = create_app(fresh_pg_url, allowed_hosts=["testserver"])
    with TestClient(app) as client, SyncSessionStore(fresh_pg_url) as store:
        for params, kwargs in FILTER_CASES + PAGED_CASES:
            expected = [s.id for s in store.list(limit=500, **kwargs)]
            body = client.get("/api/sessions", params=params).json()
            assert [s["id"] for s in body["sessions"]] == expected, params
            assert page_ids(client.get("/", params=params).text) == expected, params
        seen: list[str] = []
        url: str | None = "/api/sessions?tag=red&limit=2"
        while url is not None:
            body = client.get(url).json()
            seen += [s["id"] for s in body["sessions"]]
            url = body["nextUrl"]
        assert seen == [s.id for s in store.list(limit=500, tag="red")]
