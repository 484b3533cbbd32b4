"""``demo``: a scripted coding session through the real agent loop (the [harness] extra)."""

from __future__ import annotations

from typing import Any

import click
from rich.text import Text

from ..core.types import TODO_WRITE
from ..store.store import SessionStore
from ._context import Context, pass_ctx
from ._options import command
from ._render import render_messages, render_timeline, render_todo_list, safe

__all__ = ["demo_cmd"]


@command("demo")
@click.option("--id", "session_id", help="Session id for the demo session (default: random).")
@pass_ctx
def demo_cmd(ctx: Context, session_id: str | None) -> None:
    """Run a scripted coding session through the real agent loop into the store, then
    print its replay: the timeline, the todo list after each write, and the model's messages."""
    try:
        from ..harness.demo import run_demo
    except ImportError as exc:  # without the [harness] extra: its one line
        if ctx.debug:
            raise
        ctx.fail(str(exc))

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
    writes = sum(1 for e in log.events if e.type == TODO_WRITE)
    out.rule()
    out.print(
        f"{len(log.events)} events stored; {writes} todo/write events in the log; "
        f"{len(messages)} messages derived for the model, and no todo/write among them "
        "(the model sees only its own todo_write calls and their results)."
    )
    out.print(f"replay it again with: {safe(ctx.hint('show', result.session_id))}")
