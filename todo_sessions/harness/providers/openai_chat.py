"""OpenAI Chat Completions (and compatible APIs: DeepSeek, vLLM, Ollama, OpenRouter …).

`to_request` builds the request params from the derived history, `parse_response` and
`ChatStreamDecoder` turn a response (or its stream of chunks, as plain dicts) back into the
model deltas the agent loop stores. See docs/providers.md.

- A tool message can only hold text: the images of tool results go into one user message
  after all the tool messages of that assistant turn ("Images from the result of tool call
  ID:"), never between two tool messages.
- There is no error flag on a tool message; the result's text says what went wrong.
- Reasoning: DeepSeek-style ``reasoning_content`` (or OpenRouter's ``reasoning``) is stored
  with ``providerData {"format": "openai-chat", "field": ...}``. It is sent back in the same
  field on the assistant messages of the current turn (after the last user message: what
  DeepSeek's thinking mode wants during tool calls, and which it ignores or refuses for
  earlier turns); ``reasoning="all"`` or ``"none"`` changes that. Other reasoning is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ...core.messages import ImageBlock, Message, ReasoningBlock, TextBlock
from ...errors import ProviderResponseError
from ..deltas import Finish, ModelDelta, ReasoningDelta, TextDelta, ToolCallDelta
from ._common import (
    AssistantTurn,
    ToolDefinition,
    UserTurn,
    data_url,
    last_user_index,
    plan_history,
    result_images,
    result_text,
    usage_dict,
)

__all__ = [
    "FORMAT",
    "ChatStreamDecoder",
    "parse_response",
    "to_messages",
    "to_request",
    "to_tools",
]

FORMAT = "openai-chat"
ReasoningPolicy = Literal["current-turn", "all", "none"]
_REASONING_FIELDS = ("reasoning_content", "reasoning")

_FINISH: dict[str, Literal["stop", "tool-calls", "max-tokens"]] = {
    "stop": "stop",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "length": "max-tokens",
}


def _user_content(blocks: Sequence[TextBlock | ImageBlock]) -> str | list[dict[str, Any]]:
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return blocks[0].text
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        else:
            parts.append({"type": "image_url", "image_url": {"url": data_url(block)}})
    return parts


def _assistant(turn: AssistantTurn, send_reasoning: bool) -> dict[str, Any] | None:
    texts = [b.text for b in turn.message.content if isinstance(b, TextBlock)]
    calls = turn.calls
    message: dict[str, Any] = {"role": "assistant"}
    if texts:
        message["content"] = "".join(texts)
    if calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ]
    if send_reasoning:
        for block in turn.message.content:
            data = turn.reasoning_data(block, FORMAT)
            if data is not None and isinstance(block, ReasoningBlock):
                field = data.get("field") if data.get("field") in _REASONING_FIELDS else None
                key = field or "reasoning_content"
                message[key] = message.get(key, "") + block.text
    if len(message) == 1:
        return None  # nothing this provider can take (e.g. only another provider's reasoning)
    if "content" not in message and "tool_calls" not in message:
        message["content"] = ""
    return message


def _results(turn: AssistantTurn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for call in turn.calls:
        result = turn.result(call)
        pictures = result_images(result)
        text = result_text(result)
        if pictures and not text:
            text = f"[{len(pictures)} image(s), in the next user message]"
        out.append({"role": "tool", "tool_call_id": call.id, "content": text})
        if pictures:
            images.append(
                {"type": "text", "text": f"Images from the result of tool call {call.id}:"}
            )
            images += [{"type": "image_url", "image_url": {"url": data_url(p)}} for p in pictures]
    if images:
        out.append({"role": "user", "content": images})
    return out


def to_messages(
    messages: Sequence[Message],
    *,
    system: str | None = None,
    system_role: Literal["system", "developer"] = "system",
    reasoning: ReasoningPolicy = "current-turn",
    reasoning_from: str | None = None,
) -> list[dict[str, Any]]:
    """The ``messages`` of a Chat Completions request (module docstring for the rules;
    ``reasoning_from``: see `plan_history`)."""
    turns = plan_history(messages, reasoning_from)
    current = last_user_index(turns)
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": system_role, "content": system})
    for index, turn in enumerate(turns):
        if isinstance(turn, UserTurn):
            out.append({"role": "user", "content": _user_content(turn.blocks)})
            continue
        send = reasoning == "all" or (reasoning == "current-turn" and index > current)
        assistant = _assistant(turn, send)
        if assistant is not None:
            out.append(assistant)
            out += _results(turn)
    return out


def to_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "parameters": tool.get("parameters", {"type": "object"}),
            },
        }
        for tool in tools
    ]


def to_request(
    messages: Sequence[Message],
    *,
    model: str,
    system: str | None = None,
    tools: Sequence[ToolDefinition] = (),
    system_role: Literal["system", "developer"] = "system",
    reasoning: ReasoningPolicy = "current-turn",
    reasoning_from: str | None = None,
    stream: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Chat Completions request params (``client.chat.completions.create(**params)``)."""
    params: dict[str, Any] = {
        "model": model,
        "messages": to_messages(
            messages,
            system=system,
            system_role=system_role,
            reasoning=reasoning,
            reasoning_from=reasoning_from,
        ),
    }
    if tools:
        params["tools"] = to_tools(tools)
    if stream:
        params["stream"] = True
        params["stream_options"] = {"include_usage": True}
    if extra:
        params.update(extra)
    return params


# -- responses back to deltas ------------------------------------------------------------------


def _reasoning_field(holder: Mapping[str, Any]) -> tuple[str, str] | None:
    for name in _REASONING_FIELDS:
        value = holder.get(name)
        if isinstance(value, str) and value:
            return name, value
    return None


def _finish(reason: Any, usage: Any, saw_calls: bool) -> Finish:
    mapped = _FINISH.get(reason) if isinstance(reason, str) else None
    if mapped is None:
        mapped = "tool-calls" if saw_calls else "stop"
    return Finish(mapped, usage_dict(usage))


def parse_response(response: Mapping[str, Any]) -> list[ModelDelta]:
    """A whole ``ChatCompletion`` (as a dict) as deltas: reasoning, text, tool calls, finish."""
    choices = response.get("choices") or []
    if not choices:
        raise ProviderResponseError(FORMAT, "the response has no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    deltas: list[ModelDelta] = []
    found = _reasoning_field(message)
    if found is not None:
        deltas.append(ReasoningDelta(found[1], {"format": FORMAT, "field": found[0]}))
    if isinstance(message.get("content"), str) and message["content"]:
        deltas.append(TextDelta(message["content"]))
    calls = message.get("tool_calls") or []
    for call in calls:
        function = call.get("function") or {}
        deltas.append(
            ToolCallDelta(call["id"], function.get("name", ""), function.get("arguments") or "{}")
        )
    deltas.append(_finish(choice.get("finish_reason"), response.get("usage"), bool(calls)))
    return deltas


class ChatStreamDecoder:
    """Turns streamed ``chat.completion.chunk`` dicts into deltas as they arrive.

    Text and reasoning go out at once; a tool call when the stream ends (its arguments
    arrive in pieces); the reasoning block is closed (``providerData``) when the first text or
    tool call follows it. ``end()`` gives the rest and the `Finish`.
    """

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, str]] = {}
        self._reasoning: str | None = None
        self._finish_reason: Any = None
        self._usage: Any = None
        self._ended = False

    def _close_reasoning(self) -> list[ModelDelta]:
        if self._reasoning is None:
            return []
        field, self._reasoning = self._reasoning, None
        return [ReasoningDelta("", {"format": FORMAT, "field": field})]

    def feed(self, chunk: Mapping[str, Any]) -> list[ModelDelta]:
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        out: list[ModelDelta] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            found = _reasoning_field(delta)
            if found is not None:
                self._reasoning = found[0]
                out.append(ReasoningDelta(found[1]))
            content = delta.get("content")
            if isinstance(content, str) and content:
                out += self._close_reasoning()
                out.append(TextDelta(content))
            for call in delta.get("tool_calls") or []:
                out += self._close_reasoning()
                slot = self._calls.setdefault(
                    int(call.get("index", len(self._calls))),
                    {"id": "", "name": "", "arguments": ""},
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                if function.get("name"):
                    slot["name"] += function["name"]
                if function.get("arguments"):
                    slot["arguments"] += function["arguments"]
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
        return out

    def end(self) -> list[ModelDelta]:
        """The deltas left when the stream ends: the tool calls, then the `Finish`."""
        if self._ended:
            return []
        self._ended = True
        out = self._close_reasoning()
        for index in sorted(self._calls):
            slot = self._calls[index]
            if not slot["id"] or not slot["name"]:
                raise ProviderResponseError(
                    FORMAT, f"streamed tool call #{index} has no id or name"
                )
            out.append(ToolCallDelta(slot["id"], slot["name"], slot["arguments"] or "{}"))
        out.append(_finish(self._finish_reason, self._usage, bool(self._calls)))
        return out


def response_from_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A minimal ``ChatCompletion`` dict around an assistant message (for tests and tools)."""
    reason = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": 0,
        "model": "local",
        "choices": [{"index": 0, "message": dict(message), "finish_reason": reason}],
    }
