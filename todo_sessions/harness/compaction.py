"""When and how the agent loop compacts (docs/format.md, "Compaction"): `CompactionPolicy`
and `compact_if_due`.

Before a model call whose history passes the policy's share of the context window, the loop
asks the model for a summary of the older turns, through the same `Model` protocol, and
`Session.compact` replaces them with it (the todo list rides along in the summary message).
A summarisation that fails or returns nothing is recorded as a failed attempt and the turn
goes on with its history intact.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .._session import Session
from ..core.compaction import (
    estimate_tokens,
    failed_compaction,
    is_summary_message,
    span_ending_before_turns,
)
from ..core.messages import Message, MessageSource, TextBlock, UserMessage
from .cancellation import Aborted
from .model import Model

__all__ = ["SUMMARY_INSTRUCTIONS", "CompactionPolicy", "compact_if_due", "input_tokens"]

logger = logging.getLogger("todo_sessions.harness")

SUMMARY_INSTRUCTIONS = (
    "Summarise the conversation above for your own later use: it will be replaced by your "
    "summary. Keep what the task is, what was decided and why, what was done (files, commands, "
    "results) and what is left to do. Write plain text, no preamble."
)

Summarise = Callable[[list[Any]], Awaitable[tuple[str, dict[str, Any] | None]]]
"""``summarise(request)``: the text the model streams for ``request``, and its usage."""


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When the agent loop compacts (docs/format.md, "Compaction").

    Before a model call, the history's size (the input tokens the provider reported for the
    last request; else an estimate, its JSON length / 4) is compared with ``threshold`` times
    the context window (``context_window``, else the model's ``context_window`` attribute).
    Past it, the turns before the ``keep_turns`` latest user prompts are summarised by the
    model (``instructions`` closes the summarisation request) and replaced by the summary.
    """

    threshold: float = 0.8
    context_window: int | None = None
    keep_turns: int = 1
    instructions: str = SUMMARY_INSTRUCTIONS

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1:
            raise ValueError("threshold must be a share of the context window, in (0, 1]")
        if self.keep_turns < 1:
            raise ValueError("keep_turns must be >= 1")
        if self.context_window is not None and self.context_window < 1:
            raise ValueError("context_window must be >= 1")
        if not self.instructions.strip():
            raise ValueError("instructions must not be empty")

    def window_of(self, model: Model) -> int:
        """The context window to measure against: the policy's, else the model's."""
        window = self.context_window or getattr(model, "context_window", None)
        if type(window) is not int or window < 1:
            raise ValueError(
                "CompactionPolicy needs a context window: set context_window, or use a "
                "model with a context_window attribute"
            )
        return window


def input_tokens(usage: dict[str, Any] | None) -> int | None:
    """The input tokens a provider's usage reports (cached input counted), or None."""
    if not usage:
        return None
    total = None
    for key in (
        "inputTokens",
        "input_tokens",
        "prompt_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    ):
        value = usage.get(key)
        if type(value) is int and value >= 0:
            total = (total or 0) + value
    return total


def _request(session: Session, policy: CompactionPolicy, end: int) -> list[Message] | None:
    """The summarisation request for the span ending at seq ``end`` (None: nothing to gain,
    the span is only the last summary)."""
    surface = session.checkpoint_state().surface
    order = surface.seqs
    span = order[: order.index(end) + 1]
    if len(span) == 1 and is_summary_message(surface.node_message(span[0])):
        return None
    shown = [m for m in map(surface.node_message, span) if m is not None]
    return [
        *shown,
        UserMessage(
            id=f"{session.id}:compaction-request",
            role="user",
            content=[TextBlock(text=policy.instructions)],
            source=MessageSource(kind="compaction-request"),
        ),
    ]


async def compact_if_due(
    session: Session,
    model: Model,
    policy: CompactionPolicy,
    *,
    window: int,
    measured: int | None,
    summarise: Summarise,
) -> bool:
    """Compact ``session`` when its history passes the policy's threshold of ``window``
    (``measured``: the input tokens of the last request, else estimated). True when it was
    compacted (the measure is then stale); a failed summary is recorded, never raised."""
    tokens = measured if measured is not None else estimate_tokens(session.derive_messages())
    if tokens < policy.threshold * window:
        return False
    end = span_ending_before_turns(session.checkpoint_state().surface, policy.keep_turns)
    request = None if end is None else _request(session, policy, end)
    if end is None or request is None:
        return False
    try:
        text, usage = await summarise(request)
        if not text.strip():
            raise ValueError("the model returned no summary")
        session.compact(
            text,
            end_seq=end,
            trigger="auto",
            tokens_before=tokens,
            call_record={
                "provider": model.provider,
                "model": model.model,
                **({"usage": usage} if usage else {}),
                "rawOutput": [{"type": "text", "text": text}],
                "llmStreamCall": True,
                "instructions": policy.instructions,
            },
        )
    except (Aborted, asyncio.CancelledError):
        raise
    except Exception as exc:  # a failed summary never costs the turn or the history
        logger.warning(
            "session %r: compaction failed, the history stays as it is: %s", session.id, exc
        )
        reason = str(exc) or type(exc).__name__
        session.append_all(
            failed_compaction(
                session.checkpoint_state(), reason, trigger="auto", tokens_before=tokens
            )
        )
        return False
    return True
