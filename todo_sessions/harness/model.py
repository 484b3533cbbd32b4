"""The model interface the agent loop drives, and `ScriptedModel` for tests and the demo.

A model is anything with ``provider``, ``model`` and ``stream(messages, tools)`` yielding
deltas: `TextDelta`, `ReasoningDelta`, `ToolCallDelta` (one whole call), then one `Finish`.
A real provider client adapts its stream to these four types, which live in
`todo_sessions.harness.deltas` (re-exported here).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..core.messages import Message
from .deltas import (
    Finish,
    ModelDelta,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    content_from_deltas,
)

__all__ = [
    "Finish",
    "Model",
    "ModelDelta",
    "ReasoningDelta",
    "ScriptedModel",
    "ScriptedResponse",
    "TextDelta",
    "ToolCallDelta",
    "content_from_deltas",
]


@runtime_checkable
class Model(Protocol):
    provider: str
    model: str

    def stream(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> AsyncIterator[ModelDelta]:
        """Stream one response to ``messages`` (the derived history) with ``tools`` offered."""
        ...


@dataclass(frozen=True)
class ScriptedResponse:
    """One canned model response: optional reasoning and text, then tool calls.

    ``tool_calls`` are ``(name, arguments)`` pairs; arguments may be a dict (encoded to JSON)
    or the raw JSON string. Text is streamed in word-sized chunks.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: Sequence[tuple[str, dict[str, Any] | str]] = ()
    finish: Literal["stop", "tool-calls", "max-tokens"] | None = None
    delay: float = 0.0
    """Seconds to wait between chunks (lets tests cancel or kill mid-stream)."""


@dataclass
class ScriptedModel:
    """Replays a list of responses, one per model call. Records what it was shown."""

    responses: Sequence[ScriptedResponse]
    provider: str = "scripted"
    model: str = "scripted-1"
    calls: list[list[Message]] = field(default_factory=list)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> AsyncIterator[ModelDelta]:
        index = len(self.calls)
        self.calls.append(list(messages))
        if index >= len(self.responses):
            raise RuntimeError(f"scripted model has no response #{index + 1}")
        response = self.responses[index]
        for piece in _pieces(response.reasoning):
            await self._pause(response)
            yield ReasoningDelta(piece)
        for piece in _pieces(response.text):
            await self._pause(response)
            yield TextDelta(piece)
        for number, (name, args) in enumerate(response.tool_calls, start=1):
            await self._pause(response)
            raw = args if isinstance(args, str) else json.dumps(args)
            yield ToolCallDelta(f"call_{index + 1}_{number}", name, raw)
        finish = response.finish or ("tool-calls" if response.tool_calls else "stop")
        yield Finish(finish, {"outputTokens": len(response.text.split())})

    @staticmethod
    async def _pause(response: ScriptedResponse) -> None:
        await asyncio.sleep(response.delay)


def _pieces(text: str) -> list[str]:
    """Split text into word-sized stream chunks that join back to the original."""
    if not text:
        return []
    words = text.split(" ")
    pieces = [w + " " for w in words[:-1]] + [words[-1]]
    return [p for p in pieces if p]
