"""`import todo_sessions` is light, and an interrupt while the command line loads is one line."""

from __future__ import annotations

import ast
import builtins
import importlib.metadata
import subprocess
import sys
from pathlib import Path
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


EXTRAS = (  # the modules of every extra, and the package's products above the library
    "asyncpg",
    "jsonschema",
    "acp",
    "starlette",
    "uvicorn",
    "jinja2",
    "claude_agent_sdk",
    "agents",
    "openai",
    "anthropic",
    "todo_sessions.harness",
    "todo_sessions.acp",
    "todo_sessions.web",
    "todo_sessions.integrations",
    "todo_sessions.cli",
)


def test_the_library_loads_neither_the_orm_nor_the_harness_nor_any_extra() -> None:
    """``import todo_sessions`` loads no SQLAlchemy at all (its ORM included), and every name
    of the root's surface, once used, loads neither the harness nor any extra."""
    code = (
        "import sys, todo_sessions\n"
        "def loaded(names):\n"
        "    return sorted(m for m in sys.modules if m in names or m.startswith("
        "tuple(n + '.' for n in names)))\n"
        "print(loaded(('sqlalchemy',)))\n"
        "for name in todo_sessions.__all__:\n"
        "    getattr(todo_sessions, name)\n"
        f"print(loaded({EXTRAS!r}))\n"
        "print('todo_sessions.store.store' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "[]", "True"]


def test_a_command_loads_its_own_module_and_no_other_command(tmp_path: Path) -> None:
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith("
        f"('todo_sessions.cli.', *{EXTRAS!r}))), file=sys.stderr))\n"
        "sys.argv[0] = 'todo-sessions'\n"
        "from todo_sessions._console import main\n"
        "main()\n"
    )
    db = str(tmp_path / "x.db")
    out = subprocess.run(
        [sys.executable, "-c", code, "--db", db, "list"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "no sessions\n"
    loaded = [f"todo_sessions.cli.{m}" for m in ("_context", "_db", "_options", "_render")]
    assert out.stderr == f"{sorted(['todo_sessions.cli', *loaded, 'todo_sessions.cli.sessions'])}\n"


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


# -- the import graph: dependencies point downward ------------------------------------------------

PACKAGE = Path(todo_sessions.__file__).parent

# What each layer may import of the package (anything outside the package is not checked here).
ALLOWED: dict[str, tuple[str, ...]] = {
    "core": ("core", "errors"),
    "harness/providers": ("harness.providers", "harness.deltas", "core", "errors"),
}


def _package_imports(path: Path) -> set[str]:
    """The `todo_sessions` modules a source file imports (top level or inside functions), as
    dotted names below the package: ``core.deltas``, ``errors``, ``agent.model`` ..."""
    package = list(path.relative_to(PACKAGE).parts[:-1])  # the package the file is in
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("todo_sessions."):
                    found.add(alias.name.removeprefix("todo_sessions."))
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module and node.module.startswith("todo_sessions."):
                    found.add(node.module.removeprefix("todo_sessions."))
                continue
            base = package[: len(package) - node.level + 1]
            target = ".".join([*base, node.module] if node.module else base)
            found.add(target)
    return {name for name in found if name}


def test_the_core_and_the_provider_formats_import_only_downward() -> None:
    wrong: list[str] = []
    for layer, allowed in ALLOWED.items():
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            for name in sorted(_package_imports(path)):
                if not any(name == a or name.startswith(a + ".") for a in allowed):
                    wrong.append(f"{path.relative_to(PACKAGE)} imports todo_sessions.{name}")
    assert wrong == []


def test_the_import_graph_check_reads_relative_imports() -> None:
    providers = PACKAGE / "harness" / "providers"
    assert _package_imports(providers / "anthropic.py") >= {"harness.deltas", "errors"}
    assert "harness.providers" in _package_imports(PACKAGE / "harness" / "adapters.py")


def test_the_stream_values_keep_their_public_names() -> None:
    from todo_sessions import harness
    from todo_sessions.harness import deltas, model

    for name in ("Finish", "ModelDelta", "ReasoningDelta", "TextDelta", "ToolCallDelta"):
        assert getattr(model, name) is getattr(deltas, name) is getattr(harness, name)
    assert model.content_from_deltas is deltas.content_from_deltas


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_the_command_line_answers_version_and_help_without_loading_the_library(flag: str) -> None:
    heavy = (*HEAVY[:-1], "asyncio", "todo_sessions.store", "todo_sessions.core.messages")
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: print(sorted(m for m in {heavy!r} if m in sys.modules), "
        "file=sys.stderr))\n"
        "sys.argv[0] = 'todo-sessions'\n"
        "from todo_sessions._console import main\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code, flag], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stderr == "[]\n"
    if flag == "--version":
        assert out.stdout == f"todo-sessions, version {todo_sessions.__version__}\n"
        assert todo_sessions.__version__ == importlib.metadata.version("todo-sessions")
    else:
        assert "Commands:" in out.stdout and "migrate" in out.stdout


def test_the_type_checkers_view_of_the_public_names_is_the_export_table() -> None:
    """`todo_sessions._EXPORTS` is the one list; the ``if TYPE_CHECKING:`` imports repeat it for
    type checkers (which cannot read a lazy table) and must name the same things."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
    )
    static: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names:
            assert alias.asname == alias.name  # "X as X": an explicit re-export
            static[alias.name] = f".{node.module}"
    assert static == todo_sessions._LAZY
    assert todo_sessions.__all__ == sorted([*todo_sessions._LAZY, "__version__"])


def test_implementation_subpackages_export_nothing() -> None:
    import importlib

    for name in ("store", "core", "harness.providers"):
        assert importlib.import_module(f"todo_sessions.{name}").__all__ == [], name
