"""``usage_update`` from the log: token usage, context window, cost. Pure: no I/O.

Providers store their own ``usage`` objects on ``assistant/message`` events (Anthropic's
``input_tokens`` / ``output_tokens`` / cache counters, OpenAI's ``prompt_tokens`` /
``completion_tokens`` / ``total_tokens``, or the camelCase ``inputTokens`` / ``outputTokens``
/ ``totalTokens`` of TypeScript harnesses). `UsageTally` adds them up exactly as
`SessionStore.usage` does (`core.meta.add_usage`), event by event, so a replay can sum
while it streams instead of reading every payload again.

- ``used``: `tokens_used` of the total: ``total_tokens`` (``totalTokens``) when the provider
  reports it, else the input, output and cache counters added up.
- ``size``: the model's context window from the latest ``request/context`` event that names
  one (``contextWindow`` or ``context_window``); 0 when the log records none (the schema
  requires the field).
- ``cost``: the summed ``cost`` (USD, as OpenRouter-style providers report it), when any
  message carried one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.envelope import SessionEvent
from ..core.meta import add_usage
from ..core.types import ASSISTANT_MESSAGE, REQUEST_CONTEXT
from . import _sdk

__all__ = ["UsageTally", "context_window", "tokens_used", "usage_update"]

_COUNTERS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "prompt_tokens",
    "completion_tokens",
    "inputTokens",
    "outputTokens",
    "cacheCreationInputTokens",
    "cacheReadInputTokens",
)
_TOTALS = ("total_tokens", "totalTokens")


def tokens_used(total: Mapping[str, int | float]) -> int:
    """The session's used tokens from a summed usage object (see the module docstring)."""
    for key in _TOTALS:
        if key in total:
            return int(total[key])
    return int(sum(total.get(key, 0) for key in _COUNTERS))


def context_window(data: Any) -> int | None:
    """The context window a ``request/context`` payload records, or None."""
    if not isinstance(data, Mapping):
        return None
    for key in ("contextWindow", "context_window"):
        value = data.get(key)
        if type(value) is int and value >= 0:
            return value
    return None


def usage_update(total: Mapping[str, int | float], size: int | None) -> _sdk.UsageUpdate:
    """A ``usage_update`` for a summed usage object and a context window (None: unknown)."""
    cost = total.get("cost")
    return _sdk.UsageUpdate(
        session_update="usage_update",
        used=max(tokens_used(total), 0),
        size=size or 0,
        cost=None if cost is None else _sdk.Cost(amount=float(cost), currency="USD"),
    )


class UsageTally:
    """Usage and context window of a session's log, fed event by event in log order."""

    __slots__ = ("size", "total")

    def __init__(
        self, total: Mapping[str, int | float] | None = None, size: int | None = None
    ) -> None:
        self.total: dict[str, int | float] = dict(total or {})
        self.size = size

    def feed(self, event: SessionEvent) -> None:
        if event.type == ASSISTANT_MESSAGE:
            if '"usage"' not in event.data_json:  # most messages of a long log: no parse
                return
            usage = json.loads(event.data_json).get("usage")
            if isinstance(usage, Mapping):
                add_usage(self.total, usage)
        elif event.type == REQUEST_CONTEXT:
            window = context_window(event.data)
            if window is not None:
                self.size = window

    def update(self) -> _sdk.UsageUpdate:
        return usage_update(self.total, self.size)
