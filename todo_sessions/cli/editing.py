"""Changing sessions: ``tag``, ``retitle``, ``fork`` and ``delete``."""

from __future__ import annotations

import sys

import click

from ..core.meta import tag_problem
from ..errors import TodoSessionsError
from ..store.results import SessionSummary, StoredLog
from ..store.store import SessionStore, wall_clock_ms
from ._context import Context, clamp_at, pass_ctx
from ._options import UsageError, at_option, command, interrupted
from ._render import safe

__all__ = ["delete_cmd", "fork_cmd", "retitle_cmd", "tag_cmd"]


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


@command("tag")
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


@command("retitle")
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


@command("fork")
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


@command("delete")
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
