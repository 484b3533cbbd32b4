"""``todo-sessions``: a thin command line over the library (SPEC §11).

Each command parses its options, runs one ``asyncio.run(...)`` and prints. Library errors are
one line on stderr with exit status 1 (``--debug`` shows the traceback).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from .errors import TodoSessionsError
from .store.migrate import migrate as run_migrate
from .store.store import SessionStore, default_url

T = TypeVar("T")

DB_HELP = (
    "Database URL (sqlite:///path/to/file.db or postgresql://user@host/db). "
    "Default: $TODO_SESSIONS_URL, else sessions.db in the user's data directory."
)


class Context:
    def __init__(self, db: str | None, debug: bool) -> None:
        self.db = db or default_url()
        self.debug = debug
        self.out = Console(soft_wrap=True)
        self.err = Console(stderr=True)

    def store(self, **options: Any) -> SessionStore:
        return SessionStore(self.db, **options)

    def run(self, work: Awaitable[T]) -> T:
        """Run one coroutine; library errors become one line and exit status 1."""
        try:
            return asyncio.run(work)  # type: ignore[arg-type]
        except (TodoSessionsError, ValueError, OSError) as exc:
            if self.debug:
                raise
            self.err.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
            sys.exit(1)


pass_ctx = click.make_pass_decorator(Context)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar="TODO_SESSIONS_URL", show_envvar=True, help=DB_HELP)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="todo-sessions")
@click.pass_context
def main(click_ctx: click.Context, db: str | None, debug: bool) -> None:
    """Inspect, replay and maintain todo-sessions session logs."""
    click_ctx.obj = Context(db, debug)


@main.command("migrate")
@pass_ctx
def migrate_cmd(ctx: Context) -> None:
    """Create or upgrade the database schema to the newest revision."""
    ctx.run(run_migrate(ctx.db))
    ctx.out.print(f"migrated {ctx.store().url}")


@main.command("list")
@click.option("--limit", default=50, show_default=True, help="Sessions per page.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def list_cmd(ctx: Context, limit: int, as_json: bool) -> None:
    """List sessions, newest activity first."""

    async def work() -> list[Any]:
        async with ctx.store() as store:
            return await store.list(limit=limit)

    summaries = ctx.run(work())
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "id": s.id,
                        "createdAt": s.created_at,
                        "updatedAt": s.updated_at,
                        "cwd": s.cwd,
                        "title": s.title,
                        "events": s.next_seq,
                        "revision": s.revision,
                    }
                    for s in summaries
                ]
            )
        )
        return
    if not summaries:
        ctx.out.print("no sessions")
        return
    table = Table("id", "events", "last activity", "title")
    for s in summaries:
        table.add_row(s.id, str(s.next_seq), _when(s.updated_at), s.title or "")
    ctx.out.print(table)


def _when(ms: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


if __name__ == "__main__":  # pragma: no cover
    main()
