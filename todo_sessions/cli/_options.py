"""What every command shares and ``--help`` needs: the commands' table, the option types and
help texts, the one-line usage error, and how the program was started.

Light on purpose: only click and the standard library (``--help`` and ``--version`` import this
module and nothing of the library).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable
from pathlib import Path, PurePath
from typing import IO, Any, NoReturn

import click

COMMANDS: dict[str, tuple[str, str]] = {
    "acp": ("acp", "Run an Agent Client Protocol agent over stdio."),
    "delete": ("editing", "Delete a session and all its events."),
    "demo": ("demo", "Run a scripted coding session and show its replay."),
    "export": ("exporting", "Export a session as JSONL."),
    "fork": ("editing", "Fork a session: a new session seeded with its events up to --at."),
    "import": ("exporting", "Import a JSONL export, plain or gzipped."),
    "list": ("sessions", "List sessions, newest activity first."),
    "messages": ("sessions", "Show the message history the model sees."),
    "migrate": ("maintenance", "Create or upgrade the database schema to the newest revision."),
    "prune": ("maintenance", "Archive, then delete, old sessions."),
    "recover": ("exporting", "Append a recovery file to its session."),
    "reindex": ("maintenance", "Rebuild the search index from the stored logs."),
    "retitle": ("editing", "Set a session's title."),
    "search": ("search", "Search what was said in every session."),
    "serve": ("serve", "Browse and replay sessions in a web browser."),
    "show": ("sessions", "Show a session's timeline."),
    "tag": ("editing", "Add tags to a session, or remove them."),
    "todos": ("sessions", "Show the current todo list of a session."),
    "verify": ("verify", "Check one session or all; exits 1 when anything is wrong."),
}
"""Each command: the module of this package that defines it (as ``<name>_cmd``) and the line
``todo-sessions --help`` shows for it, without importing that module."""


def command(name: str) -> Callable[[Callable[..., Any]], click.Command]:
    """``click.command(name)`` with its line of `COMMANDS` as the short help, its values
    checked (`CheckedCommand`)."""
    return click.command(name, cls=CheckedCommand, short_help=COMMANDS[name][1])


MAX_INT = 2**63 - 1
"""The largest integer an option may hold: seqs, ids, counts and moments are signed 64-bit
integers in the database (a larger one would reach the driver and fail there)."""
MIN_INT = -(2**63)

_SURROGATE = re.compile("[\ud800-\udfff]")


def _name(param: click.Parameter) -> str:
    """How a usage error names ``param``: its first option (``--limit``) or its metavar."""
    if isinstance(param, click.Option) and param.opts:
        return param.opts[0]
    return param.human_readable_name


def _raw_name(args: list[str], i: int) -> str:
    token = args[i]
    if token.startswith("-") and "=" in token:
        return token.split("=", 1)[0]
    if i and args[i - 1].startswith("-") and args[i - 1] != "--":
        return args[i - 1]
    return "an argument"


def check_args(args: list[str]) -> None:
    """No argument holds a NUL (a shell cannot pass one; a caller in the same process can):
    for a file name with one, which ``open`` or ``stat`` refused while click read it."""
    for i, token in enumerate(args):
        if isinstance(token, str) and "\x00" in token:
            raise UsageError(f"{_raw_name(args, i)} must not contain NUL characters")


def check_value(name: str, value: Any) -> None:
    """One value of a parsed option or argument, as it will reach the library and its
    driver: an int within a signed 64-bit integer, a float finite, a string without NUL and
    valid Unicode (a byte that is not UTF-8 in ``argv`` arrives as a lone surrogate), a path
    without NUL (any other byte is a valid file name). A `UsageError` naming the option."""
    if isinstance(value, tuple | list):
        for one in value:
            check_value(name, one)
    elif isinstance(value, bool):
        return
    elif isinstance(value, int):
        if not MIN_INT <= value <= MAX_INT:
            raise UsageError(f"{name} must be from {MIN_INT} to {MAX_INT}, got {value}")
    elif isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_INT:
            raise UsageError(f"{name} must be a finite number, got {value}")
    elif isinstance(value, str):
        if "\x00" in value:
            raise UsageError(f"{name} must not contain NUL characters")
        if _SURROGATE.search(value):
            raise UsageError(f"{name} must be UTF-8 text, got {value!r}")
    elif isinstance(value, PurePath) and "\x00" in str(value):
        raise UsageError(f"{name} must not contain NUL characters")


def check_params(ctx: click.Context, params: list[click.Parameter]) -> None:
    """Every value ``params`` parsed into ``ctx`` (`check_value`): the one place the command
    line checks what reaches the library."""
    for param in params:
        if param.name is not None and param.name in ctx.params:
            check_value(_name(param), ctx.params[param.name])


class CheckedCommand(click.Command):
    """A command whose arguments and parsed values are checked at the boundary
    (`check_args`, `check_params`) before the command runs."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # click's parser consumes the list
        try:
            rest = super().parse_args(ctx, args)
        except ValueError:  # a file type met a NUL in open() or stat()
            check_args(given)
            raise
        check_params(ctx, self.get_params(ctx))
        return rest


DB_HELP = (
    "Database: sqlite:///path/to/file.db, postgresql://user@host/dbname, or the path of an "
    "SQLite file (containing a / or ending in .db, .sqlite or .sqlite3). Default: "
    "$TODO_SESSIONS_URL, else an SQLite file sessions.db in the user's data directory (on "
    "Linux ~/.local/share/todo-sessions/sessions.db)."
)
SCHEMA_HELP = (
    "PostgreSQL: keep todo-sessions' tables in this schema (created by `migrate`), e.g. next "
    "to an application's own `sessions` table. The same as ?schema=NAME in the database URL."
)
TABLE_PREFIX_HELP = (
    "SQLite: put this in the name of every todo-sessions table (agent_sessions), index and "
    "trigger (ix_agent_..., trg_agent_...), e.g. agent_. "
    "The same as ?table_prefix=PREFIX in the database URL."
)

CHAIN_KEY_ENV = "TODO_SESSIONS_CHAIN_KEY"
"""The secret every command keys the hash chain with, when set (docs/design.md, "The hash
chain"); ``verify --key-env VAR`` reads another variable."""

LIST_LIMIT = 50

SEARCH_KINDS = ("user", "assistant", "reasoning", "tool_call", "tool_result", "todo", "summary")
"""`core.search.KINDS` (spelled out: the library loads only when a command runs)."""


class UsageError(click.UsageError):
    """A usage error shown as one line, ``error: …``, with exit status 2 (like click's own,
    which the group turns into this)."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def one_line(exc: click.UsageError) -> UsageError:
    """click's usage error (usage, hint and message on three lines) as one line."""
    text = " ".join(exc.format_message().split()).removesuffix(".")
    if exc.ctx is not None:
        text += f" (see '{exc.ctx.command_path} --help')"
    return UsageError(text, exc.ctx)


def interrupted() -> NoReturn:
    click.echo("error: interrupted", err=True)
    sys.exit(130)


def program() -> list[str]:
    """How this process was started, for the commands that hints print: the console script as
    the user typed it (``.venv/bin/todo-sessions`` stays a path), ``python -m …``, else
    ``todo-sessions``."""
    argv0 = sys.argv[0] if sys.argv else ""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    module = str(getattr(spec, "name", "")).removesuffix(".__main__")
    if module in ("todo_sessions", "todo_sessions.cli"):
        return [_shown_path(sys.executable or "python3"), "-m", module]
    if Path(argv0).name.startswith("todo-sessions"):
        return [argv0]
    return ["todo-sessions"]


def _shown_path(path: str) -> str:
    """``path`` relative to the working directory when inside it, else as it is."""
    try:
        relative = Path(path).relative_to(Path.cwd())
    except ValueError:
        return path
    return str(relative) if relative.parent != Path() else f"./{relative}"


class AtLeast(click.ParamType):
    """An int of at least ``minimum`` and at most ``maximum`` (`MAX_INT`); anything else is the
    one-line usage error ``--at must be a seq >= 0, got '-1'``."""

    def __init__(self, minimum: int, what: str, metavar: str, maximum: int = MAX_INT) -> None:
        self.minimum = minimum
        self.what = what
        self.name = metavar
        self.maximum = maximum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            number = int(value)
        except (TypeError, ValueError):
            number = None
        if number is None or number < self.minimum or isinstance(value, bool):
            name = param.opts[0] if param is not None and param.opts else "value"
            raise UsageError(f"{name} must be {self.what}, got {value!r}", ctx)
        if number > self.maximum:
            name = param.opts[0] if param is not None and param.opts else "value"
            raise UsageError(f"{name} must be at most {self.maximum}, got {value!r}", ctx)
        return number


SEQ = AtLeast(0, "a seq >= 0", "SEQ")
COUNT = AtLeast(1, "a number >= 1", "N")
NATURAL = AtLeast(0, "a number >= 0", "N")
BYTES = AtLeast(1, "a number >= 1", "BYTES", maximum=2**62)
"""A size in bytes (below `MAX_INT`: the readers add to it)."""
SEARCH_COUNT = AtLeast(1, "a number >= 1", "N", maximum=1000)
"""Hits of a search page (`SessionStore.search` returns at most 1,000)."""


class _Moment(click.ParamType):
    """A moment as epoch ms (`core.moments.parse_moment`): an ISO 8601 date or date and time
    (local time unless it has an offset or Z), or a duration ago (``30m``, ``2h``, ``7d``)."""

    name = "WHEN"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        from ..core.moments import parse_moment
        from ..store.store import wall_clock_ms

        try:
            return parse_moment(str(value), now_ms=wall_clock_ms(), local=True).ms
        except ValueError as exc:
            name = param.opts[0] if param is not None and param.opts else "value"
            raise UsageError(f"{name} {exc}", ctx) from None


MOMENT = _Moment()


def at_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--at", "at_seq", type=SEQ, help=help)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
