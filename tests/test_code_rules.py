"""The rules the code keeps, checked on every run: ruff's lint (complexity, C901 at 12,
included) and format with no complexity exemption, modules under 500 lines and functions
under 80 (the table definitions aside)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "todo_sessions"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
TABLES = {("store/schema.py", "define_tables")}
"""Functions that are one table definition each: a column a line, longer than 80 lines."""

DEBT: dict[str, str] = {}
"""What does not keep a rule yet, each with where it is being paid off. The list only shrinks:
an entry that keeps its rule again fails `test_the_debt_list_only_shrinks` until it is removed."""


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "todo_sessions", "tests", "bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _complex() -> dict[str, int]:
    """``path:function`` -> complexity, of each function over the limit (ruff's C901)."""
    result = _ruff("check", "--select", "C901", "--output-format", "concise", "--quiet")
    found: dict[str, int] = {}
    for line in result.stdout.splitlines():
        hit = re.match(r"(\S+?):\d+:\d+: C901 `(\w+)` is too complex \((\d+) > 12\)", line)
        if hit:
            path = Path(hit.group(1)).resolve().relative_to(PACKAGE)
            found[f"{path}:{hit.group(2)}"] = int(hit.group(3))
    return found


def test_ruff_finds_nothing_but_the_debt() -> None:
    result = _ruff("check", "--extend-ignore", "C901")
    assert result.returncode == 0, result.stdout + result.stderr
    assert {name for name in _complex() if f"complex {name}" not in DEBT} == set()


def test_ruff_format_changes_nothing() -> None:
    result = _ruff("format", "--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_complexity_rule_is_on_and_has_no_exemption() -> None:
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^select = \[.*"C90"', config, re.M)
    assert re.search(r"^max-complexity = 12$", config, re.M)
    exempt = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"noqa:[^#\n]*C9", line)
    ]
    assert exempt == []


def test_modules_are_small() -> None:
    big = {
        str(path.relative_to(PACKAGE)): lines
        for path in _sources()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert {name: lines for name, lines in big.items() if f"module {name}" not in DEBT} == {}


def test_functions_are_short() -> None:
    long: dict[str, int] = {}
    for path in _sources():
        name = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES and (name, node.name) not in TABLES:
                    long[f"{name}:{node.name}"] = lines
    assert {name: n for name, n in long.items() if f"long {name}" not in DEBT} == {}


def _breaking() -> set[str]:
    """Every rule broken now, in the spelling of `DEBT`'s keys."""
    found = {f"complex {name}" for name in _complex()}
    for path in _sources():
        name = str(path.relative_to(PACKAGE))
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found.add(f"module {name}")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES and (name, node.name) not in TABLES:
                    found.add(f"long {name}:{node.name}")
    return found


def test_the_debt_list_only_shrinks() -> None:
    assert sorted(set(DEBT) - _breaking()) == []
