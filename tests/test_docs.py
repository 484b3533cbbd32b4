"""Every CLI command is documented (help text in the code, an entry in README.md), and so is
every error class (drawn under its parent in errors.py and docs/design.md, named in README.md).

A command counts as mentioned in the README's "## Command line" section when the section shows
``todo-sessions [options] NAME`` or has ``NAME`` at the start of an inline code span.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from todo_sessions.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"
COMMANDS = main.list_commands(click.Context(main))


def command_named(name: str) -> click.Command:
    command = main.get_command(click.Context(main), name)
    assert command is not None, name
    return command


def test_there_are_commands() -> None:
    assert {"migrate", "demo", "list", "show", "todos", "messages", "export", "import"} <= set(
        COMMANDS
    )
    assert {"verify", "fork", "delete"} <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_command_has_help(name: str) -> None:
    command = command_named(name)
    assert (command.help or "").strip(), f"`todo-sessions {name}` has no help text"
    for param in command.params:
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"`todo-sessions {name} {param.opts[0]}` has no help"
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0
    assert " ".join((command.help or "").split()) in " ".join(result.stdout.split())


def test_the_help_lines_are_the_commands_own() -> None:
    """``--help`` lists the commands from a table without loading them: the table names every
    command each module of the package defines, and the line each shows."""
    import importlib
    import pkgutil

    import todo_sessions.cli as package
    from todo_sessions.cli._options import COMMANDS as TABLE

    defined: dict[str, str] = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"todo_sessions.cli.{info.name}")
        for value in vars(module).values():
            if isinstance(value, click.Command) and value.name:
                defined[value.name] = info.name
    assert defined == {name: module for name, (module, _) in TABLE.items()}
    for name, (_, line) in TABLE.items():
        assert command_named(name).get_short_help_str(limit=200) == line
    listed = CliRunner().invoke(main, ["--help"]).stdout
    assert all(f"  {name}  " in listed and line in listed for name, (_, line) in TABLE.items())


def test_group_options_have_help() -> None:
    assert (main.help or "").strip()
    for param in main.params:
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"`todo-sessions {param.opts[0]}` has no help"


def command_line_section() -> str:
    text = README.read_text(encoding="utf-8") if README.exists() else ""
    found = re.search(r"^## Command line\b.*?(?=^## |\Z)", text, flags=re.M | re.S)
    if found is None:
        pytest.skip('README.md has no "## Command line" section yet')
    return found.group(0)


@pytest.mark.parametrize("name", COMMANDS)
def test_command_is_in_readme(name: str) -> None:
    section = command_line_section()
    invoked = rf"todo-sessions(?:\s+--?[\w-]+(?:[ =](?!{name}\b)\S+)?)*\s+{name}\b"
    code_span = rf"`{name}(?:[\s`])"
    assert re.search(invoked, section) or re.search(code_span, section), (
        f'README.md "## Command line" does not mention `todo-sessions {name}`'
    )


# -- the error hierarchy ---------------------------------------------------------------------------

DESIGN = README.parent / "docs" / "design.md"


def _tree(text: str) -> dict[str, str]:
    """Class name -> its parent's, read from a ``├──``/``└──`` drawing."""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        found = re.match(r"^([\s│]*(?:├── |└── ))([A-Z]\w*Error)\b", line) or re.match(
            r"^(\s*)([A-Z]\w*Error)\b", line
        )  # a child under a connector, or the root (continuation lines have neither)
        if found is None:
            continue
        depth = len(found.group(1))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            parents[found.group(2)] = stack[-1][1]
        stack.append((depth, found.group(2)))
    return parents


@pytest.mark.parametrize(
    "source",
    ["errors.py", "design.md"],
)
def test_every_error_class_is_drawn_under_its_parent(source: str) -> None:
    import todo_sessions.errors as errors

    if source == "errors.py":
        text = errors.__doc__ or ""
    else:
        design = DESIGN.read_text()
        text = design[design.index("```\nTodoSessionsError") : design.index("Driver exceptions")]
    drawn = _tree(text)
    classes = {name: getattr(errors, name) for name in errors.__all__}
    expected = {
        name: next(b.__name__ for b in cls.__bases__ if issubclass(b, errors.TodoSessionsError))
        for name, cls in classes.items()
        if name != "TodoSessionsError"
    }
    assert drawn == expected


def test_every_error_class_is_named_in_the_readme() -> None:
    import todo_sessions.errors as errors

    text = README.read_text()
    assert [name for name in errors.__all__ if f"`{name}`" not in text] == []


# -- the names the docs use are the exported ones ------------------------------------------------

ROOT = README.parent
USER_DOCS = [README, *(ROOT / "docs" / f"{name}.md" for name in ("format", "providers", "web"))]
"""What a user reads. docs/design.md also describes the internals (recorders, mappers, rows)
by their own names; its dotted paths are checked, its bare names are not."""
ALL_DOCS = [*USER_DOCS, ROOT / "docs" / "design.md"]
DOCUMENTED_SUBPACKAGES = (
    "todo_sessions.acp",
    "todo_sessions.alembic",
    "todo_sessions.harness",
    "todo_sessions.harness.tools",
    "todo_sessions.web",
    # the SDK session backends: one module per SDK, each behind its extra
    "todo_sessions.integrations.claude_agent_sdk",
    "todo_sessions.integrations.openai_agents",
    # other agents' session files (the Claude Code importer needs the [claude] extra)
    "todo_sessions.importers",
    "todo_sessions.importers.claude_code",
)


def _package_classes() -> set[str]:
    """Every public class and type alias defined at the top of a module of the package."""
    import ast

    found: set[str] = set()
    for path in (ROOT / "todo_sessions").rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found.add(node.name)
    return found


def _subpackage_exports() -> set[str]:
    import importlib

    names: set[str] = set()
    for package in DOCUMENTED_SUBPACKAGES:
        try:
            names |= set(importlib.import_module(package).__all__)
        except ImportError:  # an extra that is not installed
            continue
    return names


def test_every_name_the_docs_import_is_exported() -> None:
    import todo_sessions

    imported: set[str] = set()
    for doc in ALL_DOCS:
        for found in re.finditer(r"from todo_sessions import ([^\n]+)", doc.read_text()):
            imported |= {n.strip(" ()") for n in found.group(1).split(",") if n.strip(" ()")}
    assert imported and sorted(imported - set(todo_sessions.__all__)) == []


def test_every_class_the_user_docs_name_is_exported() -> None:
    import todo_sessions

    classes = _package_classes()
    exported = set(todo_sessions.__all__) | _subpackage_exports()
    named: dict[str, str] = {}
    for doc in USER_DOCS:
        for found in re.finditer(r"`([A-Z][A-Za-z0-9]*)(?:\([^`]*\))?`", doc.read_text()):
            if found.group(1) in classes:
                named.setdefault(found.group(1), doc.name)
    assert len(named) > 20  # the check sees the docs' names
    assert {name: doc for name, doc in named.items() if name not in exported} == {}


def test_every_error_class_is_exported() -> None:
    """Each error is exported where its user looks: the store's from the root, the model
    calls' from the harness; `todo_sessions.errors` has them all."""
    import todo_sessions
    import todo_sessions.errors as errors
    import todo_sessions.harness as harness

    exported = set(todo_sessions.__all__) | set(harness.__all__)
    assert sorted(set(errors.__all__) - exported) == []


def test_every_dotted_path_in_the_docs_resolves() -> None:
    """Modules and their attributes, that is; the names of the package's loggers and of its
    entry-point group are not."""
    import importlib

    from todo_sessions._vocabularies import VOCABULARY_GROUP

    loggers = {
        found.group(1)
        for path in (ROOT / "todo_sessions").rglob("*.py")
        for found in re.finditer(r'getLogger\("([^"]+)"\)', path.read_text(encoding="utf-8"))
    } | {VOCABULARY_GROUP}
    wrong: list[str] = []
    for doc in ALL_DOCS:
        for found in re.finditer(r"`(todo_sessions(?:\.[A-Za-z_][A-Za-z0-9_]*)+)", doc.read_text()):
            if found.group(1) in loggers:
                continue
            parts = found.group(1).split(".")
            for cut in range(len(parts), 0, -1):
                try:
                    value: object = importlib.import_module(".".join(parts[:cut]))
                except ImportError:
                    continue
                try:
                    for attribute in parts[cut:]:
                        value = getattr(value, attribute)
                except AttributeError:
                    wrong.append(f"{doc.name}: {found.group(1)}")
                break
    assert wrong == []
