"""The command line as a user runs it: the installed ``todo-sessions`` script in a subprocess.

Each class of error the CLI reports is run once for real, checking the exit status (2 usage
error, 1 failed command, 130 interrupted) and that stderr is exactly one ``error: …`` line;
plus the hints the demo prints, ``export -o -``, ``--at`` past the end, ``delete`` at a
terminal (a pty) and without one, and Ctrl-C while the database is being reached.
"""

from __future__ import annotations

import os
import random
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each case starts a process (about a second of imports)

SCRIPT = Path(sys.executable).parent / "todo-sessions"
PROGRAM = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "todo_sessions"]
SESSION = "demo"


def run(
    *args: str,
    cwd: Path,
    program: list[str] = PROGRAM,
    input: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``todo-sessions ARGS`` (stdin empty unless ``input``; no $TODO_SESSIONS_URL unless
    ``env`` has it)."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "TODO_SESSIONS_URL"}
    return subprocess.run(
        [*program, *args],
        cwd=cwd,
        env=env,
        input=input if input is not None else "",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def assert_error(done: subprocess.CompletedProcess[str], status: int, fragment: str) -> None:
    """Exit ``status``, stderr exactly one line ``error: …`` holding ``fragment``, no stdout."""
    assert done.returncode == status, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and fragment in lines[0], lines[0]
    assert done.stdout == ""


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database holding the demo session, made by ``todo-sessions demo``."""
    folder = tmp_path_factory.mktemp("subprocess")
    done = run("--db", "template.db", "demo", "--id", SESSION, cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder / "template.db"


@pytest.fixture
def db(template: Path, tmp_path: Path) -> str:
    """A copy of the template, as a plain path relative to the working directory tmp_path."""
    shutil.copy(template, tmp_path / "sessions.db")
    return "sessions.db"


@pytest.fixture(scope="module")
def last(template: Path) -> int:
    """The demo session's last seq."""
    done = run("--db", str(template), "export", SESSION, cwd=template.parent)
    return len(done.stdout.splitlines()) - 2


# -- --db -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("sqlite:/", "is not a database URL"),
        ("notaurl", "is neither a database URL nor a file path"),
        ("sqlite:///", "is an in-memory database"),
        ("postgresql://", "names no database"),
        ("", "--db is empty"),
        ("postgresql://u:pw@localhost:abc/db", "has a port that is not a number"),
    ],
)
def test_db_that_is_no_database(value: str, fragment: str, tmp_path: Path) -> None:
    done = run("--db", value, "import", "-", cwd=tmp_path, input="")
    assert_error(done, 2, fragment)
    assert "pw" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_db_from_the_environment_is_checked(tmp_path: Path) -> None:
    env = {**os.environ, "TODO_SESSIONS_URL": "notaurl"}
    done = run("list", cwd=tmp_path, env=env)
    assert_error(done, 2, "$TODO_SESSIONS_URL 'notaurl' is neither")
    assert list(tmp_path.iterdir()) == []


# -- usage errors, failures, --debug --------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--bogus", "list"], "No such option '--bogus'"),
        (["show"], "Missing argument 'SESSION_ID'"),
        (["fork", SESSION, "--at", "-1"], "--at must be a seq >= 0, got '-1'"),
    ],
)
def test_usage_errors_are_one_line_exit_2(
    db: str, tmp_path: Path, args: list[str], fragment: str
) -> None:
    assert_error(run("--db", db, *args, cwd=tmp_path), 2, fragment)


def test_failures_are_one_line_exit_1_and_debug_shows_the_traceback(
    db: str, tmp_path: Path
) -> None:
    assert_error(run("--db", db, "show", "nope", cwd=tmp_path), 1, "session 'nope' not found")
    debug = run("--db", db, "--debug", "show", "nope", cwd=tmp_path)
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr and "SessionNotFoundError" in debug.stderr


def test_import_random_bytes_names_the_line(
    db: str, tmp_path: Path, template: Path, last: int
) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x80" + random.Random(1).randbytes(3000))
    done = run("--db", db, "import", str(junk), cwd=tmp_path)
    assert_error(done, 1, "line 1: not UTF-8 text (byte 0x80 at column 1)")
    exported = run("--db", str(template), "export", SESSION, cwd=tmp_path).stdout
    junk.write_bytes(exported.encode() + b"\xff\n")
    piped = subprocess.run(  # binary stdin
        [*PROGRAM, "--db", db, "import", "-", "--as", "copy"],
        input=junk.read_bytes(),
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert piped.returncode == 1
    line = last + 3  # the header, the events, then the bad line
    assert piped.stderr.decode() == f"error: line {line}: not UTF-8 text (byte 0xff at column 1)\n"


# -- output ---------------------------------------------------------------------------------------


def test_export_dash_is_stdout(db: str, tmp_path: Path) -> None:
    plain = run("--db", db, "export", SESSION, cwd=tmp_path)
    dash = run("--db", db, "export", SESSION, "-o", "-", cwd=tmp_path)
    assert dash.returncode == 0 and dash.stderr == ""
    assert dash.stdout == plain.stdout and dash.stdout.startswith('{"kind":')
    assert not (tmp_path / "-").exists()


def test_at_past_the_end_is_the_end_with_a_note(db: str, tmp_path: Path, last: int) -> None:
    note = f"note: session {SESSION} ends at seq {last}; showing seq {last}\n"
    for command in ("todos", "messages"):
        latest = run("--db", db, command, SESSION, cwd=tmp_path)
        past = run("--db", db, command, SESSION, "--at", str(last + 100), cwd=tmp_path)
        assert past.returncode == 0 and past.stderr == note
        assert past.stdout == latest.stdout
    fork = run("--db", db, "fork", SESSION, "--at", "99999", "--as", "f", cwd=tmp_path)
    assert fork.returncode == 0
    assert fork.stderr == f"note: session {SESSION} ends at seq {last}; forking at seq {last}\n"
    assert f"({last + 1} events inherited)" in fork.stdout


def test_at_zero(db: str, tmp_path: Path) -> None:
    assert run("--db", db, "messages", SESSION, "--at", "0", cwd=tmp_path).stdout == (
        "(no messages)\n"
    )
    assert run("--db", db, "todos", SESSION, "--at", "0", cwd=tmp_path).stdout == (
        "(no todo list)\n"
    )


def test_demo_hints_run_as_printed(tmp_path: Path) -> None:
    folder = tmp_path / "a folder"
    folder.mkdir()
    db = f"sqlite:///{folder}/it's.db"
    demo = run("--db", db, "demo", "--id", "my demo", cwd=tmp_path)
    assert demo.returncode == 0 and demo.stderr == "", demo.stderr
    assert f"stored in {folder}/it's.db\n" in demo.stdout
    hint = demo.stdout.split("replay it again with: ", 1)[1].splitlines()[0]
    assert shlex.split(hint) == [*PROGRAM, "--db", db, "show", "my demo"]
    replay = subprocess.run(hint, shell=True, cwd=tmp_path, capture_output=True, text=True)
    assert replay.returncode == 0, replay.stderr
    assert "Fix mean() in calc.py" in replay.stdout

    listed = run("--db", db, "list", "--limit", "1", cwd=tmp_path)
    hint = listed.stdout.split("next page: ", 1)[1].strip()
    assert shlex.split(hint)[len(PROGRAM) :] == [
        "--db",
        db,
        "list",
        "--limit",
        "1",
        "--before",
        "my demo",
    ]
    page = subprocess.run(hint, shell=True, cwd=tmp_path, capture_output=True, text=True)
    assert page.returncode == 0 and page.stdout.strip() == "no sessions"


def test_module_hint_names_python_dash_m(tmp_path: Path) -> None:
    module = [sys.executable, "-m", "todo_sessions"]
    demo = run("--db", "x.db", "demo", "--id", "m", cwd=tmp_path, program=module)
    assert demo.returncode == 0, demo.stderr
    hint = demo.stdout.split("replay it again with: ", 1)[1].splitlines()[0]
    assert shlex.split(hint) == [*module, "--db", "x.db", "show", "m"]


# -- delete ---------------------------------------------------------------------------------------


def test_delete_without_a_terminal(db: str, tmp_path: Path) -> None:
    refused = run("--db", db, "delete", SESSION, cwd=tmp_path, input="y\n")
    assert_error(refused, 1, "refusing to delete without --yes when stdin is not a terminal")
    assert_error(run("--db", db, "delete", "nope", cwd=tmp_path), 1, "session 'nope' not found")


def _read_until(fd: int, marker: bytes, timeout: float = 60) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise AssertionError(f"no {marker!r} in {seen!r}")
        chunk = os.read(fd, 4096)
        if not chunk:
            raise AssertionError(f"no {marker!r} in {seen!r}")
        seen += chunk
    return seen


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pty")
@pytest.mark.parametrize(("answer", "status"), [(b"n\n", 1), (b"y\n", 0), (None, 130)])
def test_delete_at_a_terminal(db: str, tmp_path: Path, answer: bytes | None, status: int) -> None:
    main, terminal = os.openpty()
    env = {k: v for k, v in os.environ.items() if k != "TODO_SESSIONS_URL"}
    child = subprocess.Popen(
        [*PROGRAM, "--db", db, "delete", SESSION],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    os.close(terminal)
    try:
        assert child.stderr is not None
        asked = _read_until(child.stderr.fileno(), b"[y/N]")
        assert asked.startswith(f"delete session {SESSION} (".encode())
        if answer is None:
            # Ctrl-C at the question, once the child waits in read() (a signal that arrives
            # between the prompt and the read is seen only when the read returns).
            time.sleep(0.5)
            child.send_signal(signal.SIGINT)
        else:
            os.write(main, answer)
        out, err = child.communicate(timeout=60)
    finally:
        os.close(main)
        if child.poll() is None:
            child.kill()
    assert child.returncode == status, err
    last = err.decode().splitlines()[-1] if err.strip() else ""
    expected = {0: "", 1: "error: not deleted", 130: "error: interrupted"}[status]
    assert last == expected
    assert (b"deleted demo" in out) == (status == 0)


# -- Ctrl-C ---------------------------------------------------------------------------------------


def test_ctrl_c_while_reaching_the_database(tmp_path: Path) -> None:
    """The server accepts the connection and never answers: the CLI waits, inside its event
    loop, until Ctrl-C; then one line and exit status 130."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(60)
        port = server.getsockname()[1]
        url = f"postgresql://nobody@127.0.0.1:{port}/db?connect_timeout=60"
        child = subprocess.Popen(
            [*PROGRAM, "--db", url, "list"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        try:
            connection, _ = server.accept()  # the CLI is past start-up, waiting for an answer
            with connection:
                time.sleep(0.2)
                child.send_signal(signal.SIGINT)
                out, err = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
    assert child.returncode == 130
    assert err == "error: interrupted\n" and out == ""
