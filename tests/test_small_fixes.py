"""The small ones: C1 controls escaped in every JSON output, clear messages for a dangling
symlink and for a query string on a plain path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from factories import header, turn

from todo_sessions import SyncSessionStore
from todo_sessions._jsonout import dumps, escape_controls
from todo_sessions.cli import main

CSI = "\x9b"
HOSTILE = f"title {CSI}31m red \x7f del \x85 nel"


def test_escape_controls() -> None:
    assert escape_controls(json.dumps(HOSTILE, ensure_ascii=False)) == (
        '"title \\u009b31m red \\u007f del \\u0085 nel"'
    )
    assert json.loads(dumps({"t": HOSTILE})) == {"t": HOSTILE}
    assert dumps("é ü €") == '"é ü €"'  # other text stays as it is


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "c1.db")
    with SyncSessionStore(path) as store:
        store.create(header("c1", title=HOSTILE, cwd=f"/{CSI}"))
        store.append("c1", turn(0, 1, text=HOSTILE))
    return path


def test_json_output_of_the_command_line_escapes_c1(db: str, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "c1.jsonl"
    outputs = {
        "list": runner.invoke(main, ["--db", db, "list", "--json"]).stdout,
        "show": runner.invoke(main, ["--db", db, "show", "c1", "--json"]).stdout,
        "messages": runner.invoke(main, ["--db", db, "messages", "c1", "--json"]).stdout,
        "export": runner.invoke(main, ["--db", db, "export", "c1"]).stdout,
    }
    assert runner.invoke(main, ["--db", db, "export", "c1", "-o", str(out)]).exit_code == 0
    outputs["export -o"] = out.read_text()
    for name, text in outputs.items():
        assert text, name
        assert CSI not in text and "\x7f" not in text and "\x85" not in text, name
        assert "\\u009b" in text, name
    assert json.loads(outputs["list"])[0]["title"] == HOSTILE
    # the escaped export imports as the same session
    copy = str(tmp_path / "copy.db")
    assert runner.invoke(main, ["--db", copy, "import", str(out)]).exit_code == 0
    with SyncSessionStore(copy) as store:
        assert store.header("c1").title == HOSTILE


def test_json_output_of_the_viewer_escapes_c1(db: str) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from todo_sessions.web import create_app

    with TestClient(create_app(db), base_url="http://127.0.0.1") as client:
        answers = [
            client.get("/api/sessions"),
            client.get("/api/sessions/c1/state"),
            client.get("/api/sessions/c1/state?html=1"),
            client.get("/api/sessions/c1/timeline"),
            client.get("/api/sessions/c1/export"),
        ]
    for answer in answers:
        assert answer.status_code == 200
        assert CSI not in answer.text and "\\u009b" in answer.text, answer.url
    assert answers[0].json()["sessions"][0]["title"] == HOSTILE


def test_a_dangling_symlink_and_a_query_on_a_plain_path_are_clear(tmp_path: Path) -> None:
    link = tmp_path / "gone.db"
    link.symlink_to(tmp_path / "nowhere.db")
    runner = CliRunner()
    for given in (str(link), f"sqlite:///{link}"):
        result = runner.invoke(main, ["--db", given, "list"])
        assert result.exit_code == 2
        assert "is a symbolic link to" in result.stderr and "does not exist" in result.stderr
        assert "parent path" not in result.stderr
    for given in (f"{tmp_path}/q.db?mode=ro", "q.db?mode=ro"):
        result = runner.invoke(main, ["--db", given, "list"])
        assert result.exit_code == 2
        assert "is a file path with a query string ('?mode=ro')" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gone.db"]  # nothing created
    assert not Path("q.db?mode=ro").exists()


def test_import_accepts_only_what_verify_accepts(tmp_path: Path) -> None:
    from factories import T0

    from todo_sessions import SessionEvent

    call = {"type": "tool-call", "id": "c1", "name": "todo_write", "arguments": "{}"}
    message = {
        "id": "a1",
        "role": "assistant",
        "content": [call],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    events = [
        *turn(0, 1)[:2],
        SessionEvent("step/start", 2, T0, {"turn": 1, "step": 1}),
        SessionEvent(
            "assistant/message",
            3,
            T0,
            {"turn": 1, "step": 1, "message": message},
            surface_op="append",
        ),
        SessionEvent(
            "tool/call",
            4,
            T0,
            {"turn": 1, "step": 1, "callId": "c1", "name": "todo_write", "arguments": "{}"},
        ),
        SessionEvent("step/end", 5, T0, {"turn": 1, "step": 1}),
        SessionEvent("turn/end", 6, T0, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    source = str(tmp_path / "src.db")
    with SyncSessionStore(source) as store:
        store.create(header("u"))
        store.append("u", events)
    runner = CliRunner()
    verified = runner.invoke(main, ["--db", source, "verify", "u"])
    assert verified.exit_code == 1 and "unanswered" in verified.stdout
    path = tmp_path / "u.jsonl"
    assert runner.invoke(main, ["--db", source, "export", "u", "-o", str(path)]).exit_code == 0
    target = str(tmp_path / "target.db")
    refused = runner.invoke(main, ["--db", target, "import", str(path)])
    assert refused.exit_code == 1
    assert "line 8: turn 1 closed with tool call 'c1' unanswered" in refused.stderr
    assert json.loads(runner.invoke(main, ["--db", target, "list", "--json"]).stdout) == []
    # a healthy export, and one whose last turn is still open (interrupted), import
    with SyncSessionStore(source) as store:
        store.create(header("ok"))
        store.append("ok", [*turn(0, 1), *turn(6, 2)[:2]])
    assert runner.invoke(main, ["--db", source, "export", "ok", "-o", str(path)]).exit_code == 0
    assert runner.invoke(main, ["--db", target, "import", str(path)]).exit_code == 0


def test_a_mode_ro_url_never_creates_a_file(tmp_path: Path) -> None:
    """``sqlite:///q.db?mode=ro`` opens read-only, and a missing file is a clear error (no
    file created, none named with the query); a plain path with a query is refused."""
    from todo_sessions import SessionStore, StoreError
    from todo_sessions.sync import SyncSessionStore as Sync

    missing = tmp_path / "q.db"
    with pytest.raises(StoreError, match="read-only: there is no such file"):
        Sync(f"sqlite:///{missing}?mode=ro").close()
    with pytest.raises(ValueError, match="a plain path takes no parameters"):
        SessionStore(f"{tmp_path}/q.db?mode=ro")
    with pytest.raises(ValueError, match="mode=bogus"):
        SessionStore(f"sqlite:///{missing}?mode=bogus")
    assert list(tmp_path.iterdir()) == []
    with SyncSessionStore(missing) as store:
        store.create(header("s"))
        store.append("s", turn(0))
    with SyncSessionStore(f"sqlite:///{missing}?mode=ro") as ro:
        assert len(ro.read_from("s")) == 6
        with pytest.raises(StoreError, match="read-only"):
            ro.append("s", turn(6, 2))
    with pytest.raises(ValueError, match="contradicts mode=ro"):
        SessionStore(f"sqlite:///{missing}?mode=ro", read_only=False)
    runner = CliRunner()
    result = runner.invoke(main, ["--db", f"sqlite:///{tmp_path}/other.db?mode=ro", "list"])
    assert result.exit_code == 1 and "no such file" in result.output
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("q.db-")) == ["q.db"]


async def test_the_library_import_refuses_a_line_over_its_limit(tmp_path: Path) -> None:
    from todo_sessions import InvalidEventError, SessionStore, export_lines, import_lines
    from todo_sessions._jsonl import MAX_LINE_BYTES
    from todo_sessions.cli.exporting import MAX_LINE_BYTES as CLI_LIMIT

    assert MAX_LINE_BYTES == CLI_LIMIT == 64 * 1024 * 1024
    async with SessionStore(tmp_path / "l.db") as store:
        await store.create(header("s"))
        await store.append("s", turn(0, text="é" * 300))
        lines = [line async for line in export_lines(store, "s")]
        longest = max(len(line.encode()) for line in lines)
        with pytest.raises(InvalidEventError, match=r"line 3: the line is longer than"):
            await import_lines(store, lines, as_id="cut", max_line_bytes=longest - 1)
        assert [sid async for sid in store.session_ids()] == ["s"]  # nothing written
        done = await import_lines(
            store, [f"{line}\n" for line in lines], as_id="fits", max_line_bytes=longest
        )
        assert done.events == 6
