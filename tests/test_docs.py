"""Every CLI command is documented: help text in the code, and an entry in README.md.

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
