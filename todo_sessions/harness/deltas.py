"""The values a model stream yields: `TextDelta`, `ReasoningDelta`, `ToolCallDelta` (one whole
call), then one `Finish`; `ModelDelta` is their union.

They sit in the core, under both the agent loop (which consumes them) and the provider formats
(whose stream decoders produce them), so neither imports the other for them. Pure values, no
I/O. `todo_sessions` and `todo_sessions.harness.model` re-export them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "Finish",
    "ModelDelta",
    "ReasoningDelta",
    "TextDelta",
    "ToolCallDelta",
    "content_from_deltas",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of reasoning text. ``provider_data`` (``{"format": ..., ...}``, see
    docs/providers.md) closes the reasoning block being streamed and is stored on it: an
    Anthropic thinking signature, a redacted thinking block (empty text), an OpenAI encrypted
    reasoning item. Without it, consecutive reasoning deltas make one block."""

    text: str
    provider_data: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """One complete tool call; ``arguments`` is the raw JSON text the model produced."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Finish:
    reason: Literal["stop", "tool-calls", "max-tokens"] = "stop"
    usage: dict[str, Any] | None = None


ModelDelta = TextDelta | ReasoningDelta | ToolCallDelta | Finish


def content_from_deltas(
    deltas: Iterable[ModelDelta], *, with_calls: bool = True
) -> list[dict[str, Any]]:
    """The assistant message content (wire dicts) a stream of deltas makes, in stream order.

    Consecutive text deltas make one text block; consecutive reasoning deltas one reasoning
    block, closed by a delta with ``provider_data`` (stored as the block's ``providerData``);
    each tool call one tool-call block (left out when ``with_calls`` is false: an interrupted
    message keeps what was said, not the half-requested tools).
    """
    content: list[dict[str, Any]] = []
    open_kind: str | None = None
    for delta in deltas:
        if isinstance(delta, TextDelta):
            if open_kind == "text":
                content[-1]["text"] += delta.text
            else:
                content.append({"type": "text", "text": delta.text})
                open_kind = "text"
        elif isinstance(delta, ReasoningDelta):
            if open_kind == "reasoning":
                content[-1]["text"] += delta.text
            else:
                content.append({"type": "reasoning", "text": delta.text})
                open_kind = "reasoning"
            if delta.provider_data is not None:
                content[-1]["providerData"] = delta.provider_data
                open_kind = None
        elif isinstance(delta, ToolCallDelta):
            open_kind = None
            if with_calls:
                content.append(
                    {
                        "type": "tool-call",
                        "id": delta.id,
                        "name": delta.name,
                        "arguments": delta.arguments,
                    }
                )
    return content
