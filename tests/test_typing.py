"""The package ships ``py.typed``: its annotations must type-check, and a user's type checker
sees them (the blocking API's too)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_package_type_checks_with_mypy() -> None:
    pytest.importorskip("mypy")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "-p", "todo_sessions"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr


USER_PROGRAM = """
from todo_sessions import SessionHeader
from todo_sessions.sync import SyncSessionService, SyncSessionStore

with SyncSessionStore("sqlite:///sessions.db") as store:
    store.create(SessionHeader(id="s1", created_at=1_764_000_000_000))
    reveal_type(store.append("s1", []))
    reveal_type(store.current_todos("s1"))
    reveal_type(store.stream("s1"))
    reveal_type(store.list(limit=10))
    reveal_type(store.dialect)
    for event in store.follow("s1", 0, poll_interval=0.1):
        reveal_type(event.seq)
    store.append("s1", [], lease="not a lease")

with SyncSessionService(store) as service:
    session = service.new(cwd="/repo")
    reveal_type(session)
    reveal_type(service.flush(session.id))
    reveal_type(service.live_ids())
"""

# (line, revealed type; older mypy releases spell "str" as "builtins.str").
REVEALED = [
    (7, "str"),
    (8, "list[todo_sessions.core.todos.TodoItem] | None"),
    (9, "typing.Iterator[todo_sessions.core.envelope.SessionEvent]"),
    (10, "list[todo_sessions.store.results.SessionSummary]"),
    (11, "str"),
    (13, "int"),
    (18, "todo_sessions._session.Session"),
    (19, "None"),
    (20, "list[str]"),
]


@pytest.mark.slow
def test_mypy_strict_sees_the_blocking_api_s_types(tmp_path: Path) -> None:
    """A user's file type-checked with ``mypy --strict``: each blocking method returns the type
    its async twin's result has (not ``Any``), and a wrong argument is an error."""
    pytest.importorskip("mypy")
    program = tmp_path / "user.py"
    program.write_text(USER_PROGRAM)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent"),
            *("--no-incremental", "--no-error-summary", "--hide-error-context", str(program)),
        ],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = done.stdout.splitlines()
    revealed = [
        (int(line.split(":")[1]), line.split('Revealed type is "')[1].rstrip('"'))
        for line in (line.replace("builtins.", "") for line in lines)
        if "Revealed type is" in line
    ]
    errors = [line.split(": error: ")[1] for line in lines if ": error: " in line]
    assert revealed == REVEALED, done.stdout + done.stderr
    assert len(errors) == 1 and errors[0].startswith('Argument "lease" to "append"'), done.stdout
