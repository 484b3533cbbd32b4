"""`import todo_sessions` is light, and an interrupt while the command line loads is one line."""

from __future__ import annotations

import builtins
import subprocess
import sys
from typing import Any

import pytest

import todo_sessions
from todo_sessions import _console

HEAVY = ("sqlalchemy", "alembic", "pydantic", "asyncpg", "acp", "orjson", "rich", "click")


def test_importing_the_package_loads_no_heavy_dependency() -> None:
    code = (
        "import sys, todo_sessions\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
        "todo_sessions.SessionStore\n"
        "print('sqlalchemy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "True"]  # loaded on first use, not before


def test_every_public_name_resolves() -> None:
    assert sorted(dir(todo_sessions)) == sorted(todo_sessions.__all__)
    for name in todo_sessions.__all__:
        assert getattr(todo_sessions, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        todo_sessions.nope  # noqa: B018


def test_an_interrupt_while_the_command_line_loads_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_import = builtins.__import__

    def interrupted(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "cli" or name.endswith(".cli"):
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "todo_sessions.cli", raising=False)
    monkeypatch.setattr(builtins, "__import__", interrupted)
    monkeypatch.setattr(sys, "argv", ["todo-sessions", "list"])
    with pytest.raises(SystemExit) as exit_:
        _console.main()
    assert exit_.value.code == 130
    assert capsys.readouterr().err == "error: interrupted\n"
    monkeypatch.setattr(sys, "argv", ["todo-sessions", "--debug", "list"])
    with pytest.raises(KeyboardInterrupt):
        _console.main()
