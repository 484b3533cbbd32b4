"""``todo-sessions``: a thin command line over the library (docs/design.md, "Command line").

Each command parses its options, runs one ``asyncio.run(...)`` and prints. Every error is one
line on stderr, ``error: …``: exit status 2 for a usage error (the command line itself is wrong:
an unknown option, a missing argument, a value of the wrong form, including a ``--db`` that is
not a database URL), 1 when the command ran and failed, 130 when interrupted (``--debug`` shows
the traceback). Listing commands take ``--json`` for machine-readable output.
"""

from __future__ import annotations

import datetime
import errno
import itertools
import json
import logging
import os
import re
import shlex
import sys
import tempfile
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from contextlib import aclosing, closing, contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import click
from click.core import ParameterSource

from . import __version__
from .errors import (
    InvalidEventError,
    NamespaceError,
    SessionExistsError,
    TodoSessionsError,
)
from .jsonout import dumps as json_dumps
from .jsonout import escape_controls
from .redact import mask_url, mask_urls, redact

# The library and rich load when a command runs, not for ``--help`` or ``--version`` (which
# then take a fraction of the time): `_load_the_library` puts these names in the module's
# globals, once; type checkers read them here.
if TYPE_CHECKING:
    import asyncio

    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table
    from rich.text import Text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from .core.header import SessionHeader
    from .core.messages import Message, messages_adapter
    from .core.meta import tag_problem
    from .core.todos import TodoItem
    from .core.verify import Problem, errors_of, verify_events
    from .integrity import VerifyReport, verify_all, verify_session
    from .jsonl import ImportResult, export_lines, parse_lines
    from .render import Timeline, render_messages, render_timeline, render_todo_list, safe
    from .store.engine import parse_url
    from .store.leases import LeaseHolder
    from .store.migrate import migrate as run_migrate
    from .store.migrate import namespace_of
    from .store.results import CheckpointInfo, SearchHit, SessionSummary, StoredLog
    from .store.store import SessionStore, default_url, wall_clock_ms


def _load_the_library() -> None:
    """Import what the commands use (the names above) into this module. Idempotent, cheap
    after the first call."""
    if "SessionStore" in globals():
        return
    global asyncio, Console, escape, BarColumn, MofNCompleteColumn, Progress, TextColumn
    global TimeElapsedColumn, Table, Text, make_url, ArgumentError, Message, messages_adapter
    global tag_problem, TodoItem, Problem, VerifyReport, verify_all, verify_session, export_lines
    global Timeline, render_messages, render_timeline, render_todo_list, safe
    global parse_url, LeaseHolder, run_migrate, namespace_of, CheckpointInfo, SessionSummary
    global StoredLog, SessionStore, default_url, wall_clock_ms, SessionHeader, verify_events
    global errors_of, SearchHit
    global ImportResult, parse_lines
    import asyncio

    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table
    from rich.text import Text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from .core.header import SessionHeader
    from .core.messages import Message, messages_adapter
    from .core.meta import tag_problem
    from .core.todos import TodoItem
    from .core.verify import Problem, errors_of, verify_events
    from .integrity import VerifyReport, verify_all, verify_session
    from .jsonl import ImportResult, export_lines, parse_lines
    from .render import (
        Timeline,
        render_messages,
        render_timeline,
        render_todo_list,
        safe,
    )
    from .store.engine import parse_url
    from .store.leases import LeaseHolder
    from .store.migrate import migrate as run_migrate
    from .store.migrate import namespace_of
    from .store.results import CheckpointInfo, SearchHit, SessionSummary, StoredLog
    from .store.store import SessionStore, default_url, wall_clock_ms


T = TypeVar("T")

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

ACCEPTED_DB = (
    "use sqlite:///path/to/file.db, postgresql://user@host/dbname, or a file path with a / "
    "or ending in .db, .sqlite or .sqlite3"
)
_PATH_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
"""What starts a URL (``sqlite:``, ``postgresql+asyncpg:``); one letter is a Windows drive."""


def program() -> list[str]:
    """How this process was started, for the commands that hints print: the console script as
    the user typed it (``.venv/bin/todo-sessions`` stays a path), ``python -m …``, else
    ``todo-sessions``."""
    argv0 = sys.argv[0] if sys.argv else ""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    module = getattr(spec, "name", "")
    if module in ("todo_sessions.__main__", "todo_sessions.cli"):
        return [_shown_path(sys.executable or "python3"), "-m", module.removesuffix(".__main__")]
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


class UsageError(click.UsageError):
    """A usage error shown as one line, ``error: …``, with exit status 2 (like click's own,
    which `_Group` turns into this)."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def check_db(value: str, source: str = "--db") -> str:
    """``value`` if it names a database the command line can use, else a `UsageError` saying
    what was wrong and what is accepted.

    Accepted: ``sqlite:///file`` (not in memory: the data would be gone when the command
    ends), ``postgresql://…/dbname`` naming its database (libpq's defaults would otherwise pick
    one), or a plain path that looks like one (a ``/`` or an SQLite suffix), so that a typo such
    as ``sqlite:/x`` never becomes a file of that name."""
    _load_the_library()
    text = value
    shown = mask_url(text)

    def bad(problem: str) -> NoReturn:
        raise UsageError(f"{source} {shown!r} {problem}; {ACCEPTED_DB}")

    if not text.strip():
        raise UsageError(f"{source} is empty; {ACCEPTED_DB}")
    if "://" not in text:
        if _SCHEME.match(text):
            bad("is not a database URL (a URL has :// after its scheme)")
        path_like = "/" in text or os.sep in text or text.lower().endswith(_PATH_SUFFIXES)
        query = _PATH_QUERY.search(text)
        if query is not None and (
            path_like or text[: query.start()].lower().endswith(_PATH_SUFFIXES)
        ):
            bad(
                f"is a file path with a query string ({query.group()!r}): a plain path takes no "
                "parameters (the file would be named with them); drop it, or give a sqlite:/// "
                "URL"
            )
        if path_like:
            _check_path(Path(text).expanduser(), bad)
            return text
        bad("is neither a database URL nor a file path")
    try:
        url = make_url(text)
    except (ValueError, ArgumentError) as exc:
        if "int()" in str(exc):
            bad("has a port that is not a number")
        bad("is not a database URL")
    if url.port is not None and not 0 < url.port < 65536:
        bad("has a port outside 1..65535")
    backend = url.get_backend_name()
    if backend == "sqlite":
        database = url.database or ""
        if url.host:
            bad("has a host: an SQLite URL has three slashes (sqlite:///relative/file.db)")
        if not database or ":memory:" in database or url.query.get("mode") == "memory":
            bad("is an in-memory database, gone when the command ends")
    elif backend in ("postgresql", "postgres"):
        if not url.database:
            bad("names no database")
    else:
        bad("is an unsupported database URL")
    if backend == "sqlite":
        _check_path(Path(url.database or "").expanduser(), bad)
    return text


CHAIN_KEY_ENV = "TODO_SESSIONS_CHAIN_KEY"
"""The secret every command keys the hash chain with, when set (docs/design.md, "The hash
chain"); ``verify --key-env VAR`` reads another variable."""

_PATH_QUERY = re.compile(r"\?[A-Za-z_][A-Za-z0-9_]*=[^/]*$")
"""``?name=value`` at the end of a plain path: URL parameters that a path cannot take."""


def _check_path(path: Path, bad: Callable[[str], NoReturn]) -> None:
    """A directory, or a symbolic link to nothing, is not a database file."""
    if path.is_dir():
        bad("is a directory")
    if path.is_symlink() and not path.exists():
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        bad(f"is a symbolic link to {target!r}, which does not exist")


class Context:
    def __init__(
        self,
        db: str | None,
        debug: bool,
        *,
        db_given: bool = False,
        schema: str | None = None,
        table_prefix: str | None = None,
    ) -> None:
        self.db = db or default_url()
        self.db_given = db_given
        self.schema = schema
        self.table_prefix = table_prefix
        """``--schema`` / ``--table-prefix``: each store and migration gets them; hints repeat
        them."""
        """Whether ``db`` came from ``--db`` or ``$TODO_SESSIONS_URL`` (hints repeat it)."""
        self.debug = debug
        # No markup or emoji codes by default: ids, titles and messages are printed literally
        # (a title like "[/x]" must neither vanish nor crash); `markup=True` prints escape them.
        self.out = Console(highlight=False, markup=False, emoji=False, soft_wrap=True)
        # soft_wrap: an error stays one line
        self.err = Console(stderr=True, highlight=False, markup=False, emoji=False, soft_wrap=True)

    def store(self, **options: Any) -> SessionStore:
        """The store; its hash chain keyed with ``$TODO_SESSIONS_CHAIN_KEY`` when that is set
        (or the ``chain_key`` option: ``verify --key-env``)."""
        options.setdefault("chain_key", os.environ.get(CHAIN_KEY_ENV) or None)
        return SessionStore(self.db, schema=self.schema, table_prefix=self.table_prefix, **options)

    def run(self, work: Callable[[SessionStore], Awaitable[T]], **options: Any) -> T:
        """Open the store, run ``work(store)`` once; library errors become one line, exit 1."""

        async def main() -> T:
            async with self.store(**options) as store:
                return await work(store)

        try:
            return asyncio.run(main())
        except BrokenPipeError:
            raise  # click exits quietly (``export | head``)
        except (TodoSessionsError, ValueError, OSError) as exc:
            if self.debug:
                raise
            self.fail(str(exc))

    def fail(self, message: str) -> NoReturn:
        self.err.print(f"[bold red]error:[/] {escape(mask_urls(message))}", markup=True)
        sys.exit(1)

    def note(self, message: str) -> None:
        self.err.print(f"note: {safe(message)}")

    def hint(self, *args: str) -> str:
        """A command line that repeats this invocation's program and database (shell-quoted)."""
        db = ["--db", self.store_url()] if self.db_given else []
        if self.schema is not None:
            db += ["--schema", self.schema]
        if self.table_prefix is not None:
            db += ["--table-prefix", self.table_prefix]
        return shlex.join([*program(), *db, *args])

    def location(self) -> str:
        """The SQLite file, or the URL with every password masked (`mask_url`)."""
        target = parse_url(self.db)
        return str(target.path) if target.path is not None else mask_url(target.render())

    def store_url(self) -> str:
        """The database as given, every password masked (`mask_url`)."""
        return mask_url(self.db)

    @contextmanager
    def progress(self, label: str, total: int | None) -> Iterator[Callable[[int], None] | None]:
        """A progress bar on an interactive stderr; nothing otherwise."""
        if not self.err.is_terminal:
            yield None
            return
        columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(
            *columns,
            console=self.err,
            transient=True,
            redirect_stdout=False,  # stdout may be the export itself
            redirect_stderr=False,
        ) as bar:
            task = bar.add_task(label, total=total)
            yield lambda n: bar.advance(task, n)


pass_ctx = click.make_pass_decorator(Context)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


class _AtLeast(click.ParamType):
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


SEQ = _AtLeast(0, "a seq >= 0", "SEQ")
COUNT = _AtLeast(1, "a number >= 1", "N")

_AGO = re.compile(r"^(\d+)\s*([smhdw])$")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


class _Moment(click.ParamType):
    """A moment as epoch ms: an ISO 8601 date or date and time (local time unless it has an
    offset or Z), or a duration ago (``30m``, ``2h``, ``7d``, ``1w``)."""

    name = "WHEN"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        _load_the_library()
        text = str(value).strip()
        ago = _AGO.match(text)
        if ago is not None:
            return wall_clock_ms() - int(ago.group(1)) * _UNIT_MS[ago.group(2)]
        try:
            moment = datetime.datetime.fromisoformat(text)
        except ValueError:
            name = param.opts[0] if param is not None and param.opts else "value"
            raise UsageError(
                f"{name} must be a date or time (2026-12-01, 2026-12-01T09:30, with an "
                f"optional offset) or a duration ago (30m, 2h, 7d, 1w), got {value!r}",
                ctx,
            ) from None
        if moment.tzinfo is None:
            moment = moment.astimezone()  # local time
        return int(moment.timestamp() * 1000)


MOMENT = _Moment()


LIST_LIMIT = 50

SEARCH_KINDS = ("user", "assistant", "reasoning", "tool_call", "tool_result", "todo", "summary")
"""`core.search.KINDS` (spelled out: the library loads only when a command runs)."""


def at_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--at", "at_seq", type=SEQ, help=help)


async def clamp_at(
    ctx: Context, store: SessionStore, session_id: str, at_seq: int | None, doing: str
) -> int | None:
    """``--at`` past the end of a session means its end, with a note on stderr: ``session X
    ends at seq N; showing seq N`` (``doing``: "showing", "forking at")."""
    if at_seq is None:
        return None
    last = (await store.summary(session_id)).next_seq - 1
    if at_seq <= last:
        return at_seq
    if last < 0:
        ctx.note(f"session {session_id} has no events yet")
        return None
    ctx.note(f"session {session_id} ends at seq {last}; {doing} seq {last}")
    return last


def echo_json(value: Any) -> None:
    click.echo(json_dumps(value))  # C1 controls escaped (jsonout)


def _when(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


_NO_ARGS_IS_HELP: tuple[type[Exception], ...] = tuple(
    t for t in [getattr(click.exceptions, "NoArgsIsHelpError", None)] if t is not None
)
"""click >= 8.2: a bare ``todo-sessions`` prints the help (left alone: it is the help)."""


def _one_line(exc: click.UsageError) -> UsageError:
    """click's usage error (usage, hint and message on three lines) as one line."""
    text = " ".join(exc.format_message().split()).removesuffix(".")
    if exc.ctx is not None:
        text += f" (see '{exc.ctx.command_path} --help')"
    return UsageError(text, exc.ctx)


def interrupted() -> NoReturn:
    click.echo("error: interrupted", err=True)
    sys.exit(130)


class _Group(click.Group):
    """The command group. Usage errors are one line, exit status 2; an exception no command
    expected is one line on stderr too, exit status 1, never a traceback (``--debug`` shows
    it); Ctrl-C is one line, exit status 130."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except UsageError:
            raise
        except _NO_ARGS_IS_HELP:
            raise
        except click.UsageError as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            _load_the_library()  # a command runs (--help and --version ended before)
            return super().invoke(ctx)
        except UsageError:
            raise
        except _NO_ARGS_IS_HELP:
            raise
        except click.UsageError as exc:
            raise _one_line(exc) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            if isinstance(ctx.obj, Context) and ctx.obj.debug:
                traceback.print_exc()  # click itself would say "Aborted!" and exit 1
                sys.exit(130)
            interrupted()
        except Exception as exc:
            if isinstance(ctx.obj, Context) and ctx.obj.debug:
                raise
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
                raise  # click exits quietly
            text = mask_urls(" ".join(str(exc).split())) or "(no message)"
            name = type(exc).__name__
            click.echo(f"error: unexpected {name}: {text} (--debug shows more)", err=True)
            sys.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar="TODO_SESSIONS_URL", show_envvar=True, help=DB_HELP)
@click.option(
    "--schema", envvar="TODO_SESSIONS_SCHEMA", show_envvar=True, metavar="NAME", help=SCHEMA_HELP
)
@click.option(
    "--table-prefix",
    envvar="TODO_SESSIONS_TABLE_PREFIX",
    show_envvar=True,
    metavar="PREFIX",
    help=TABLE_PREFIX_HELP,
)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(__version__)
@click.pass_context
def main(
    click_ctx: click.Context,
    db: str | None,
    schema: str | None,
    table_prefix: str | None,
    debug: bool,
) -> None:
    """Store, inspect and replay AI coding-agent sessions (todo-sessions)."""
    source = click_ctx.get_parameter_source("db")
    given = source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    if db is not None and given:
        from_env = source == ParameterSource.ENVIRONMENT
        db = check_db(db, "$TODO_SESSIONS_URL" if from_env else "--db")
    context = Context(db, debug, db_given=given, schema=schema, table_prefix=table_prefix)
    try:  # a malformed name, or the other backend's option, is a usage error
        namespace_of(parse_url(context.db), schema=schema, table_prefix=table_prefix)
    except NamespaceError as exc:
        raise UsageError(str(exc)) from None
    click_ctx.obj = context


@main.command("migrate")
@pass_ctx
def migrate_cmd(ctx: Context) -> None:
    """Create or upgrade the database schema to the newest revision."""
    try:
        asyncio.run(run_migrate(ctx.db, schema=ctx.schema, table_prefix=ctx.table_prefix))
    except (TodoSessionsError, ValueError, OSError) as exc:
        if ctx.debug:
            raise
        ctx.fail(str(exc))
    ctx.out.print(f"database is at the newest schema: {ctx.location()}")


@main.command("demo")
@click.option("--id", "session_id", help="Session id for the demo session (default: random).")
@pass_ctx
def demo_cmd(ctx: Context, session_id: str | None) -> None:
    """Run a scripted coding session through the real agent loop into the store, then
    print its replay: the timeline, the todo list after each write, and the model's messages."""
    from .harness.demo import run_demo

    async def work(store: SessionStore) -> tuple[Any, Any, Any, Any]:
        result = await run_demo(store, session_id=session_id)
        log = await store.read(result.session_id)
        messages = await store.derive_messages(result.session_id)
        return result, log, messages, await store.current_todos(result.session_id)

    result, log, messages, todos = ctx.run(work)
    out = ctx.out
    out.rule()  # the heading wraps (a rule's title would cut the database location)
    out.print(Text(f"demo session {result.session_id}", "bold"))
    out.print(f"stored in {ctx.location()}")
    for outcome in result.outcomes:
        out.print(f"turn {outcome.turn}: {outcome.reason} after {outcome.steps} steps")
    out.rule("timeline (the log)")
    out.print(render_timeline(log.events))
    out.rule("final todo list")
    out.print(render_todo_list(todos))
    out.rule("what the model sees (derived from surface events only)")
    out.print(render_messages(messages))
    writes = sum(1 for e in log.events if e.type == "todo/write")
    out.rule()
    out.print(
        f"{len(log.events)} events stored; {writes} todo/write events in the log; "
        f"{len(messages)} messages derived for the model, and no todo/write among them "
        "(the model sees only its own todo_write calls and their results)."
    )
    out.print(f"replay it again with: {safe(ctx.hint('show', result.session_id))}")


def _lease_json(holder: LeaseHolder | None) -> dict[str, Any] | None:
    if holder is None:
        return None
    return {
        "owner": holder.owner,
        "host": holder.host,
        "pid": holder.pid,
        "epoch": holder.epoch,
        "expiresAt": holder.expires_at,
    }


def _summary_json(s: SessionSummary) -> dict[str, Any]:
    return {
        "id": s.id,
        "createdAt": s.created_at,
        "updatedAt": s.updated_at,
        "cwd": s.cwd,
        "title": s.title,
        "events": s.next_seq,
        "revision": s.revision,
        "parent": s.parent,
        "tags": list(s.tags),
        "metadata": dict(s.metadata),
        "openTodos": s.open_todos,
    }


@main.command("list")
@click.option(
    "--limit", type=COUNT, default=LIST_LIMIT, show_default=True, help="Sessions per page."
)
@click.option("--before", "before_id", help="Show the page after this session id.")
@click.option("--cwd", metavar="PATH", help="Only sessions started in this directory.")
@click.option("--tag", metavar="TAG", help="Only sessions with this tag.")
@click.option(
    "--since",
    type=MOMENT,
    help="Only sessions active at or after WHEN: 2026-12-01, 2026-12-01T09:30 (local time "
    "unless an offset is given), or a duration ago: 30m, 2h, 7d, 1w.",
)
@click.option("--until", type=MOMENT, help="Only sessions last active before WHEN (as --since).")
@click.option("--parent", metavar="ID", help="Only forks and sub-agent sessions of session ID.")
@click.option(
    "--open-todos/--no-open-todos",
    "open_todos",
    default=None,
    help="Only sessions whose current todo list has an item pending or in progress "
    "(--no-open-todos: only those without).",
)
@click.option("--text", metavar="TEXT", help="Only sessions whose title contains TEXT (any case).")
@json_option
@pass_ctx
def list_cmd(
    ctx: Context,
    limit: int,
    before_id: str | None,
    cwd: str | None,
    tag: str | None,
    since: int | None,
    until: int | None,
    parent: str | None,
    open_todos: bool | None,
    text: str | None,
    as_json: bool,
) -> None:
    """List sessions, newest activity first (with event and turn counts), filtered by
    directory, tag, activity time, parent, open todos or title."""
    filters: dict[str, Any] = {
        "cwd": cwd,
        "tag": tag,
        "since": since,
        "until": until,
        "parent": parent,
        "has_open_todos": open_todos,
        "text": text,
    }

    async def work(
        store: SessionStore,
    ) -> tuple[list[tuple[SessionSummary, int | None]], dict[str, LeaseHolder]]:
        before = await store.summary(before_id) if before_id is not None else None
        page = await store.list(limit=limit, before=before, **filters)
        holders = await store.lease_holders(s.id for s in page)
        now = wall_clock_ms()
        live = {sid: h for sid, h in holders.items() if h.live(now)}
        return [(s, await store.count(s.id, type="turn/start")) for s in page], live

    rows, leases = ctx.run(work)
    if as_json:
        echo_json(
            [
                {**_summary_json(s), "turns": turns, "lease": _lease_json(leases.get(s.id))}
                for s, turns in rows
            ]
        )
        return
    if not rows:
        ctx.out.print("no sessions")
        return
    tagged = any(s.tags for s, _ in rows)
    table = Table()
    table.add_column("id", no_wrap=True, overflow="fold", min_width=max(len(s.id) for s, _ in rows))
    for name in ("events", "turns", "last activity"):
        table.add_column(name, no_wrap=True)
    table.add_column("title", overflow="fold")
    if tagged:
        table.add_column("tags", overflow="fold")
    if leases:
        table.add_column("live lease", overflow="fold")
    for s, turns in rows:
        cells = [safe(s.id), str(s.next_seq), str(turns), _when(s.updated_at), safe(s.title or "")]
        if tagged:
            cells.append(safe(", ".join(s.tags)))
        if leases:
            holder = leases.get(s.id)
            cells.append(safe(holder.describe()) if holder is not None else "")
        table.add_row(*cells)
    ctx.out.print(table)
    if len(rows) == limit:
        more = ["--limit", str(limit)] if limit != LIST_LIMIT else []
        for option, value in (("--cwd", cwd), ("--tag", tag), ("--parent", parent)):
            if value is not None:
                more += [option, value]
        for option, ms in (("--since", since), ("--until", until)):
            if ms is not None:  # the moment it meant, so the next page has the same bounds
                more += [option, _iso(ms)]
        if open_todos is not None:
            more.append("--open-todos" if open_todos else "--no-open-todos")
        if text is not None:
            more += ["--text", text]
        hint = ctx.hint("list", *more, "--before", rows[-1][0].id)
        ctx.out.print(f"next page: {safe(hint)}", style="dim")


def _iso(ms: int) -> str:
    """Epoch ms as ISO 8601 with its offset, exactly (what --since/--until read back)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).astimezone()
    return moment.isoformat(timespec="milliseconds")


async def _not_live_elsewhere(store: SessionStore, session_id: str) -> None:
    """Refuse to append to a session that a live service owns: its next flush would meet a
    seq conflict. (Checks that the session exists first.)"""
    await store.summary(session_id)
    holder = (await store.lease_holders([session_id])).get(session_id)
    if holder is not None and holder.live(wall_clock_ms()):
        raise TodoSessionsError(
            f"session {session_id} is live, leased by {holder.describe()}; change it "
            "through its owner, or once it is closed"
        )


@main.command("tag")
@click.argument("session_id")
@click.argument("tags", nargs=-1, required=True)
@click.option("--remove", is_flag=True, help="Remove the tags instead of adding them.")
@pass_ctx
def tag_cmd(ctx: Context, session_id: str, tags: tuple[str, ...], remove: bool) -> None:
    """Add tags to a session (or remove them with --remove): appends a session/meta event
    with its new tags. Adding a tag it has, or removing one it has not, changes nothing."""
    for tag in tags:
        problem = tag_problem(tag)
        if problem is not None:
            raise UsageError(f"invalid tag {tag!r}: it {problem}")

    async def work(store: SessionStore) -> tuple[SessionSummary, SessionSummary]:
        await _not_live_elsewhere(store, session_id)
        before = await store.summary(session_id)
        if remove:
            return before, await store.update_meta(session_id, remove_tags=tags)
        return before, await store.update_meta(session_id, add_tags=tags)

    before, after = ctx.run(work)
    shown = ", ".join(after.tags) if after.tags else "(none)"
    if after.revision == before.revision:
        ctx.note(f"nothing to change: session {session_id} has tags {shown}")
        return
    ctx.out.print(f"tags of {safe(session_id)}: {safe(shown)}")


@main.command("retitle")
@click.argument("session_id")
@click.argument("title")
@pass_ctx
def retitle_cmd(ctx: Context, session_id: str, title: str) -> None:
    """Set a session's title: appends a session/meta event. An empty TITLE clears it."""

    async def work(store: SessionStore) -> tuple[SessionSummary, SessionSummary]:
        await _not_live_elsewhere(store, session_id)
        before = await store.summary(session_id)
        return before, await store.update_meta(session_id, title=title or None)

    before, after = ctx.run(work)
    if after.revision == before.revision:
        ctx.note(f"nothing to change: session {session_id} already has that title")
        return
    if after.title is None:
        ctx.out.print(f"cleared the title of {safe(session_id)}")
    else:
        ctx.out.print(f"title of {safe(session_id)}: {safe(after.title)}")


@main.command("show")
@click.argument("session_id")
@click.option("--verbose", "-v", is_flag=True, help="Also show steps, chunks and request records.")
@click.option(
    "--checkpoints",
    "checkpoints",
    is_flag=True,
    help="Show the session's projection checkpoints instead of its timeline.",
)
@json_option
@pass_ctx
def show_cmd(
    ctx: Context, session_id: str, verbose: bool, checkpoints: bool, as_json: bool
) -> None:
    """Show a session's timeline: turns, messages, tool calls and results, todo changes.

    Streams the log page by page, so any session shows in flat memory."""
    if checkpoints:
        _show_checkpoints(ctx, session_id, as_json)
        return

    async def work(store: SessionStore) -> None:
        h = await store.header(session_id)
        summary = await store.summary(session_id)
        holder = (await store.lease_holders([session_id])).get(session_id)
        if holder is not None and not holder.live(wall_clock_ms()):
            holder = None
        events = _stream_upto(store, session_id, summary.next_seq)
        if as_json:  # one JSON object, written as it is read
            head = json.dumps(
                {"header": h.to_wire(), "revision": summary.revision, "lease": _lease_json(holder)}
            )
            click.echo(head[:-1] + ',"events":[', nl=False)
            first = True
            async for event in events:
                click.echo(("" if first else ",") + escape_controls(event.to_json()), nl=False)
                first = False
            click.echo("]}")
            return
        ctx.out.print(f"[bold]{escape(safe(h.id))}[/]  {escape(safe(h.title or ''))}", markup=True)
        ctx.out.print(
            f"created {_when(h.created_at)}  cwd {safe(h.cwd or '-')}  {summary.next_seq} events",
            style="dim",
        )
        if h.parent_session:
            ctx.out.print(
                f"forked from {safe(h.parent_session)} ({h.seed_length} events inherited)",
                style="dim",
            )
        if holder is not None:
            ctx.out.print(
                f"live: leased by {safe(holder.describe())} until {_when(holder.expires_at)}",
                style="dim",
            )
        timeline = Timeline(verbose=verbose)
        async for event in events:
            for row in timeline.feed(event):
                ctx.out.print(row)
        for row in timeline.close():
            ctx.out.print(row)

    ctx.run(work)


def _show_checkpoints(ctx: Context, session_id: str, as_json: bool) -> None:
    async def work(store: SessionStore) -> tuple[int, list[CheckpointInfo]]:
        summary = await store.summary(session_id)
        return summary.next_seq, await store.checkpoints(session_id)

    next_seq, found = ctx.run(work)
    if as_json:
        echo_json(
            [
                {
                    "seq": c.seq,
                    "formatVersion": c.format_version,
                    "createdAt": c.created_at,
                    "bytes": c.size,
                }
                for c in found
            ]
        )
        return
    if not found:
        ctx.out.print(f"no checkpoints ({next_seq} events; resuming folds the whole log)")
        return
    table = Table()
    for name in ("seq", "format", "written", "bytes", "events after it"):
        table.add_column(name, no_wrap=True)
    for c in found:
        table.add_row(
            str(c.seq),
            str(c.format_version),
            _when(c.created_at),
            str(c.size),
            str(next_seq - c.seq),
        )
    ctx.out.print(table)


async def _stream_upto(store: SessionStore, session_id: str, end: int) -> AsyncIterator[Any]:
    """The session's events below seq ``end`` (what the summary described), page by page."""
    async with aclosing(store.stream(session_id)) as events:  # type: ignore[type-var]
        async for event in events:
            if event.seq >= end:
                return
            yield event


@main.command("todos")
@click.argument("session_id")
@at_option("The list as of this seq (past the end: the end, with a note).")
@json_option
@pass_ctx
def todos_cmd(ctx: Context, session_id: str, at_seq: int | None, as_json: bool) -> None:
    """Show the current todo list of a session (or as of --at SEQ)."""

    async def work(store: SessionStore) -> list[TodoItem] | None:
        upto = await clamp_at(ctx, store, session_id, at_seq, "showing")
        return await store.current_todos(session_id, upto_seq=upto)

    todos = ctx.run(work)
    if as_json:
        echo_json(None if todos is None else [t.model_dump() for t in todos])
        return
    ctx.out.print(render_todo_list(todos))


@main.command("messages")
@click.argument("session_id")
@at_option("The history as of this seq (past the end: the end, with a note).")
@json_option
@pass_ctx
def messages_cmd(ctx: Context, session_id: str, at_seq: int | None, as_json: bool) -> None:
    """Show the message history the model sees (derived from surface events only)."""

    async def work(store: SessionStore) -> list[Message]:
        upto = await clamp_at(ctx, store, session_id, at_seq, "showing")
        return await store.derive_messages(session_id, upto_seq=upto)

    messages = ctx.run(work)
    if as_json:
        echo_json(
            messages_adapter.dump_python(messages, mode="json", by_alias=True, exclude_none=True)
        )
        return
    ctx.out.print(render_messages(messages))


@contextmanager
def _sink(output: Path | None) -> Iterator[IO[str]]:
    """stdout (``output`` None or ``-``), or a temporary file renamed to ``output`` only once
    the export is complete (a failed export never leaves a truncated file that would import as
    a shorter session)."""
    if output is None or str(output) == "-":
        yield sys.stdout
        return
    try:
        fd, part = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".part", dir=output.parent)
    except OSError as exc:
        raise OSError(f"cannot write {output}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as sink:
            yield sink
        os.replace(part, output)
    except BaseException:
        Path(part).unlink(missing_ok=True)
        raise


@main.command("export")
@click.argument("session_id")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="File to write (default, or -: stdout).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["todo-sessions", "reference"]),
    default="todo-sessions",
    show_default=True,
    help="reference: the reference harness's session file (its header, chunk rows).",
)
@pass_ctx
def export_cmd(ctx: Context, session_id: str, output: Path | None, fmt: str) -> None:
    """Export a session as JSONL: a header line, then one event per line."""
    from .jsonl import reference_lines

    async def work(store: SessionStore) -> int:
        total = (await store.summary(session_id)).next_seq
        lines = reference_lines if fmt == "reference" else export_lines
        with ctx.progress("export", total) as advance, _sink(output) as sink:
            count = 0
            async for line in lines(store, session_id, progress=advance):
                sink.write(escape_controls(line) + "\n")
                count += 1
        return total if fmt == "reference" else count - 1

    count = ctx.run(work)
    if output is not None and str(output) != "-":
        ctx.err.print(f"exported {count} events of {session_id} to {output}")


_UNDECODABLE = re.compile("[\udc80-\udcff]")
"""What ``surrogateescape`` makes of a byte that is not UTF-8 (text never holds these)."""


MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line ``import`` reads by default (64 MiB); ``--max-line-bytes`` changes it."""

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
"""How a Zstandard frame begins: the reference harness stores its session files so by default
(``session.jsonl.zstd``, concatenated frames)."""


def utf8_lines(file: IO[bytes], max_line: int = MAX_LINE_BYTES) -> Generator[str, None, None]:
    """The lines of ``file`` decoded as UTF-8 (``\n`` or ``\r\n`` ends a line), or
    `InvalidEventError` naming the first line that is not UTF-8 (its column and the byte) or
    is longer than ``max_line`` bytes (never read whole: memory stays bounded)."""
    number = 0
    while True:
        raw = file.readline(max_line + 1)
        if not raw:
            return
        number += 1
        if number == 1 and raw.startswith(_ZSTD_MAGIC):
            raise InvalidEventError(
                "line 1: the file is Zstandard-compressed (as the reference harness stores "
                "session.jsonl.zstd by default); decompress it first: "
                "zstd -dc FILE | todo-sessions import -",
                field="line 1",
            )
        body = raw.removesuffix(b"\n").removesuffix(b"\r")
        if len(body) > max_line:
            raise InvalidEventError(
                f"line {number} is longer than {max_line} bytes (the limit; "
                "--max-line-bytes raises it)",
                field=f"line {number}",
            )
        line = raw.decode("utf-8", "surrogateescape")
        bad = _UNDECODABLE.search(line)
        if bad is not None:
            byte = ord(bad.group()) - 0xDC00
            column = bad.start() + 1
            message = f"line {number}: not UTF-8 text (byte 0x{byte:02x} at column {column})"
            raise InvalidEventError(message, field=f"line {number}")
        yield line.removesuffix("\r\n") + "\n" if line.endswith("\r\n") else line


@main.command("import")
@click.argument("file", type=click.File("rb"))
@click.option("--as", "as_id", help="Store under this id instead of the exported one.")
@click.option(
    "--max-line-bytes",
    type=COUNT,
    default=MAX_LINE_BYTES,
    show_default=True,
    help="Refuse a file with a line longer than this (nothing is written).",
)
@pass_ctx
def import_cmd(ctx: Context, file: IO[bytes], as_id: str | None, max_line_bytes: int) -> None:
    """Import a JSONL export, plain or gzipped (a `prune` archive), validated completely
    before anything is written."""
    file = _maybe_gunzip(file)

    async def work(store: SessionStore) -> Any:
        with ctx.progress("import", None) as advance:
            try:
                with closing(utf8_lines(file, max_line_bytes)) as lines:
                    return await _import_verified(store, lines, as_id, advance)
            except SessionExistsError as exc:
                exc.args = (f"{exc}; import it under another id with --as NEW_ID",)
                raise

    result = ctx.run(work)
    ctx.out.print(f"imported {result.events} events as session {result.session_id}")


def _maybe_gunzip(file: IO[bytes]) -> IO[bytes]:
    """The file itself, or its decompressed content when it starts with gzip's magic."""
    import gzip
    import io

    buffered: Any = file if hasattr(file, "peek") else io.BufferedReader(cast(Any, file))
    if buffered.peek(2)[:2] == b"\x1f\x8b":
        return cast(IO[bytes], gzip.GzipFile(fileobj=buffered, mode="rb"))
    return cast(IO[bytes], buffered)


async def _import_verified(
    store: SessionStore,
    lines: Iterator[str],
    as_id: str | None,
    progress: Callable[[int], None] | None,
) -> ImportResult:
    """`jsonl.import_lines`, and before anything is written the checks of ``verify``
    (`verify_events`: seqs, payloads, structure, surface, answered calls), so that ``import``
    accepts only what ``verify`` accepts. A last turn left open is accepted (``verify`` says
    `load` closes it): an export of an interrupted session imports."""
    header, events = parse_lines(lines, progress=progress, chain_of=store)
    problems = errors_of(verify_events(events))
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InvalidEventError(
            f"the file does not verify, nothing imported: {problems[0]}{more}",
            seq=problems[0].seq,
        )
    if as_id is not None:
        header = header.model_copy(update={"id": SessionHeader(id=as_id, created_at=0).id})
    if not events:
        raise InvalidEventError("the export holds no events: nothing to import")
    await store.create(header)  # as `import_lines` does, without parsing the lines again
    revision = await store.append(header.id, events)
    return ImportResult(header.id, len(events), revision)


@main.command("recover")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@pass_ctx
def recover_cmd(ctx: Context, file: Path) -> None:
    """Append a recovery file (events a service could not store) to its session.

    Refused, with nothing written, unless the stored log still ends where the file begins."""
    from .recovery import recover

    async def work(store: SessionStore) -> Any:
        return await recover(store, file)

    result = ctx.run(work)
    last = result.first_seq + result.events - 1
    ctx.out.print(
        f"recovered {result.events} events (seq {result.first_seq}-{last}) of session "
        f"{safe(result.session_id)}"
    )


@main.command("verify")
@click.argument("session_id", required=False)
@click.option(
    "--key-env",
    metavar="VAR",
    help="Recompute the hash chain keyed with the secret in this environment variable "
    f"(default: ${CHAIN_KEY_ENV} when set, else a plain hash).",
)
@click.option(
    "--against",
    "against_file",
    type=click.File("rb"),
    help="An export of the session (its id: SESSION_ID or the file's): the stored chain must "
    "match the file's, so a log rewritten or cut short since the export is found.",
)
@json_option
@pass_ctx
def verify_cmd(
    ctx: Context,
    session_id: str | None,
    key_env: str | None,
    against_file: IO[bytes] | None,
    as_json: bool,
) -> None:
    """Check one session (or all): seqs, rows, payloads, structure, surface, answered calls,
    the hash chain. Changes nothing; exits 1 when anything is wrong."""
    options: dict[str, Any] = {}
    if key_env is not None:
        secret = os.environ.get(key_env)
        if not secret:
            ctx.fail(f"--key-env {key_env}: the environment variable {key_env} is not set")
        options["chain_key"] = secret
    against: dict[int, str] | None = None
    file_problem: Problem | None = None
    if against_file is not None:
        session_id, against, file_problem = _file_chain(ctx, against_file, session_id, options)

    async def work(store: SessionStore) -> VerifyReport:
        if session_id is not None:
            found = await verify_session(store, session_id, against=against)
            if file_problem is not None:
                found.insert(0, file_problem)
            return VerifyReport(sessions={session_id: found})
        return await verify_all(store)

    report = ctx.run(work, **options)
    bad = {sid: problems for sid, problems in report.sessions.items() if errors_of(problems)}
    if as_json:
        # {session id: [problems]}; problems of the database as a whole, when there are
        # any, under the empty key (no session id is empty).
        found = {"": report.database} if report.database else {}
        found.update(report.sessions)
        echo_json({sid: [_problem_json(p) for p in ps] for sid, ps in found.items()})
    else:
        for p in report.database:
            ctx.out.print(f"[red]✗ database[/]: {escape(str(p))}", markup=True)
        for sid, problems in report.sessions.items():
            if sid in bad:
                ctx.out.print(f"[red]✗ {escape(sid)}[/]: {len(problems)} problem(s)", markup=True)
            elif problems:
                warned = f"[yellow]! {escape(sid)}[/]: {len(problems)} warning(s)"
                ctx.out.print(warned, markup=True)
            for p in problems:
                ctx.out.print(f"    {p}")
            if not problems:
                ctx.out.print(f"[green]✓ {escape(sid)}[/]", markup=True)
        checked = f"{len(report.sessions)} session(s) checked, {len(bad)} with problems"
        if session_id is None:
            checked += f"; database check: {len(report.database) or 'no'} problem(s)"
        ctx.out.print(checked)
    if not report.ok:
        sys.exit(1)


def _file_chain(
    ctx: Context, file: IO[bytes], session_id: str | None, options: dict[str, Any]
) -> tuple[str, dict[int, str], Problem | None]:
    """The session id, the chain values of an export file (by seq) and, when its events do
    not lead to the chain head its header line carries, that problem."""
    from .core.chain import derive_key
    from .jsonl import declared_chain, file_chain, file_chain_problem

    secret = options.get("chain_key", os.environ.get(CHAIN_KEY_ENV) or None)
    key = derive_key(secret) if secret else b""
    try:
        with closing(utf8_lines(_maybe_gunzip(file))) as lines:
            first = next(lines, "")
            header, events = parse_lines(itertools.chain([first], lines))
    except TodoSessionsError as exc:
        ctx.fail(f"--against: {exc}")
    computed = file_chain(header, events, key)
    problem = file_chain_problem(declared_chain(first), computed)
    found = Problem(None, "chain", f"--against file: {problem}") if problem else None
    return session_id or header.id, computed, found


def _problem_json(problem: Problem) -> dict[str, Any]:
    out = {"seq": problem.seq, "kind": problem.kind, "message": problem.message}
    if problem.warning:
        out["warning"] = True
    return out


@main.command("fork")
@click.argument("session_id")
@at_option("Last seq to inherit (default, or past the end: all, with a note).")
@click.option("--as", "child_id", help="Id of the new session (default: generated).")
@pass_ctx
def fork_cmd(ctx: Context, session_id: str, at_seq: int | None, child_id: str | None) -> None:
    """Fork a session: a new session seeded with its events up to --at."""

    async def work(store: SessionStore) -> StoredLog:
        boundary = await clamp_at(ctx, store, session_id, at_seq, "forking at")
        return await store.fork(session_id, boundary, child_id)

    log = ctx.run(work)
    ctx.out.print(
        f"forked {session_id} into {log.header.id} ({log.header.seed_length} events inherited)"
    )


def stdin_is_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


@main.command("delete")
@click.argument("session_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_ctx
def delete_cmd(ctx: Context, session_id: str, yes: bool) -> None:
    """Delete a session and all its events (asks first unless --yes; without a terminal,
    --yes is required)."""
    if not yes:
        summary = ctx.run(lambda store: store.summary(session_id))  # exists? before asking
        if not stdin_is_terminal():
            ctx.fail("refusing to delete without --yes when stdin is not a terminal")
        question = f"delete session {session_id} ({summary.next_seq} events)?"
        try:
            confirmed = click.confirm(safe(question), err=True)
        except click.Abort as exc:  # click's answer to Ctrl-C and to end of input
            click.echo(err=True)  # end the question's line
            if isinstance(exc.__context__, KeyboardInterrupt):
                interrupted()
            confirmed = False
        if not confirmed:
            ctx.fail("not deleted")
    ctx.run(lambda store: store.delete(session_id))
    ctx.out.print(f"deleted {session_id}")


class _LogFormatter(logging.Formatter):
    """The log lines of ``acp`` on stderr: one line each, redacted (`redact`); tracebacks
    only with ``--debug``."""

    def __init__(self, *, tracebacks: bool) -> None:
        super().__init__("%(levelname)s:%(name)s:%(message)s")
        self.tracebacks = tracebacks

    def formatException(self, ei: Any) -> str:
        return super().formatException(ei) if self.tracebacks else ""

    def formatStack(self, stack_info: str) -> str:
        return super().formatStack(stack_info) if self.tracebacks else ""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def _hit_json(hit: SearchHit) -> dict[str, Any]:
    return {
        "sessionId": hit.session_id,
        "title": hit.title,
        "seq": hit.seq,
        "kind": hit.kind,
        "type": hit.event_type,
        "snippet": hit.snippet,
        "marks": [list(m) for m in hit.marks],
        "inHistory": hit.in_history,
        "indexId": hit.index_id,
    }


def _marked(hit: SearchHit) -> Text:
    """The snippet with its matched words in bold (rich Text: never read as markup)."""
    text = Text(safe(hit.snippet))
    for start, end in hit.marks:
        text.stylize("bold yellow", start, end)
    return text


@main.command("search")
@click.argument("query")
@click.option("--limit", type=COUNT, default=20, show_default=True, help="Hits per page.")
@click.option("--before", "before_id", type=COUNT, help="Show the page after this index id.")
@click.option("--cwd", metavar="PATH", help="Only sessions started in this directory.")
@click.option("--tag", metavar="TAG", help="Only sessions with this tag.")
@click.option("--since", type=MOMENT, help="Only sessions active at or after WHEN (as list).")
@click.option("--until", type=MOMENT, help="Only sessions last active before WHEN (as list).")
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(SEARCH_KINDS),
    help="Search only this kind of text (repeatable; default: all but reasoning).",
)
@json_option
@pass_ctx
def search_cmd(
    ctx: Context,
    query: str,
    limit: int,
    before_id: int | None,
    cwd: str | None,
    tag: str | None,
    since: int | None,
    until: int | None,
    kinds: tuple[str, ...],
    as_json: bool,
) -> None:
    """Search what was said in every session: words that must all occur, "a phrase",
    prefix*, -excluded. Newest first."""

    async def work(store: SessionStore) -> list[SearchHit]:
        before = None
        if before_id is not None:  # only its index id matters for paging
            before = SearchHit("", None, 0, "", "", "", (), None, before_id)
        return await store.search(
            query,
            cwd=cwd,
            tag=tag,
            since=since,
            until=until,
            kinds=kinds or None,
            limit=limit,
            before=before,
        )

    hits = ctx.run(work)
    if as_json:
        echo_json([_hit_json(h) for h in hits])
        return
    if not hits:
        ctx.out.print("no matches")
        return
    for hit in hits:
        where = f"{hit.session_id} seq {hit.seq} ({hit.kind}"
        where += ", no longer in the model's history)" if hit.in_history is False else ")"
        title = f" {hit.title}" if hit.title else ""
        ctx.out.print(Text(safe(where), "bold") + Text(safe(title), "dim"))
        ctx.out.print(Text("    ") + _marked(hit))
    if len(hits) == limit:
        more = ["--limit", str(limit)] if limit != 20 else []
        for option, value in (("--cwd", cwd), ("--tag", tag)):
            if value is not None:
                more += [option, value]
        for option, ms in (("--since", since), ("--until", until)):
            if ms is not None:
                more += [option, _iso(ms)]
        for kind in kinds:
            more += ["--kind", kind]
        hint = ctx.hint("search", query, *more, "--before", str(hits[-1].index_id))
        ctx.out.print(f"next page: {safe(hint)}", style="dim")


@main.command("reindex")
@click.option(
    "--search-config",
    "search_config",
    metavar="NAME",
    help="PostgreSQL: build the index with this text search configuration from now on "
    "(simple, english, german ...; default: keep the current one).",
)
@pass_ctx
def reindex_cmd(ctx: Context, search_config: str | None) -> None:
    """Rebuild the search index from the stored logs (derived data: nothing else changes)."""

    async def rebuild(store: SessionStore) -> tuple[int, str | None]:
        return await store.reindex(search_config=search_config), await store.search_config()

    rows, config = ctx.run(rebuild)
    shown = f" (PostgreSQL text search configuration {config})" if config else ""
    ctx.out.print(f"search index rebuilt: {rows} row(s){shown}")


@main.command("prune")
@click.option(
    "--older-than",
    "older_than",
    metavar="AGE",
    help="Sessions last active more than AGE ago: 30m, 12h, 90d, 2w.",
)
@click.option("--keep-last", type=_AtLeast(0, "a number >= 0", "N"), help="Keep the N newest.")
@click.option("--tag", metavar="TAG", help="Only sessions with this tag.")
@click.option(
    "--archive",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the archives (<id>.jsonl.gz, the export); required to delete.",
)
@click.option(
    "--keep-checkpoints",
    type=_AtLeast(0, "a number >= 0", "N"),
    help="Of every kept session, delete the checkpoints older than its newest N.",
)
@click.option("--dry-run", is_flag=True, help="Change nothing; list what would be done.")
@json_option
@pass_ctx
def prune_cmd(
    ctx: Context,
    older_than: str | None,
    keep_last: int | None,
    tag: str | None,
    archive: Path | None,
    keep_checkpoints: int | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Archive, then delete, old sessions (never one with a live lease); each archive is
    verified against the database before its session is deleted. `import` reads them back."""
    age = None
    if older_than is not None:
        found = _AGO.match(older_than.strip())
        if found is None:
            raise UsageError(f"--older-than {older_than!r}: give a duration such as 90d or 12h")
        age = int(found.group(1)) * _UNIT_MS[found.group(2)]
    if age is None and keep_last is None and keep_checkpoints is None:
        raise UsageError("give --older-than, --keep-last or --keep-checkpoints")
    if (age is not None or keep_last is not None) and archive is None:
        raise UsageError("--archive DIR is required: sessions are deleted only once archived")

    report = ctx.run(
        lambda store: store.prune(
            older_than=age,
            keep_last=keep_last,
            tag=tag,
            dry_run=dry_run,
            archive=archive,
            keep_checkpoints=keep_checkpoints,
        )
    )
    if as_json:
        echo_json(
            {
                "dryRun": report.dry_run,
                "selected": list(report.selected),
                "archived": dict(report.archived),
                "deleted": list(report.deleted),
                "skipped": list(report.leased),
                "checkpointsDeleted": report.checkpoints_deleted,
            }
        )
        return
    verb = "would archive and delete" if dry_run else "archived and deleted"
    done = report.selected if dry_run else report.deleted
    for sid in done:
        where = f" -> {report.archived[sid]}" if sid in report.archived else ""
        ctx.out.print(f"{verb} {safe(sid)}{safe(where)}")
    for sid in report.leased:
        ctx.out.print(f"skipped {safe(sid)}: a live lease holds it", style="yellow")
    count = len([s for s in done if s not in report.leased])
    summary = f"{verb} {count} session(s)"
    if keep_checkpoints is not None:
        summary += f"; {'would delete' if dry_run else 'deleted'} "
        summary += f"{report.checkpoints_deleted} checkpoint(s)"
    ctx.out.print(summary)


@main.command("acp")
@click.option(
    "--model",
    "model_spec",
    metavar="PROVIDER:MODEL",
    help="A real model: openai:MODEL (Chat Completions, any OpenAI-compatible API with "
    "--base-url), openai-responses:MODEL (OpenAI Responses) or anthropic:MODEL. Default: the "
    "built-in deterministic planning agent.",
)
@click.option(
    "--base-url", metavar="URL", help="The API's base URL (e.g. https://api.deepseek.com)."
)
@click.option(
    "--api-key-env",
    metavar="NAME",
    help="The environment variable holding the API key (default: OPENAI_API_KEY, "
    "DEEPSEEK_API_KEY for a DeepSeek URL when set, ANTHROPIC_API_KEY).",
)
@click.option("--system", "system_prompt", metavar="TEXT", help="Replace the system prompt.")
@pass_ctx
def acp_cmd(
    ctx: Context,
    model_spec: str | None,
    base_url: str | None,
    api_key_env: str | None,
    system_prompt: str | None,
) -> None:
    """Run an Agent Client Protocol agent over stdio (for editors such as Zed).

    Without --model, the built-in deterministic agent turns each line of a prompt into a todo
    and works through them with todo_write calls. With --model, a real model runs the agent
    loop with the todo_write tool. Sessions are stored in the configured database and can be
    reloaded with session/load."""
    try:
        from .acp.agent import TodoSessionsAgent, serve
        from .acp.builtin import SYSTEM_PROMPT, todo_tools
    except ImportError as exc:
        if ctx.debug:
            raise
        ctx.fail(str(exc))
    from .service import SessionService

    if model_spec is None and (base_url or api_key_env or system_prompt):
        raise click.UsageError("--base-url, --api-key-env and --system need --model")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LogFormatter(tracebacks=ctx.debug))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        service = SessionService(ctx.store())
        agent = None
        if model_spec is not None:
            from .harness.adapters import model_from_spec

            try:
                model = model_from_spec(
                    model_spec,
                    base_url=base_url,
                    api_key_env=api_key_env,
                    system=system_prompt or SYSTEM_PROMPT,
                )
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--model") from None
            agent = TodoSessionsAgent(
                service, model_factory=lambda: model, tools_factory=todo_tools, record_requests=True
            )
        asyncio.run(serve(service, agent))
    except (TodoSessionsError, OSError) as exc:
        if ctx.debug:
            raise
        ctx.fail(str(exc))


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port."
)
@click.option(
    "--allow-writes", is_flag=True, help="Allow forking from the page (default: read-only)."
)
@click.option(
    "--allow-host",
    "allow_hosts",
    metavar="NAME",
    multiple=True,
    help="Also accept requests whose Host header names NAME (repeatable); needed with "
    "--host 0.0.0.0 or ::. Loopback names and --host itself are always accepted.",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="Close a connection that has not sent a whole request head in this time.",
)
@click.option(
    "--message-limit",
    type=COUNT,
    default=1_000_000,
    show_default=True,
    metavar="BYTES",
    help="Show a longer text cut, with a link to the full text.",
)
@pass_ctx
def serve_cmd(
    ctx: Context,
    host: str,
    port: int,
    allow_writes: bool,
    allow_hosts: tuple[str, ...],
    header_timeout: float,
    message_limit: int,
) -> None:
    """Browse and replay sessions in a web browser (needs the [web] extra; docs/web.md)."""
    try:
        from .web import serve
        from .web.server import HostError, allowed_hosts
    except ImportError as exc:
        if ctx.debug:
            raise
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    for name in allow_hosts:
        if not name.strip() or any(c in name for c in "/ ,@"):
            raise UsageError(f"--allow-host takes a host name without scheme or port, got {name!r}")
    try:
        allowed_hosts(host, allow_hosts)
    except HostError as exc:
        raise UsageError(str(exc)) from None
    mode = "forking allowed" if allow_writes else "read-only"

    def announce(url: str) -> None:
        ctx.err.print(f"serving {ctx.location()} on {url} ({mode}; Ctrl-C stops)")

    try:
        serve(
            ctx.store(),
            host=host,
            port=port,
            allow_writes=allow_writes,
            database=ctx.location(),
            announce=announce,
            allow_hosts=allow_hosts,
            header_timeout=header_timeout,
            message_limit=message_limit,
        )
    except (TodoSessionsError, OSError) as exc:
        if ctx.debug:
            raise
        ctx.fail(str(exc))


if __name__ == "__main__":  # pragma: no cover
    main(prog_name="todo-sessions")
