"""``todo-sessions``: a thin command line over the library (docs/design.md, "Command line").

Each command parses its options, runs one ``asyncio.run(...)`` and prints. Library errors are
one line on stderr with exit status 1 (``--debug`` shows the traceback). Listing commands take
``--json`` for machine-readable output.
"""

from __future__ import annotations

import asyncio
import datetime
import errno
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing, contextmanager
from pathlib import Path
from typing import IO, Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from .core.messages import messages_adapter
from .core.verify import Problem
from .errors import (
    SessionExistsError,
    TodoSessionsError,
)
from .integrity import VerifyReport, verify_all, verify_session
from .jsonl import export_lines, import_lines
from .render import Timeline, render_messages, render_timeline, render_todo_list, safe
from .store.migrate import migrate as run_migrate
from .store.results import SessionSummary
from .store.store import SessionStore, default_url

T = TypeVar("T")

DB_HELP = (
    "Database URL: sqlite:///path/to/file.db or postgresql://user@host/db. "
    "Default: $TODO_SESSIONS_URL, else an SQLite file sessions.db in the user's data "
    "directory (on Linux ~/.local/share/todo-sessions/sessions.db)."
)


class Context:
    def __init__(self, db: str | None, debug: bool) -> None:
        self.db = db or default_url()
        self.debug = debug
        # No markup or emoji codes by default: ids, titles and messages are printed literally
        # (a title like "[/x]" must neither vanish nor crash); `markup=True` prints escape them.
        self.out = Console(highlight=False, markup=False, emoji=False, soft_wrap=True)
        # soft_wrap: an error stays one line
        self.err = Console(stderr=True, highlight=False, markup=False, emoji=False, soft_wrap=True)

    def store(self, **options: Any) -> SessionStore:
        return SessionStore(self.db, **options)

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
        self.err.print(f"[bold red]error:[/] {escape(message)}", markup=True)
        sys.exit(1)

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


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False))


def _when(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


class _Group(click.Group):
    """The command group. An exception no command expected is one line on stderr too, exit
    status 1, never a traceback (``--debug`` shows it)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if isinstance(ctx.obj, Context) and ctx.obj.debug:
                raise
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
                raise  # click exits quietly
            text = " ".join(str(exc).split()) or "(no message)"
            name = type(exc).__name__
            click.echo(f"error: unexpected {name}: {text} (--debug shows more)", err=True)
            sys.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar="TODO_SESSIONS_URL", show_envvar=True, help=DB_HELP)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="todo-sessions")
@click.pass_context
def main(click_ctx: click.Context, db: str | None, debug: bool) -> None:
    """Store, inspect and replay AI coding-agent sessions (todo-sessions)."""
    click_ctx.obj = Context(db, debug)


@main.command("migrate")
@pass_ctx
def migrate_cmd(ctx: Context) -> None:
    """Create or upgrade the database schema to the newest revision."""
    try:
        asyncio.run(run_migrate(ctx.db))
    except (TodoSessionsError, ValueError, OSError) as exc:
        if ctx.debug:
            raise
        ctx.fail(str(exc))
    ctx.out.print(f"database is at the newest schema: {ctx.store().url}")


@main.command("demo")
@click.option("--id", "session_id", help="Session id for the demo session (default: random).")
@pass_ctx
def demo_cmd(ctx: Context, session_id: str | None) -> None:
    """Run a scripted coding session through the real agent loop into the store, then
    print its replay: the timeline, the todo list after each write, and the model's messages."""
    from .demo import run_demo

    async def work(store: SessionStore) -> tuple[Any, Any, Any, Any]:
        result = await run_demo(store, session_id=session_id)
        log = await store.read(result.session_id)
        messages = await store.derive_messages(result.session_id)
        return result, log, messages, await store.current_todos(result.session_id)

    result, log, messages, todos = ctx.run(work)
    out = ctx.out
    out.rule(Text(f"demo session {result.session_id} — stored in {ctx.store().url}", "bold"))
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
    out.print(f"replay it again with: todo-sessions show {result.session_id}")


def _summary_json(s: SessionSummary) -> dict[str, Any]:
    return {
        "id": s.id,
        "createdAt": s.created_at,
        "updatedAt": s.updated_at,
        "cwd": s.cwd,
        "title": s.title,
        "events": s.next_seq,
        "revision": s.revision,
    }


@main.command("list")
@click.option("--limit", default=50, show_default=True, help="Sessions per page.")
@click.option("--before", "before_id", help="Show the page after this session id.")
@json_option
@pass_ctx
def list_cmd(ctx: Context, limit: int, before_id: str | None, as_json: bool) -> None:
    """List sessions, newest activity first (with event and turn counts)."""

    async def work(store: SessionStore) -> list[tuple[SessionSummary, int | None]]:
        before = await store.summary(before_id) if before_id is not None else None
        return [
            (summary, await store.count(summary.id, type="turn/start"))
            for summary in await store.list(limit=limit, before=before)
        ]

    rows = ctx.run(work)
    if as_json:
        echo_json([{**_summary_json(s), "turns": turns} for s, turns in rows])
        return
    if not rows:
        ctx.out.print("no sessions")
        return
    table = Table()
    table.add_column("id", no_wrap=True, overflow="fold", min_width=max(len(s.id) for s, _ in rows))
    for name in ("events", "turns", "last activity"):
        table.add_column(name, no_wrap=True)
    table.add_column("title", overflow="fold")
    for s, turns in rows:
        table.add_row(
            safe(s.id), str(s.next_seq), str(turns), _when(s.updated_at), safe(s.title or "")
        )
    ctx.out.print(table)
    if len(rows) == limit:
        ctx.out.print(f"next page: todo-sessions list --before {rows[-1][0].id}", style="dim")


@main.command("show")
@click.argument("session_id")
@click.option("--verbose", "-v", is_flag=True, help="Also show steps, chunks and request records.")
@json_option
@pass_ctx
def show_cmd(ctx: Context, session_id: str, verbose: bool, as_json: bool) -> None:
    """Show a session's timeline: turns, messages, tool calls and results, todo changes.

    Streams the log page by page, so any session shows in flat memory."""

    async def work(store: SessionStore) -> None:
        h = await store.header(session_id)
        summary = await store.summary(session_id)
        events = _stream_upto(store, session_id, summary.next_seq)
        if as_json:  # one JSON object, written as it is read
            head = json.dumps({"header": h.to_wire(), "revision": summary.revision})
            click.echo(head[:-1] + ',"events":[', nl=False)
            first = True
            async for event in events:
                click.echo(("" if first else ",") + event.to_json(), nl=False)
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
        timeline = Timeline(verbose=verbose)
        async for event in events:
            for row in timeline.feed(event):
                ctx.out.print(row)
        for row in timeline.close():
            ctx.out.print(row)

    ctx.run(work)


async def _stream_upto(store: SessionStore, session_id: str, end: int) -> AsyncIterator[Any]:
    """The session's events below seq ``end`` (what the summary described), page by page."""
    async with aclosing(store.stream(session_id)) as events:  # type: ignore[type-var]
        async for event in events:
            if event.seq >= end:
                return
            yield event


@main.command("todos")
@click.argument("session_id")
@click.option("--at", "at_seq", type=int, help="The list as of this seq.")
@json_option
@pass_ctx
def todos_cmd(ctx: Context, session_id: str, at_seq: int | None, as_json: bool) -> None:
    """Show the current todo list of a session (or as of --at SEQ)."""
    todos = ctx.run(lambda store: store.current_todos(session_id, upto_seq=at_seq))
    if as_json:
        echo_json(None if todos is None else [t.model_dump() for t in todos])
        return
    ctx.out.print(render_todo_list(todos))


@main.command("messages")
@click.argument("session_id")
@click.option("--at", "at_seq", type=int, help="The history as of this seq.")
@json_option
@pass_ctx
def messages_cmd(ctx: Context, session_id: str, at_seq: int | None, as_json: bool) -> None:
    """Show the message history the model sees (derived from surface events only)."""
    messages = ctx.run(lambda store: store.derive_messages(session_id, upto_seq=at_seq))
    if as_json:
        echo_json(
            messages_adapter.dump_python(messages, mode="json", by_alias=True, exclude_none=True)
        )
        return
    ctx.out.print(render_messages(messages))


@contextmanager
def _sink(output: Path | None) -> Iterator[IO[str]]:
    """stdout, or a temporary file renamed to ``output`` only once the export is complete
    (a failed export never leaves a truncated file that would import as a shorter session)."""
    if output is None:
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
    type=click.Path(dir_okay=False, path_type=Path),
    help="File to write (default: stdout).",
)
@pass_ctx
def export_cmd(ctx: Context, session_id: str, output: Path | None) -> None:
    """Export a session as JSONL: a header line, then one event per line."""

    async def work(store: SessionStore) -> int:
        total = (await store.summary(session_id)).next_seq
        with ctx.progress("export", total) as advance, _sink(output) as sink:
            count = 0
            async for line in export_lines(store, session_id, progress=advance):
                sink.write(line + "\n")
                count += 1
        return count - 1

    count = ctx.run(work)
    if output:
        ctx.err.print(f"exported {count} events of {session_id} to {output}")


@main.command("import")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option("--as", "as_id", help="Store under this id instead of the exported one.")
@pass_ctx
def import_cmd(ctx: Context, file: IO[str], as_id: str | None) -> None:
    """Import a JSONL export (validated completely before anything is written)."""

    async def work(store: SessionStore) -> Any:
        with ctx.progress("import", None) as advance:
            try:
                return await import_lines(store, file, as_id=as_id, progress=advance)
            except SessionExistsError as exc:
                exc.args = (f"{exc}; import it under another id with --as NEW_ID",)
                raise

    result = ctx.run(work)
    ctx.out.print(f"imported {result.events} events as session {result.session_id}")


@main.command("verify")
@click.argument("session_id", required=False)
@json_option
@pass_ctx
def verify_cmd(ctx: Context, session_id: str | None, as_json: bool) -> None:
    """Check one session (or all): seqs, rows, payloads, structure, surface, answered calls.
    Changes nothing; exits 1 when anything is wrong."""

    async def work(store: SessionStore) -> VerifyReport:
        if session_id is not None:
            return VerifyReport(sessions={session_id: await verify_session(store, session_id)})
        return await verify_all(store)

    report = ctx.run(work)
    bad = {sid: problems for sid, problems in report.sessions.items() if problems}
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
            if problems:
                ctx.out.print(f"[red]✗ {escape(sid)}[/]: {len(problems)} problem(s)", markup=True)
                for p in problems:
                    ctx.out.print(f"    {p}")
            else:
                ctx.out.print(f"[green]✓ {escape(sid)}[/]", markup=True)
        checked = f"{len(report.sessions)} session(s) checked, {len(bad)} with problems"
        if session_id is None:
            checked += f"; database check: {len(report.database) or 'no'} problem(s)"
        ctx.out.print(checked)
    if not report.ok:
        sys.exit(1)


def _problem_json(problem: Problem) -> dict[str, Any]:
    return {"seq": problem.seq, "kind": problem.kind, "message": problem.message}


@main.command("fork")
@click.argument("session_id")
@click.option("--at", "at_seq", type=int, help="Last seq to inherit (default: all).")
@click.option("--as", "child_id", help="Id of the new session (default: generated).")
@pass_ctx
def fork_cmd(ctx: Context, session_id: str, at_seq: int | None, child_id: str | None) -> None:
    """Fork a session: a new session seeded with its events up to --at."""
    log = ctx.run(lambda store: store.fork(session_id, at_seq, child_id))
    ctx.out.print(
        f"forked {session_id} into {log.header.id} ({log.header.seed_length} events inherited)"
    )


@main.command("delete")
@click.argument("session_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_ctx
def delete_cmd(ctx: Context, session_id: str, yes: bool) -> None:
    """Delete a session and all its events (asks first unless --yes)."""
    if not yes and not click.confirm(f"delete session {session_id} and all its events?", err=True):
        ctx.fail("not deleted")
    ctx.run(lambda store: store.delete(session_id))
    ctx.out.print(f"deleted {session_id}")


@main.command("acp")
@pass_ctx
def acp_cmd(ctx: Context) -> None:
    """Run an Agent Client Protocol agent over stdio (for editors such as Zed).

    The built-in deterministic agent turns each line of a prompt into a todo and works through
    them with todo_write calls; sessions are stored in the configured database and can be
    reloaded with session/load."""
    import logging

    from .acp.agent import serve
    from .service import SessionService

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        asyncio.run(serve(SessionService(ctx.store())))
    except (TodoSessionsError, OSError) as exc:
        if ctx.debug:
            raise
        ctx.fail(str(exc))


if __name__ == "__main__":  # pragma: no cover
    main(prog_name="todo-sessions")
