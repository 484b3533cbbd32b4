"""What every command shares and ``--help`` needs: the commands' table, the option types and
help texts, the one-line usage error, and how the program was started.

Light on purpose: only click and the standard library (``--help`` and ``--version`` import this
module and nothing of the library).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, NoReturn

import click

COMMANDS: dict[str, tuple[str, str]] = {
    "acp": ("acp", "Run an Agent Client Protocol agent over stdio."),
    "delete": ("editing", "Delete a session and all its events."),
    "demo": ("demo", "Run a scripted coding session and show its replay."),
    "export": ("exporting", "Export a session as JSONL, or in an imported agent's format."),
    "fork": ("editing", "Fork a session: a new session seeded with its events up to --at."),
    "import": ("exporting", "Import a JSONL export, or another agent's sessions (--from)."),
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
    """``click.command(name)`` with its line of `COMMANDS` as the short help."""
    return click.command(name, short_help=COMMANDS[name][1])


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

IMPORT_AGENTS = ("claude-code", "codex", "opencode")
"""`todo_sessions.importers.AGENTS` (spelled out: ``--help`` loads nothing of the library);
``import --from`` also takes an agent registered with `importers.register_importer`."""

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
    """An int of at least ``minimum``; anything else is the one-line usage error
    ``--at must be a seq >= 0, got '-1'``."""

    def __init__(self, minimum: int, what: str, metavar: str) -> None:
        self.minimum = minimum
        self.what = what
        self.name = metavar

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            number = int(value)
        except (TypeError, ValueError):
            number = None
        if number is None or number < self.minimum or isinstance(value, bool):
            name = param.opts[0] if param is not None and param.opts else "value"
            raise UsageError(f"{name} must be {self.what}, got {value!r}", ctx)
        return number


SEQ = AtLeast(0, "a seq >= 0", "SEQ")
COUNT = AtLeast(1, "a number >= 1", "N")
NATURAL = AtLeast(0, "a number >= 0", "N")


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
