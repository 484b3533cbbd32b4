"""``acp``: an Agent Client Protocol agent over stdio (the [acp] extra)."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import click

from .._redact import redact
from ..errors import TodoSessionsError
from ._context import Context, pass_ctx
from ._options import command

__all__ = ["acp_cmd"]


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


@command("acp")
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
    loop with the todo_write and subagent tools. Sessions are stored in the configured
    database and can be reloaded with session/load."""
    try:
        from ..acp.agent import TodoSessionsAgent, serve
        from ..acp.builtin import SYSTEM_PROMPT, todo_tools
    except ImportError as exc:
        if ctx.debug:
            raise
        ctx.fail(str(exc))
    from .._service import SessionService

    if model_spec is None and (base_url or api_key_env or system_prompt):
        raise click.UsageError("--base-url, --api-key-env and --system need --model")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LogFormatter(tracebacks=ctx.debug))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        service = SessionService(ctx.store())
        agent = None
        if model_spec is not None:
            from ..harness.adapters import model_from_spec

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
                service,
                model_factory=lambda: model,
                tools_factory=lambda: todo_tools(service),
                record_requests=True,
            )
        asyncio.run(serve(service, agent))
    except (TodoSessionsError, OSError) as exc:
        if ctx.debug:
            raise
        ctx.fail(str(exc))
