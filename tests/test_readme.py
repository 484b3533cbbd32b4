"""The README's code runs as written.

Every ```python block runs in a fresh subprocess, in a temporary directory, with
``TODO_SESSIONS_URL`` pointing at a temporary SQLite file. Every ```sh block runs the same way
under ``bash -eu -o pipefail`` with this interpreter's scripts directory (where
``todo-sessions`` is installed) first on ``PATH``, except the set-up commands that create a
virtual environment and install into it. ```json blocks must parse.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SCRIPTS = Path(sys.executable).parent
SET_UP = re.compile(r"python3? -m venv|pip install")
"""Blocks that build the environment these tests already run in."""


def blocks(language: str) -> list[tuple[int, str]]:
    """(line number, code) of each fenced block in ``language``."""
    text = README.read_text(encoding="utf-8")
    found = re.finditer(rf"^```{language}\n(.*?)^```\s*$", text, flags=re.M | re.S)
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in found]


def params(language: str) -> list[object]:
    return [pytest.param(code, id=f"{language}-line-{line}") for line, code in blocks(language)]


def run(command: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TODO_SESSIONS_URL": f"sqlite:///{tmp_path}/readme.db",
        "PATH": f"{SCRIPTS}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return subprocess.run(
        command,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_readme_has_code() -> None:
    assert len(blocks("python")) >= 2
    assert [code for _, code in blocks("sh") if not SET_UP.search(code)]


@pytest.mark.parametrize("code", params("python"))
def test_python_block_runs(code: str, tmp_path: Path) -> None:
    done = run([sys.executable, "-c", code], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("code", params("sh"))
def test_sh_block_runs(code: str, tmp_path: Path) -> None:
    if SET_UP.search(code):
        pytest.skip("sets up the virtual environment these tests run in")
    if not (SCRIPTS / "todo-sessions").exists() or shutil.which("bash") is None:
        pytest.skip("needs bash and the todo-sessions script next to this interpreter")
    done = run(["bash", "-eu", "-o", "pipefail", "-c", code], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error:" not in done.stderr


@pytest.mark.parametrize("code", params("json"))
def test_json_block_parses(code: str) -> None:
    json.loads(code)
