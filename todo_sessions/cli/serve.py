"""``serve``: the browser viewer (the [web] extra)."""

from __future__ import annotations

import sys

import click

from ..errors import TodoSessionsError
from ._context import Context, pass_ctx
from ._options import BYTES, UsageError, command

__all__ = ["serve_cmd"]


@command("serve")
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
    type=BYTES,
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
        from ..web import serve
        from ..web.server import HostError, allowed_hosts
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
