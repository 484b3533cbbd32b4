"""What a running command holds: the database it was given, the consoles it prints on, and the
helpers every command uses to run the library once and report its errors as one line."""

from __future__ import annotations

import asyncio
import datetime
import os
import shlex
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .._jsonout import dumps as json_dumps
from .._redact import mask_url, mask_urls
from ..errors import TodoSessionsError
from ..store.engine import parse_url
from ..store.store import SessionStore, default_url
from ._options import CHAIN_KEY_ENV, program
from ._render import safe

__all__ = ["Context", "clamp_at", "echo_json", "iso", "pass_ctx", "when"]

T = TypeVar("T")


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
        """Whether ``db`` came from ``--db`` or ``$TODO_SESSIONS_URL`` (hints repeat it)."""
        self.schema = schema
        self.table_prefix = table_prefix
        """``--schema`` / ``--table-prefix``: each store and migration gets them; hints repeat
        them."""
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

        return self.run_async(main())

    def run_async(self, work: Awaitable[T]) -> T:
        """``asyncio.run(work)``; library errors become one line, exit 1."""

        async def main() -> T:
            return await work

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


def when(ms: int) -> str:
    """Epoch ms as local date and time, to the second (what tables show)."""
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def iso(ms: int) -> str:
    """Epoch ms as ISO 8601 with its offset, exactly (what --since/--until read back)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).astimezone()
    return moment.isoformat(timespec="milliseconds")
