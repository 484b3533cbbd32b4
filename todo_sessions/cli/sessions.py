"""Reading sessions: ``list``, ``show``, ``todos`` and ``messages``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from .._jsonout import escape_controls
from ..core.envelope import SessionEvent
from ..core.header import SessionHeader
from ..core.messages import Message, messages_adapter
from ..core.todos import TodoItem
from ..core.types import TURN_START
from ..store.leases import LeaseHolder
from ..store.results import CheckpointInfo, SessionSummary
from ..store.store import ChildSession, SessionStore, wall_clock_ms
from ._context import Context, clamp_at, echo_json, iso, pass_ctx, when
from ._options import COUNT, LIST_LIMIT, MOMENT, at_option, command, json_option
from ._render import Timeline, render_messages, render_todo_list, safe

__all__ = ["list_cmd", "messages_cmd", "show_cmd", "todos_cmd"]


def lease_json(holder: LeaseHolder | None) -> dict[str, Any] | None:
    if holder is None:
        return None
    return {
        "owner": holder.owner,
        "host": holder.host,
        "pid": holder.pid,
        "epoch": holder.epoch,
        "expiresAt": holder.expires_at,
    }


def summary_json(s: SessionSummary) -> dict[str, Any]:
    return s.to_dict()


Rows = list[tuple[SessionSummary, int]]


@command("list")
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
    ctx: Context, limit: int, before_id: str | None, as_json: bool, **filters: Any
) -> None:
    """List sessions, newest activity first (with event and turn counts), filtered by
    directory, tag, activity time, parent, open todos or title."""
    query = {"has_open_todos": filters.pop("open_todos"), **filters}

    async def work(store: SessionStore) -> tuple[Rows, dict[str, LeaseHolder]]:
        before = await store.summary(before_id) if before_id is not None else None
        page = await store.list(limit=limit, before=before, **query)
        holders = await store.lease_holders(s.id for s in page)
        now = wall_clock_ms()
        live = {sid: h for sid, h in holders.items() if h.live(now)}
        return [(s, await store.count(s.id, type=TURN_START)) for s in page], live

    rows, leases = ctx.run(work)
    if as_json:
        found = [(summary_json(s), turns, lease_json(leases.get(s.id))) for s, turns in rows]
        echo_json([{**s, "turns": turns, "lease": lease} for s, turns, lease in found])
        return
    if not rows:
        ctx.out.print("no sessions")
        return
    ctx.out.print(_list_table(rows, leases))
    if len(rows) == limit:
        more = _list_options(limit, query)
        hint = ctx.hint("list", *more, "--before", rows[-1][0].id)
        ctx.out.print(f"next page: {safe(hint)}", style="dim")


def _list_table(rows: Rows, leases: dict[str, LeaseHolder]) -> Table:
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
        cells = [safe(s.id), str(s.next_seq), str(turns), when(s.updated_at), safe(s.title or "")]
        if tagged:
            cells.append(safe(", ".join(s.tags)))
        if leases:
            holder = leases.get(s.id)
            cells.append(safe(holder.describe()) if holder is not None else "")
        table.add_row(*cells)
    return table


def _list_options(limit: int, query: dict[str, Any]) -> list[str]:
    """The options of ``list`` that give the same query again (for the next page's hint)."""
    more = ["--limit", str(limit)] if limit != LIST_LIMIT else []
    for option in ("cwd", "tag", "parent"):
        if query[option] is not None:
            more += [f"--{option}", query[option]]
    for option in ("since", "until"):
        if query[option] is not None:  # the moment it meant, so the next page has the same bounds
            more += [f"--{option}", iso(query[option])]
    if query["has_open_todos"] is not None:
        more.append("--open-todos" if query["has_open_todos"] else "--no-open-todos")
    if query["text"] is not None:
        more += ["--text", query["text"]]
    return more


@command("show")
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
        header = await store.header(session_id)
        summary = await store.summary(session_id)
        holder = (await store.lease_holders([session_id])).get(session_id)
        if holder is not None and not holder.live(wall_clock_ms()):
            holder = None
        children = await store.children(session_id)
        events = _stream_upto(store, session_id, summary.next_seq)
        if as_json:
            await _show_json(header, summary, holder, children, events)
        else:
            _show_heading(ctx, header, summary, holder)
            _show_children(ctx, children)
            timeline = Timeline(verbose=verbose)
            async for event in events:
                for row in timeline.feed(event):
                    ctx.out.print(row)
            for row in timeline.close():
                ctx.out.print(row)

    ctx.run(work)


async def _show_json(
    header: SessionHeader,
    summary: SessionSummary,
    holder: LeaseHolder | None,
    children: list[ChildSession],
    events: AsyncIterator[SessionEvent],
) -> None:
    """One JSON object, written as it is read."""
    head = json.dumps(
        {
            "header": header.to_wire(),
            "revision": summary.revision,
            "lease": lease_json(holder),
            "subagents": [c.to_dict() for c in children],
        }
    )
    click.echo(head[:-1] + ',"events":[', nl=False)
    first = True
    async for event in events:
        click.echo(("" if first else ",") + escape_controls(event.to_json()), nl=False)
        first = False
    click.echo("]}")


def _show_heading(
    ctx: Context, h: SessionHeader, summary: SessionSummary, holder: LeaseHolder | None
) -> None:
    ctx.out.print(f"[bold]{escape(safe(h.id))}[/]  {escape(safe(h.title or ''))}", markup=True)
    ctx.out.print(
        f"created {when(h.created_at)}  cwd {safe(h.cwd or '-')}  {summary.next_seq} events",
        style="dim",
    )
    if h.parent_session and h.seed_length is not None:
        ctx.out.print(
            f"forked from {safe(h.parent_session)} ({h.seed_length} events inherited)",
            style="dim",
        )
    elif h.parent_session:
        origin = f", origin {safe(h.origin)}" if h.origin else ""
        ctx.out.print(
            f"subagent session of {safe(h.parent_session)} "
            f"(delegation depth {h.delegation_depth}{origin})",
            style="magenta",
        )
    if holder is not None:
        ctx.out.print(
            f"live: leased by {safe(holder.describe())} until {when(holder.expires_at)}",
            style="dim",
        )


def _show_children(ctx: Context, children: list[ChildSession]) -> None:
    """The sub-agent sessions the session started, one line each."""
    for c in children:
        count = len(c.open_todos)
        todos = f"  {count} open todo{'s' if count != 1 else ''}" if count else ""
        ctx.out.print(
            f"subagent {safe(c.id)}  {c.status}  {safe(c.title or '')}{todos}", style="magenta"
        )


def _show_checkpoints(ctx: Context, session_id: str, as_json: bool) -> None:
    async def work(store: SessionStore) -> tuple[int, list[CheckpointInfo]]:
        summary = await store.summary(session_id)
        return summary.next_seq, await store.checkpoints(session_id)

    next_seq, found = ctx.run(work)
    if as_json:
        echo_json([c.to_dict() for c in found])
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
            when(c.created_at),
            str(c.size),
            str(next_seq - c.seq),
        )
    ctx.out.print(table)


async def _stream_upto(
    store: SessionStore, session_id: str, end: int
) -> AsyncIterator[SessionEvent]:
    """The session's events below seq ``end`` (what the summary described), page by page."""
    async with aclosing(store.stream(session_id)) as events:  # type: ignore[type-var]
        async for event in events:
            if event.seq >= end:
                return
            yield event


@command("todos")
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


@command("messages")
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
