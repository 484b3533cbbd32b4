"""The command line (issue #6): every command against a fixture database.

See docs/design.md, "Command line".

Most tests run in-process with click's `CliRunner` against a copy of one file SQLite database
holding the scripted demo session (``demo``) and a `LogBuilder` session (``built``). A few run
``python -m todo_sessions.cli`` as a real subprocess (tests/test_cli_subprocess.py has more).
Every failure must be one line on stderr, ``error: …``, with no traceback: exit status 2 for a
usage error, 1 for a command that failed, 130 when interrupted.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from factories import header
from logs import LogBuilder

from todo_sessions import SessionStore, derive_messages
from todo_sessions.cli import main
from todo_sessions.core.messages import messages_adapter
from todo_sessions.harness.demo import run_demo

DEMO = "demo"
BUILT = "built"
TITLE = "Fix [the] parser [/x] :smile:"
"""Rich markup and an emoji code: must be printed literally, never interpreted."""

REPO = Path(__file__).resolve().parents[1]


def built_log() -> LogBuilder:
    """Two closed turns: a plan, a tool call, the plan updated, a final answer."""
    b = LogBuilder()
    b.turn_start()
    b.user("fix the parser")
    b.todo(("read the parser", "in_progress"), ("fix it", "pending"))
    b.tool_step("c1")
    b.todo(("read the parser", "completed"), ("fix it", "completed"))
    b.text_step("fixed it")
    b.turn_end()
    b.exchange("thanks", answer="you're welcome")
    return b


BUILT_EVENTS = built_log().events
TODO_SEQS = [e.seq for e in BUILT_EVENTS if e.type == "todo/write"]
FIRST_TURN_END = next(e.seq for e in BUILT_EVENTS if e.type == "turn/end")
LAST = BUILT_EVENTS[-1].seq
PAST_END_NOTE = f"note: session {BUILT} ends at seq {LAST}; showing seq {LAST}\n"


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "template.db"

    async def build() -> None:
        async with SessionStore(f"sqlite:///{path}") as store:
            await run_demo(store, session_id=DEMO)
            await store.create(header(BUILT, title=TITLE, cwd="/work/parser"))
            await store.append(BUILT, BUILT_EVENTS)

    asyncio.run(build())
    return path


@pytest.fixture
def db(template_db: Path, tmp_path: Path) -> str:
    """A fresh copy of the fixture database for one test."""
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{template_db}{suffix}")
        if source.exists():
            shutil.copy(source, tmp_path / f"sessions.db{suffix}")
    return f"sqlite:///{tmp_path}/sessions.db"


def cli(db: str, *args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["--db", db, *args], input=input, env=env)


def ok(db: str, *args: str, input: str | None = None) -> Result:
    result = cli(db, *args, input=input)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


def as_json(db: str, *args: str) -> object:
    return json.loads(ok(db, *args, "--json").stdout)


def assert_one_line_error(
    result: Result, fragment: str, *, stdout: str = "", status: int = 1
) -> None:
    """Exit status 1 (or ``status``), exactly one line on stderr naming the problem, nothing
    (else) on stdout."""
    assert result.exit_code == status, (result.stdout, result.stderr, result.exception)
    assert isinstance(result.exception, SystemExit)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert fragment in lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout.startswith(stdout)
    if not stdout:
        assert result.stdout == ""


def assert_usage_error(result: Result, fragment: str) -> None:
    """A usage error: one line on stderr, exit status 2."""
    assert_one_line_error(result, fragment, status=2)


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


# -- migrate, list --------------------------------------------------------------------------------


def test_migrate_creates_an_empty_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new.db"
    assert "newest schema" in ok(url, "migrate").stdout
    assert "newest schema" in ok(url, "migrate").stdout  # idempotent
    assert ok(url, "list").stdout.strip() == "no sessions"
    assert as_json(url, "list") == []


def test_list_newest_first_with_counts(db: str) -> None:
    rows = as_json(db, "list")
    assert isinstance(rows, list)
    assert {r["id"] for r in rows} == {DEMO, BUILT}
    assert [r["updatedAt"] for r in rows] == sorted((r["updatedAt"] for r in rows), reverse=True)
    built = next(r for r in rows if r["id"] == BUILT)
    assert built["events"] == len(BUILT_EVENTS)
    assert built["turns"] == 2
    assert built["title"] == TITLE
    assert built["cwd"] == "/work/parser"
    assert set(built) >= {"createdAt", "updatedAt", "revision"}
    demo = next(r for r in rows if r["id"] == DEMO)
    assert demo["turns"] == 2 and demo["events"] > 100

    text = ok(db, "list").stdout
    for column in ("id", "events", "turns", "last activity", "title"):
        assert column in text
    assert TITLE in text  # not eaten as markup, no emoji


def test_list_pages_with_before(db: str) -> None:
    everything = [r["id"] for r in as_json(db, "list")]  # type: ignore[union-attr]
    first = as_json(db, "list", "--limit", "1")
    assert [r["id"] for r in first] == everything[:1]  # type: ignore[union-attr]
    second = as_json(db, "list", "--limit", "1", "--before", everything[0])
    assert [r["id"] for r in second] == everything[1:2]  # type: ignore[union-attr]
    assert as_json(db, "list", "--before", everything[1]) == []
    assert f"--before {everything[0]}" in ok(db, "list", "--limit", "1").stdout


# -- show, todos, messages ------------------------------------------------------------------------


def test_show_timeline_and_json(db: str) -> None:
    text = ok(db, "show", BUILT).stdout
    assert TITLE in text
    for fragment in ("turn 1", "turn 2", "fix the parser", "todo/write", "[~] read the parser"):
        assert fragment in text
    assert "→ read" in text and "← result of c1" in text
    assert "streamed chunks hidden" in text
    assert "assistant/chunk" in ok(db, "show", BUILT, "--verbose").stdout

    shown = as_json(db, "show", BUILT)
    assert isinstance(shown, dict)
    assert shown["header"]["id"] == BUILT and shown["header"]["title"] == TITLE
    assert shown["events"] == [e.to_dict() for e in BUILT_EVENTS]
    assert shown["revision"].count(":") == 2

    demo = ok(db, "show", DEMO).stdout
    assert "Fix mean() in calc.py" in demo and "[x] Run the tests" in demo


def test_todos_current_and_at_seq(db: str) -> None:
    final = [
        {"content": "read the parser", "status": "completed"},
        {"content": "fix it", "status": "completed"},
    ]
    assert as_json(db, "todos", BUILT) == final
    first = [
        {"content": "read the parser", "status": "in_progress"},
        {"content": "fix it", "status": "pending"},
    ]
    assert as_json(db, "todos", BUILT, "--at", str(TODO_SEQS[0])) == first
    assert as_json(db, "todos", BUILT, "--at", str(TODO_SEQS[1] - 1)) == first
    assert as_json(db, "todos", BUILT, "--at", str(TODO_SEQS[1])) == final
    assert as_json(db, "todos", BUILT, "--at", str(TODO_SEQS[0] - 1)) is None
    assert as_json(db, "todos", BUILT, "--at", str(LAST)) == final

    text = ok(db, "todos", BUILT, "--at", str(TODO_SEQS[0])).stdout.splitlines()
    assert text == ["[todos]", "[~] read the parser", "[ ] fix it"]
    assert ok(db, "todos", BUILT, "--at", "0").stdout.strip() == "(no todo list)"


@pytest.mark.parametrize("command", ["todos", "messages"])
def test_at_past_the_end_is_the_end_with_a_note(db: str, command: str) -> None:
    latest = ok(db, command, BUILT, "--json")
    for past in (LAST + 1, 100000):
        shown = ok(db, command, BUILT, "--at", str(past), "--json")
        assert shown.stdout == latest.stdout
        assert shown.stderr == PAST_END_NOTE
    at_end = ok(db, command, BUILT, "--at", str(LAST))
    assert at_end.stderr == ""  # the last seq itself is no news
    assert ok(db, command, BUILT, "--at", str(LAST + 1)).stdout == at_end.stdout


@pytest.mark.parametrize("command", ["todos", "messages", "fork"])
@pytest.mark.parametrize("value", ["-1", "x", "1.5", ""])
def test_at_must_be_a_seq(db: str, command: str, value: str) -> None:
    assert_usage_error(
        cli(db, command, BUILT, "--at", value), f"--at must be a seq >= 0, got {value!r}"
    )


def _wire(events: Sequence[object]) -> object:
    return messages_adapter.dump_python(
        derive_messages(events),  # type: ignore[arg-type]
        mode="json",
        by_alias=True,
        exclude_none=True,
    )


def test_messages_derived_and_at_seq(db: str) -> None:
    assert as_json(db, "messages", BUILT) == _wire(BUILT_EVENTS)
    for at in (1, TODO_SEQS[1], FIRST_TURN_END):
        assert as_json(db, "messages", BUILT, "--at", str(at)) == _wire(BUILT_EVENTS[: at + 1])
    assert as_json(db, "messages", BUILT, "--at", "0") == []
    assert ok(db, "messages", BUILT, "--at", "0").stdout.strip() == "(no messages)"
    at_one = as_json(db, "messages", BUILT, "--at", "1")
    assert [m["role"] for m in at_one] == ["user"]  # type: ignore[union-attr]

    text = ok(db, "messages", BUILT).stdout
    assert "fix the parser" in text and "you're welcome" in text
    assert "todo" not in text  # todo/write is never part of the model's history here
    demo = as_json(db, "messages", DEMO)
    assert isinstance(demo, list) and demo[0]["role"] == "user"


# -- export, import, fork, delete, verify ---------------------------------------------------------


def test_export_to_file_and_stdout_and_import_as(db: str, tmp_path: Path) -> None:
    out = tmp_path / "built.jsonl"
    result = ok(db, "export", BUILT, "-o", str(out))
    assert result.stdout == ""
    assert result.stderr.strip() == f"exported {len(BUILT_EVENTS)} events of {BUILT} to {out}"
    assert ok(db, "export", BUILT).stdout == out.read_text(encoding="utf-8")
    lines = lines_of(out)
    assert len(lines) == 1 + len(BUILT_EVENTS)
    assert json.loads(lines[0])["header"]["id"] == BUILT
    assert [json.loads(line) for line in lines[1:]] == [e.to_dict() for e in BUILT_EVENTS]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]

    assert ok(db, "export", BUILT, "-o", "-").stdout == out.read_text(encoding="utf-8")
    assert ok(db, "export", BUILT, "--output", "-").stderr == ""
    assert not Path("-").exists()

    assert "imported" in ok(db, "import", str(out), "--as", "copy").stdout
    assert ok(db, "export", "copy").stdout.splitlines()[1:] == lines[1:]
    assert_one_line_error(cli(db, "import", str(out)), "already exists")
    assert "--as" in cli(db, "import", str(out)).stderr


def test_import_from_stdin(db: str, tmp_path: Path) -> None:
    exported = ok(db, "export", DEMO).stdout
    ok(db, "import", "-", "--as", "from-stdin", input=exported)
    assert ok(db, "export", "from-stdin").stdout.splitlines()[1:] == exported.splitlines()[1:]


def test_import_crlf_and_byte_order_mark(db: str, tmp_path: Path) -> None:
    exported = ok(db, "export", BUILT).stdout
    path = tmp_path / "windows.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + exported.replace("\n", "\r\n").encode())
    ok(db, "import", str(path), "--as", "crlf")
    assert ok(db, "export", "crlf").stdout.splitlines()[1:] == exported.splitlines()[1:]


def _latin1_in_line_5(lines: list[bytes]) -> list[bytes]:
    return [*lines[:4], lines[4][:7] + "é".encode("latin-1") + lines[4][7:], *lines[5:]]


@pytest.mark.parametrize(
    ("damage", "fragment"),
    [
        (
            lambda lines: [b"abc" + bytes(range(0x80, 0x100)), *lines],
            "line 1: not UTF-8 text (byte 0x80 at column 4)",
        ),
        (
            lambda lines: [*lines[:2], b"\xff" + lines[2], *lines[3:]],
            "line 3: not UTF-8 text (byte 0xff at column 1)",
        ),
        (_latin1_in_line_5, "line 5: not UTF-8 text (byte 0xe9 at column 8)"),
        (lambda lines: [*lines[:3], b"\x00\x01\x02", *lines[3:]], "line 4: "),
    ],
    ids=["header", "line 3", "latin-1", "control bytes"],
)
def test_import_bytes_that_are_not_utf8_name_the_line(
    db: str, tmp_path: Path, damage: Callable[[list[bytes]], list[bytes]], fragment: str
) -> None:
    lines = ok(db, "export", BUILT).stdout.encode().splitlines()
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(b"\n".join(damage(lines)) + b"\n")
    assert_one_line_error(cli(db, "import", str(path), "--as", "damaged"), fragment)
    with path.open("rb") as stdin:
        piped = CliRunner().invoke(
            main, ["--db", db, "import", "-", "--as", "damaged"], input=stdin
        )
    assert_one_line_error(piped, fragment)
    assert_one_line_error(cli(db, "show", "damaged"), "not found")  # nothing was written


def test_import_random_bytes(db: str, tmp_path: Path) -> None:
    path = tmp_path / "random.bin"
    path.write_bytes(random.Random(7).randbytes(5000))
    result = cli(db, "import", str(path))
    assert_one_line_error(result, "line ")
    assert "codec" not in result.stderr


def test_failed_export_leaves_no_file(db: str, tmp_path: Path) -> None:
    target = tmp_path / "missing-dir" / "x.jsonl"
    assert_one_line_error(cli(db, "export", BUILT, "-o", str(target)), "cannot write")
    assert_one_line_error(cli(db, "export", "nope", "-o", str(tmp_path / "n.jsonl")), "not found")
    assert not (tmp_path / "n.jsonl").exists()
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".part"]


def test_fork_at_seq(db: str) -> None:
    result = ok(db, "fork", BUILT, "--at", str(FIRST_TURN_END), "--as", "child")
    assert "forked built into child" in result.stdout
    shown = as_json(db, "show", "child")
    assert isinstance(shown, dict)
    assert shown["header"]["parentSession"] == BUILT
    assert shown["header"]["seedLength"] == FIRST_TURN_END + 1
    assert shown["events"][:-1] == [e.to_dict() for e in BUILT_EVENTS[: FIRST_TURN_END + 1]]
    assert shown["events"][-1]["type"] == "session/end-seed"
    assert "forked from built" in ok(db, "show", "child").stdout

    whole = ok(db, "fork", DEMO).stdout
    assert "forked demo into demo-fork-" in whole
    assert_one_line_error(cli(db, "fork", BUILT, "--at", "3"), "still open")


def test_fork_past_the_end_forks_everything_with_a_note(db: str) -> None:
    result = ok(db, "fork", BUILT, "--at", "99999", "--as", "all")
    assert result.stderr == f"note: session {BUILT} ends at seq {LAST}; forking at seq {LAST}\n"
    assert f"({LAST + 1} events inherited)" in result.stdout
    shown = as_json(db, "show", "all")
    assert isinstance(shown, dict) and shown["header"]["seedLength"] == LAST + 1
    assert ok(db, "fork", BUILT, "--at", str(LAST), "--as", "same").stderr == ""


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """stdin counts as a terminal (CliRunner's input is not one)."""
    monkeypatch.setattr("todo_sessions.cli.editing.stdin_is_terminal", lambda: True)


def test_delete_asks_and_no_keeps_the_session(db: str, terminal: None) -> None:
    before = as_json(db, "list")
    refused = cli(db, "delete", BUILT, input="n\n")
    assert refused.exit_code == 1
    assert f"delete session built ({len(BUILT_EVENTS)} events)?" in refused.stderr
    assert refused.stderr.endswith("error: not deleted\n")
    assert as_json(db, "list") == before
    ended = cli(db, "delete", BUILT, input="")  # end of input: no
    assert ended.exit_code == 1 and ended.stderr.endswith("error: not deleted\n")
    assert as_json(db, "list") == before

    assert "deleted built" in ok(db, "delete", BUILT, input="y\n").stdout
    assert [r["id"] for r in as_json(db, "list")] == [DEMO]  # type: ignore[union-attr]
    assert "deleted demo" in ok(db, "delete", "--yes", DEMO).stdout
    assert as_json(db, "list") == []
    assert_one_line_error(cli(db, "delete", "--yes", DEMO), "not found")


def test_delete_checks_the_session_before_asking(db: str, terminal: None) -> None:
    assert_one_line_error(cli(db, "delete", "nope", input="y\n"), "session 'nope' not found")


def test_delete_without_a_terminal_needs_yes(db: str) -> None:
    before = as_json(db, "list")
    message = "refusing to delete without --yes when stdin is not a terminal"
    assert_one_line_error(cli(db, "delete", BUILT, input="y\n"), message)
    assert as_json(db, "list") == before
    assert_one_line_error(cli(db, "delete", "nope"), "session 'nope' not found")  # checked first


def test_ctrl_c_at_the_delete_question(
    db: str, terminal: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted_confirm(*args: object, **kwargs: object) -> bool:
        try:  # what click.confirm does with Ctrl-C (a real terminal: test_cli_subprocess.py)
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise click.Abort() from None

    monkeypatch.setattr("click.confirm", interrupted_confirm)
    result = cli(db, "delete", BUILT)
    assert result.exit_code == 130, (result.stderr, result.exception)
    assert result.stderr.splitlines()[-1] == "error: interrupted"
    assert BUILT in [r["id"] for r in as_json(db, "list")]  # type: ignore[union-attr]


def test_verify_healthy_database(db: str) -> None:
    text = ok(db, "verify").stdout
    assert f"✓ {DEMO}" in text and f"✓ {BUILT}" in text
    assert "2 session(s) checked, 0 with problems" in text
    assert as_json(db, "verify") == {DEMO: [], BUILT: []}
    assert as_json(db, "verify", BUILT) == {BUILT: []}


def test_demo_command_in_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/demo.db"
    text = ok(url, "demo", "--id", "again").stdout
    assert "demo session again" in text and "[todos]" in text
    assert "no todo/write among them" in text
    assert f"replay it again with: todo-sessions --db {url} show again\n" in text
    assert "✓ again" in ok(url, "verify").stdout


def test_demo_heading_wraps_and_hints_are_shell_quoted(tmp_path: Path) -> None:
    folder = tmp_path / ("a directory with a long name, spaces and 'quotes' " * 2)
    url = f"sqlite:///{folder}/demo.db"
    result = CliRunner().invoke(main, ["--db", url, "demo", "--id", "it's"], terminal_width=80)
    assert result.exit_code == 0, result.stderr
    assert f"stored in {folder}/demo.db\n" in result.stdout  # not cut
    hint = result.stdout.split("replay it again with: ", 1)[1].splitlines()[0]
    assert shlex.split(hint) == ["todo-sessions", "--db", url, "show", "it's"]
    assert ok(url, "show", "it's").stdout  # the hint's database holds the session


def test_demo_hint_without_db_uses_the_default(tmp_path: Path) -> None:
    env = {"TODO_SESSIONS_URL": ""}  # unset: the default database, named by no option
    default = f"sqlite:///{tmp_path}/default.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("todo_sessions.cli._context.default_url", lambda: default)
        result = CliRunner().invoke(main, ["demo", "--id", "d1"], env=env)
    assert result.exit_code == 0, result.stderr
    assert f"stored in {tmp_path}/default.db\n" in result.stdout
    assert "replay it again with: todo-sessions show d1\n" in result.stdout


@pytest.mark.parametrize(
    ("argv0", "main_module", "expected"),
    [
        ("/usr/local/bin/todo-sessions", None, ["/usr/local/bin/todo-sessions"]),
        (".venv/bin/todo-sessions", None, [".venv/bin/todo-sessions"]),
        ("todo-sessions", None, ["todo-sessions"]),
        ("/x/__main__.py", "todo_sessions.__main__", ["<python>", "-m", "todo_sessions"]),
        ("/x/cli.py", "todo_sessions.cli", ["<python>", "-m", "todo_sessions.cli"]),
        ("/x/__main__.py", "todo_sessions.cli.__main__", ["<python>", "-m", "todo_sessions.cli"]),
        ("/x/pytest", None, ["todo-sessions"]),
    ],
)
def test_hints_name_the_program_as_invoked(
    monkeypatch: pytest.MonkeyPatch, argv0: str, main_module: str | None, expected: list[str]
) -> None:
    from types import ModuleType, SimpleNamespace

    from todo_sessions.cli._options import program

    fake_main = ModuleType("__main__")
    fake_main.__spec__ = SimpleNamespace(name=main_module) if main_module else None  # type: ignore[assignment]
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    monkeypatch.setattr(sys, "argv", [argv0])
    monkeypatch.setattr(sys, "executable", "/opt/py/bin/python3")
    shown = ["/opt/py/bin/python3" if part == "<python>" else part for part in expected]
    assert program() == shown


def test_list_next_page_hint_keeps_db_and_limit(db: str) -> None:
    text = ok(db, "list", "--limit", "1").stdout
    hint = text.split("next page: ", 1)[1].strip()
    first = as_json(db, "list", "--limit", "1")[0]["id"]  # type: ignore[index]
    assert shlex.split(hint) == [
        "todo-sessions",
        "--db",
        db,
        "list",
        "--limit",
        "1",
        "--before",
        first,
    ]
    assert hint.endswith(shlex.quote(first))


# -- errors ---------------------------------------------------------------------------------------

NOT_FOUND_COMMANDS = [
    ["show", "nope"],
    ["todos", "nope"],
    ["messages", "nope"],
    ["messages", "nope", "--json"],
    ["export", "nope"],
    ["fork", "nope"],
    ["delete", "--yes", "nope"],
    ["verify", "nope"],
    ["list", "--before", "nope"],
]


@pytest.mark.parametrize("args", NOT_FOUND_COMMANDS, ids=lambda a: " ".join(a))
def test_unknown_session_is_one_line_exit_1(db: str, args: list[str]) -> None:
    assert_one_line_error(cli(db, *args), "session 'nope' not found")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["show", "[bold]x[/]"], "session '[bold]x[/]' not found"),  # brackets kept literally
        (["fork", BUILT, "--as", BUILT], "already exists"),
    ],
)
def test_bad_arguments_are_one_line_exit_1(db: str, args: list[str], fragment: str) -> None:
    assert_one_line_error(cli(db, *args), fragment)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["list", "--limit", "0"], "--limit must be a number >= 1, got '0'"),
        (["list", "--limit", "x"], "--limit must be a number >= 1, got 'x'"),
        (["--bogus", "list"], "No such option '--bogus' (see 'main --help')"),
        (["list", "--bogus"], "No such option '--bogus' (see 'main list --help')"),
        (["show"], "Missing argument 'SESSION_ID' (see 'main show --help')"),
        (["show", BUILT, "extra"], "Got unexpected extra argument (extra)"),
        (["nocommand"], "No such command 'nocommand'"),
        (["todos", BUILT, "--at"], "Option '--at' requires an argument"),
        (["import", "/no/such/file.jsonl"], "No such file or directory"),
        (["export", BUILT, "-o", "/"], "is a directory"),
    ],
)
def test_usage_errors_are_one_line_exit_2(db: str, args: list[str], fragment: str) -> None:
    result = cli(db, *args)
    assert_usage_error(result, fragment)
    assert "Usage:" not in result.stderr and "Try " not in result.stderr


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("sqlite:////dev/null/inside-a-file.db", "/dev/null"),
        ("postgresql://nobody@127.0.0.1:1/x", "cannot reach the database"),
    ],
)
def test_unusable_database_is_one_line_exit_1(url: str, fragment: str) -> None:
    assert_one_line_error(cli(url, "list"), fragment)


ACCEPTED = "use sqlite:///path/to/file.db, postgresql://user@host/dbname, or a file path"

NOT_DATABASES = [
    ("", "--db is empty"),
    ("  ", "--db is empty"),
    ("sqlite:/", "--db 'sqlite:/' is not a database URL (a URL has :// after its scheme)"),
    ("sqlite:x.db", "is not a database URL"),
    ("postgresql:db", "is not a database URL"),
    ("notaurl", "--db 'notaurl' is neither a database URL nor a file path"),
    ("sessions", "is neither a database URL nor a file path"),
    ("sqlite://", "--db 'sqlite://' is an in-memory database, gone when the command ends"),
    ("sqlite:///", "is an in-memory database"),
    ("sqlite:///:memory:", "is an in-memory database"),
    ("sqlite+aiosqlite://", "is an in-memory database"),
    ("sqlite:///file:x?mode=memory&uri=true", "is an in-memory database"),
    ("sqlite://x.db", "has a host: an SQLite URL has three slashes"),
    ("postgresql://", "--db 'postgresql://' names no database"),
    ("postgresql://user@localhost", "names no database"),
    ("postgresql://user@localhost/", "names no database"),
    ("postgres://", "names no database"),
    ("postgresql://u@h:abc/db", "--db 'postgresql://u@h:abc/db' has a port that is not a number"),
    ("postgresql://u@h:99999/db", "has a port outside 1..65535"),
    ("postgresql://u:secret@h:x/db", "'postgresql://u:***@h:x/db'"),  # the password masked
    ("bogus://x", "--db 'bogus://x' is an unsupported database URL"),
    # refused by the store's own parser (the one every store uses), with its reason
    (
        "postgresql://u:secret@h1:5432,h2:x/db",
        "--db 'postgresql://u:***@h1:5432,h2:x/db': the port of host 'h2' in the database URL "
        "is not a number",
    ),
    ("postgresql://u@h/db?target_session_attrs=sometimes", "target_session_attrs in the"),
    ("postgresql://u@h1:5432,h2:70000/db", "has a port outside 1..65535"),
    ("postgresql://u@h:0/db", "has a port outside 1..65535"),
    ("postgresql://u@h1,h2/db?port=1,2,3", "hosts and port= list do not match"),
    ("postgresql://u@h/db?schema=a&schema=b", "gives schema more than once"),
    ("mysql://u@h/db", "is an unsupported database URL"),
    ("://x", "is not a database URL"),
    ("/", "--db '/' is a directory"),
    ("sqlite:////", "is a directory"),
]


@pytest.mark.parametrize(("url", "fragment"), NOT_DATABASES, ids=[u for u, _ in NOT_DATABASES])
def test_db_that_is_no_database_is_one_line_exit_2(
    url: str, fragment: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli(url, "list")
    assert_usage_error(result, fragment)
    assert ACCEPTED in result.stderr
    assert "secret" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # no file named after the typo


def test_db_from_environment_is_checked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["list"], env={"TODO_SESSIONS_URL": "sqlite:/"})
    assert_usage_error(result, "$TODO_SESSIONS_URL 'sqlite:/' is not a database URL")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "given",
    [
        "sqlite:///{dir}/a.db",
        "sqlite+aiosqlite:///{dir}/a.db",
        "{dir}/a",
        "a.db",
        "a.sqlite",
        "A.SQLITE3",
        "./a",
        "sub/a",
    ],
)
def test_db_accepted_forms(given: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    ok(given.format(dir=tmp_path), "migrate")
    assert len([p for p in tmp_path.rglob("*") if p.is_file()]) == 1


def test_db_from_environment(db: str) -> None:
    result = CliRunner().invoke(main, ["list", "--json"], env={"TODO_SESSIONS_URL": db})
    assert result.exit_code == 0
    assert {r["id"] for r in json.loads(result.stdout)} == {DEMO, BUILT}


def test_debug_shows_the_exception(db: str) -> None:
    result = cli(db, "--debug", "show", "nope")
    assert result.exit_code == 1
    assert type(result.exception).__name__ == "SessionNotFoundError"


def test_unexpected_exception_is_one_line_too(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise RuntimeError("renderer\nexploded")

    monkeypatch.setattr("todo_sessions.cli.sessions.Timeline", Broken)
    result = cli(db, "show", BUILT)
    assert_one_line_error(result, "unexpected RuntimeError: renderer exploded", stdout=BUILT)
    with pytest.raises(RuntimeError):
        CliRunner().invoke(main, ["--db", db, "--debug", "show", BUILT], catch_exceptions=False)


def test_ctrl_c_is_one_line_exit_130(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("todo_sessions.harness.demo.run_demo", interrupted)
    result = cli(db, "demo")
    assert result.exit_code == 130, (result.stderr, result.exception)
    assert result.stderr == "error: interrupted\n" and result.stdout == ""
    debug = cli(db, "--debug", "demo")
    assert debug.exit_code == 130
    assert "Traceback" in debug.stderr and debug.stderr.endswith("KeyboardInterrupt\n")


def test_progress_bar_only_on_a_terminal(db: str, tmp_path: Path) -> None:
    out = tmp_path / "demo.jsonl"
    plain = cli(db, "export", DEMO, "-o", str(out), env={"TTY_COMPATIBLE": "0"})
    assert plain.exit_code == 0
    events = len(lines_of(out)) - 1
    assert plain.stderr == f"exported {events} events of demo to {out}\n"  # and no bar

    terminal = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1"}
    shown = cli(db, "export", DEMO, "-o", str(out), env=terminal)
    assert shown.exit_code == 0
    assert f"{events}/{events}" in shown.stderr  # the bar, drawn on stderr
    assert len(lines_of(out)) == events + 1  # the file is the same either way


# -- real subprocesses ----------------------------------------------------------------------------


def run_module(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TODO_SESSIONS_URL"}
    return subprocess.run(
        [sys.executable, "-m", "todo_sessions.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
        check=False,
    )


def test_subprocess_demo_smoke_from_fresh_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/fresh.db"
    demo = run_module("--db", url, "demo", "--id", "smoke")
    assert demo.returncode == 0, demo.stderr
    assert demo.stderr == ""
    assert "demo session smoke" in demo.stdout and "[todos]" in demo.stdout

    listed = run_module("--db", url, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["id"] == "smoke" and row["turns"] == 2

    verified = run_module("--db", url, "verify")
    assert verified.returncode == 0, verified.stdout
    assert "✓ smoke" in verified.stdout


def test_subprocess_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/errors.db"
    for args, fragment, status in [
        (["--db", url, "show", "nope"], "session 'nope' not found", 1),
        (["--db", "bogus://x", "list"], "unsupported database URL", 2),
    ]:
        result = run_module(*args)
        assert result.returncode == status
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and fragment in lines[0], result.stderr
        assert "Traceback" not in result.stderr


def test_subprocess_help_names_the_program() -> None:
    result = run_module("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("Usage: todo-sessions ")
