"""``todo-sessions``: a thin command line over the library (docs/design.md, "Command line").

One module per family of commands (`sessions`, `editing`, `search`, `exporting`, `verify`,
`maintenance`, `demo`, `serve`, `acp`); each parses its options, calls the library once and
prints. The group here loads a command's module only when that command runs: ``--help`` and
``--version`` import click and this package's `_options`, nothing of the library.

Every error is one line on stderr, ``error: …``: exit status 2 for a usage error (the command
line itself is wrong: an unknown option, a missing argument, a value of the wrong form,
including a ``--db`` that is not a database URL), 1 when the command ran and failed, 130 when
interrupted (``--debug`` shows the traceback). Listing commands take ``--json`` for
machine-readable output.
"""

from __future__ import annotations

import errno
import importlib
import sys
import traceback
from typing import Any, cast

import click
from click.core import ParameterSource

from .. import __version__
from ._options import (
    COMMANDS,
    DB_HELP,
    SCHEMA_HELP,
    TABLE_PREFIX_HELP,
    UsageError,
    check_params,
    interrupted,
    one_line,
)

__all__ = ["main"]

_NO_ARGS_IS_HELP: tuple[type[Exception], ...] = tuple(
    t for t in [getattr(click.exceptions, "NoArgsIsHelpError", None)] if t is not None
)
"""click >= 8.2: a bare ``todo-sessions`` prints the help (left alone: it is the help)."""


class _Group(click.Group):
    """The command group, its commands loaded on first use (`COMMANDS`). Usage errors are one
    line, exit status 2; an exception no command expected is one line on stderr too, exit
    status 1, never a traceback (``--debug`` shows it); Ctrl-C is one line, exit status 130."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module = importlib.import_module(f"{__name__}.{COMMANDS[cmd_name][0]}")
        return cast(click.Command, getattr(module, f"{cmd_name}_cmd"))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their lines from `COMMANDS`, without loading them."""
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """The group's options checked as every command's are (`_options.check_params`)."""
        rest = super().parse_args(ctx, args)
        check_params(ctx, self.get_params(ctx))
        return rest

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
            raise one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError:
            raise
        except _NO_ARGS_IS_HELP:
            raise
        except click.UsageError as exc:
            raise one_line(exc) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            if _debugging(ctx):
                traceback.print_exc()  # click itself would say "Aborted!" and exit 1
                sys.exit(130)
            interrupted()
        except Exception as exc:
            if _debugging(ctx):
                raise
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
                raise  # click exits quietly
            _unexpected(exc)


def _debugging(ctx: click.Context) -> bool:
    return bool(getattr(ctx.obj, "debug", False) or ctx.params.get("debug"))


def _unexpected(exc: Exception) -> None:
    from .._redact import mask_urls

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
    from ..errors import NamespaceError
    from ..store.engine import parse_url
    from ..store.migrate import namespace_of
    from ._context import Context
    from ._db import check_db

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
