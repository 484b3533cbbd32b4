"""Anthropic Messages: request params from the derived history, deltas from responses.

See docs/providers.md.

- An assistant turn's content keeps its order: ``thinking`` / ``redacted_thinking`` (only
  reasoning stored from Anthropic, with its signature or data: ``providerData {"format":
  "anthropic", "block": {...}}``; other reasoning is dropped), ``text``, ``tool_use``.
- The results of its calls follow in one user message, one ``tool_result`` per call in call
  order (``is_error`` for error results; text and images inside), then whatever the user said
  next, in the same message (results first, as the API requires).
- Empty text blocks are left out (the API refuses them); consecutive user turns are merged.
- Tool arguments that are not a JSON object are sent as ``{"_raw_arguments": raw}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ...core.messages import ImageBlock, Message, ReasoningBlock, TextBlock, ToolCallBlock
from ...errors import ProviderResponseError
from ..deltas import Finish, ModelDelta, ReasoningDelta, TextDelta, ToolCallDelta
from ._common import (
    AssistantTurn,
    ToolDefinition,
    UserTurn,
    arguments_object,
    plan_history,
    usage_dict,
)

__all__ = [
    "FORMAT",
    "AnthropicStreamDecoder",
    "parse_response",
    "to_messages",
    "to_request",
    "to_tools",
]

FORMAT = "anthropic"

_STOP: dict[str, Literal["stop", "tool-calls", "max-tokens"]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "max-tokens",
    "model_context_window_exceeded": "max-tokens",
}


def _blocks(blocks: Sequence[TextBlock | ImageBlock]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            if block.text:
                out.append({"type": "text", "text": block.text})
        else:
            source = {"type": "base64", "media_type": block.media_type, "data": block.data}
            out.append({"type": "image", "source": source})
    return out


def _thinking(turn: AssistantTurn, block: ReasoningBlock) -> dict[str, Any] | None:
    data = turn.reasoning_data(block, FORMAT)
    stored = data.get("block") if data is not None else None
    if not isinstance(stored, dict):
        return None
    if stored.get("type") == "redacted_thinking" and isinstance(stored.get("data"), str):
        return {"type": "redacted_thinking", "data": stored["data"]}
    if stored.get("type") == "thinking" and isinstance(stored.get("signature"), str):
        return {"type": "thinking", "thinking": block.text, "signature": stored["signature"]}
    return None


def _assistant(turn: AssistantTurn) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for block in turn.message.content:
        if isinstance(block, ReasoningBlock):
            thinking = _thinking(turn, block)
            if thinking is not None:
                content.append(thinking)
        elif isinstance(block, TextBlock):
            if block.text:
                content.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolCallBlock):
            content.append(
                {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "input": arguments_object(block.arguments),
                }
            )
    return content


def _results(turn: AssistantTurn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for call in turn.calls:
        result = turn.result(call)
        inner = _blocks([b for b in result.content if isinstance(b, TextBlock | ImageBlock)])
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id}
        if inner:
            block["content"] = inner
        if result.is_error:
            block["is_error"] = True
        out.append(block)
    return out


def to_messages(
    messages: Sequence[Message], *, reasoning_from: str | None = None
) -> list[dict[str, Any]]:
    """The ``messages`` of a Messages request (module docstring for the rules;
    ``reasoning_from``: see `plan_history`)."""
    out: list[dict[str, Any]] = []

    def user(content: list[dict[str, Any]]) -> None:
        if not content:
            return
        if out and out[-1]["role"] == "user":
            out[-1]["content"] += content
        else:
            out.append({"role": "user", "content": content})

    for turn in plan_history(messages, reasoning_from):
        if isinstance(turn, UserTurn):
            user(_blocks(turn.blocks))
            continue
        content = _assistant(turn)
        if not content:
            continue  # nothing this provider can take (e.g. only another provider's reasoning)
        if out and out[-1]["role"] == "assistant":
            out[-1]["content"] += content
        else:
            out.append({"role": "assistant", "content": content})
        user(_results(turn))
    return out


def to_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "input_schema": tool.get("parameters", {"type": "object"}),
        }
        for tool in tools
    ]


def to_request(
    messages: Sequence[Message],
    *,
    model: str,
    max_tokens: int = 8192,
    system: str | None = None,
    tools: Sequence[ToolDefinition] = (),
    thinking_budget: int | None = None,
    reasoning_from: str | None = None,
    stream: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Messages request params (``client.messages.create(**params)``)."""
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": to_messages(messages, reasoning_from=reasoning_from),
    }
    if system:
        params["system"] = system
    if tools:
        params["tools"] = to_tools(tools)
    if thinking_budget:
        params["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
    if stream:
        params["stream"] = True
    if extra:
        params.update(extra)
    return params


# -- responses back to deltas ------------------------------------------------------------------


def _reasoning(block: Mapping[str, Any]) -> ReasoningDelta | None:
    if block.get("type") == "thinking":
        stored = {"type": "thinking", "signature": block.get("signature", "")}
        return ReasoningDelta(block.get("thinking", ""), {"format": FORMAT, "block": stored})
    if block.get("type") == "redacted_thinking":
        stored = {"type": "redacted_thinking", "data": block.get("data", "")}
        return ReasoningDelta("", {"format": FORMAT, "block": stored})
    return None


def _finish(reason: Any, usage: Any, saw_calls: bool) -> Finish:
    mapped = _STOP.get(reason) if isinstance(reason, str) else None
    return Finish(mapped or ("tool-calls" if saw_calls else "stop"), usage_dict(usage))


def parse_response(response: Mapping[str, Any]) -> list[ModelDelta]:
    """A whole ``Message`` (as a dict) as deltas, block by block, then the `Finish`."""
    content = response.get("content")
    if not isinstance(content, list):
        raise ProviderResponseError(FORMAT, "the response has no content list")
    deltas: list[ModelDelta] = []
    calls = False
    for block in content:
        kind = block.get("type")
        reasoning = _reasoning(block)
        if reasoning is not None:
            deltas.append(reasoning)
        elif kind == "text":
            deltas.append(TextDelta(block.get("text", "")))
        elif kind == "tool_use":
            calls = True
            deltas.append(ToolCallDelta(block["id"], block["name"], json.dumps(block["input"])))
    deltas.append(_finish(response.get("stop_reason"), response.get("usage"), calls))
    return deltas


class AnthropicStreamDecoder:
    """Turns Messages stream events (dicts with ``type``) into deltas as they arrive.

    Text and thinking go out at once; a thinking block is closed with its signature (or a
    redacted block given whole) at its ``content_block_stop``; a tool call goes out whole at
    its stop, with the streamed ``partial_json`` pieces joined as its raw arguments.
    """

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._usage: dict[str, Any] = {}
        self._stop: Any = None
        self._calls = False
        self._ended = False

    def feed(self, event: Mapping[str, Any]) -> list[ModelDelta]:
        kind = event.get("type")
        if kind == "message_start":
            self._usage.update(usage_dict((event.get("message") or {}).get("usage")) or {})
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            block.setdefault("partial", "")
            self._blocks[int(event.get("index", 0))] = block
            if block.get("type") == "text" and block.get("text"):
                return [TextDelta(block["text"])]
        elif kind == "content_block_delta":
            return self._delta(int(event.get("index", 0)), event.get("delta") or {})
        elif kind == "content_block_stop":
            return self._stop_block(int(event.get("index", 0)))
        elif kind == "message_delta":
            self._stop = (event.get("delta") or {}).get("stop_reason") or self._stop
            self._usage.update(usage_dict(event.get("usage")) or {})
        elif kind == "error":
            error = event.get("error") or {}
            raise ProviderResponseError(FORMAT, f"stream error: {error.get('message', error)}")
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[ModelDelta]:
        block = self._blocks.setdefault(index, {"type": "?", "partial": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            return [TextDelta(delta.get("text", ""))]
        if kind == "thinking_delta":
            return [ReasoningDelta(delta.get("thinking", ""))]
        if kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif kind == "input_json_delta":
            block["partial"] += delta.get("partial_json", "")
        return []

    def _stop_block(self, index: int) -> list[ModelDelta]:
        block = self._blocks.pop(index, None)
        if block is None:
            return []
        kind = block.get("type")
        if kind == "thinking":
            stored = {"type": "thinking", "signature": block.get("signature", "")}
            return [ReasoningDelta("", {"format": FORMAT, "block": stored})]
        if kind == "redacted_thinking":
            reasoning = _reasoning(block)
            return [reasoning] if reasoning is not None else []
        if kind == "tool_use":
            self._calls = True
            raw = block["partial"] or (json.dumps(block["input"]) if block.get("input") else "{}")
            return [ToolCallDelta(block["id"], block["name"], raw)]
        return []

    def end(self) -> list[ModelDelta]:
        """The `Finish` (call once the stream has ended)."""
        if self._ended:
            return []
        self._ended = True
        return [_finish(self._stop, self._usage or None, self._calls)]
