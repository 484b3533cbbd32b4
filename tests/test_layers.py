"""The layering of the package, as import-linter contracts (pyproject.toml,
``[tool.importlinter]``): core -> store -> live sessions and service -> harness -> bridges ->
command line, the bridges independent of each other, the viewer without the harness, the core
without I/O and without the adapters (their event types register from their side), and no
import cycle anywhere. The checker runs on the package itself, and on a
copy of it with a deliberate violation, which it must refuse."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def copy_of_the_package(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT / "todo_sessions", tree / "todo_sessions", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_package_keeps_every_contract() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("added", "contract"),
    [
        # a lower layer importing a higher one
        ({"core/todos.py": "from ..store import schema"}, "core -> store -> live sessions"),
        ({"store/codec.py": "from .._session import Session"}, "core -> store -> live sessions"),
        # the store importing anything above it (a backend module included)
        (
            {"store/sqlite/writer.py": "from ..._jsonl import export_session"},
            "the store imports nothing above it",
        ),
        # two bridges that must stay independent
        ({"web/render.py": "from ..acp import mapping"}, "core -> store -> live sessions"),
        # the viewer and the harness
        ({"web/render.py": "from ..harness import loop"}, "the viewer never imports the harness"),
        # I/O in the pure core
        ({"core/todos.py": "import sqlite3"}, "the core does no I/O"),
        # the core registering an adapter's event types (they register from the adapter's side)
        (
            {"core/catalog.py": "from ..integrations import _vocabulary"},
            "the core knows nothing of the harness",
        ),
        ({"core/registry.py": "from .. import _vocabularies"}, "the core knows nothing"),
        # a cycle inside one subpackage
        (
            {"core/messages.py": "from . import todos", "core/todos.py": "from . import messages"},
            "no import cycles",
        ),
    ],
)
def test_a_deliberate_violation_is_refused(
    tmp_path: Path, added: dict[str, str], contract: str
) -> None:
    tree = copy_of_the_package(tmp_path)
    for module, line in added.items():
        path = tree / "todo_sessions" / module
        text = path.read_text(encoding="utf-8")
        path.write_text(f"{text}\n{line}  # noqa\n", encoding="utf-8")
    result = lint(tree)
    assert result.returncode != 0
    broken = result.stdout[result.stdout.index("Broken contracts") :]
    assert contract in broken, result.stdout
