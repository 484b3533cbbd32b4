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
COMMANDS = sorted(main.commands)


def test_there_are_commands() -> None:
    assert {"migrate", "demo", "list", "show", "todos", "messages", "export", "import"} <= set(
        COMMANDS
    )
    assert {"verify", "fork", "delete"} <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_command_has_help(name: str) -> None:
    command = main.commands[name]
    assert (command.help or "").strip(), f"`todo-sessions {name}` has no help text"
    for param in command.params:
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"`todo-sessions {name} {param.opts[0]}` has no help"
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0
    assert " ".join((command.help or "").split()) in " ".join(result.stdout.split())


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
