"""``acp``: an Agent Client Protocol agent over stdio (the [acp] extra)."""

from __future__ import annotations

import asyncio
import logging
import os
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
    "model_specs",
    metavar="PROVIDER:MODEL",
    multiple=True,
    help="A real model: openai:MODEL (Chat Completions, any OpenAI-compatible API with "
    "--base-url), openai-responses:MODEL (OpenAI Responses) or anthropic:MODEL. Repeat it to "
    "offer several (the editor's model picker; the first is the default). Default: the "
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
@click.option(
    "--compact-at",
    type=click.FloatRange(0, 1, min_open=True),
    metavar="SHARE",
    help="Compact a session's history when it fills this share of the context window "
    "(e.g. 0.8). Default: never automatically.",
)
@click.option(
    "--context-window",
    type=click.IntRange(min=1),
    metavar="TOKENS",
    help="The context window, in tokens, that --compact-at measures against.",
)
@pass_ctx
def acp_cmd(
    ctx: Context,
    model_specs: tuple[str, ...],
    base_url: str | None,
    api_key_env: str | None,
    system_prompt: str | None,
    compact_at: float | None,
    context_window: int | None,
) -> None:
    """Run an Agent Client Protocol agent over stdio (for editors such as Zed).

    Without --model, the built-in deterministic agent turns each line of a prompt into a todo
    and works through them with todo_write calls. With --model, a real model runs the agent
    loop with the todo_write and subagent tools (the editor may switch between several
    --model; the API key is read from the environment when a session first runs the model).
    Sessions are stored in the configured database and can be reloaded with session/load."""
    try:
        from ..acp.agent import TodoSessionsAgent, serve
        from ..acp.builtin import SYSTEM_PROMPT, todo_tools
    except ImportError as exc:
        if ctx.debug:
            raise
        ctx.fail(str(exc))
    from .._service import SessionService

    if not model_specs and (base_url or api_key_env or system_prompt):
        raise click.UsageError("--base-url, --api-key-env and --system need --model")
    if (context_window is None) != (compact_at is None):
        raise click.UsageError("--compact-at and --context-window go together")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LogFormatter(tracebacks=ctx.debug))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        service = SessionService(ctx.store())
        compaction = None
        if compact_at is not None:
            from ..harness.compaction import CompactionPolicy

            compaction = CompactionPolicy(threshold=compact_at, context_window=context_window)
        if model_specs:
            models = [
                model_choice(spec, base_url, api_key_env, system_prompt or SYSTEM_PROMPT)
                for spec in dict.fromkeys(model_specs)
            ]
            agent = TodoSessionsAgent(
                service,
                models=models,
                tools_factory=lambda: todo_tools(service),
                record_requests=True,
                compaction=compaction,
            )
        else:
            agent = TodoSessionsAgent(service, compaction=compaction)
        asyncio.run(serve(service, agent))
    except (TodoSessionsError, OSError) as exc:
        if ctx.debug:
            raise
        ctx.fail(str(exc))


def key_env_of(spec: str, base_url: str | None, api_key_env: str | None) -> str | None:
    """The environment variable a ``--model`` reads its API key from, when it needs one:
    ``--api-key-env``; else the provider's (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``;
    ``DEEPSEEK_API_KEY`` for DeepSeek's URL); None for an OpenAI-compatible ``--base-url``
    (a local server needs no key)."""
    from ..harness.api_keys import DEEPSEEK_HOST, host_of

    provider = spec.partition(":")[0]
    if api_key_env:
        return api_key_env
    if provider == "anthropic":
        return "ANTHROPIC_API_KEY"
    if base_url is None:
        return "OPENAI_API_KEY"
    return "DEEPSEEK_API_KEY" if host_of(base_url) == DEEPSEEK_HOST else None


def model_choice(spec: str, base_url: str | None, api_key_env: str | None, system: str) -> Any:
    """``spec`` as a `ModelChoice`: checked now (a bad spec is a usage error), made when a
    session first runs it (so the bridge starts, and answers ``authenticate``, before the
    key is set), then reused."""
    from ..acp.config_options import ModelChoice
    from ..errors import ModelAuthError
    from ..harness.adapters import model_from_spec

    made: list[Any] = []

    def make() -> Any:
        if not made:
            made.append(
                model_from_spec(spec, base_url=base_url, api_key_env=api_key_env, system=system)
            )
        return made[0]

    key_env = key_env_of(spec, base_url, api_key_env)
    try:
        make()
    except ModelAuthError:
        if key_env is None or os.environ.get(key_env):
            raise  # not a missing key (e.g. a key that would go to another host)
        # no key yet: the client is told through authMethods / authenticate
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--model") from None
    return ModelChoice(spec, make, key_env=key_env)
