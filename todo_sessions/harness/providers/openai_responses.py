"""OpenAI Responses: ``input`` items from the derived history, deltas from responses.

See docs/providers.md. Made for stateless use (``store: false``): the whole history is sent
each time, and reasoning goes back as the encrypted items the API returned (ask for them with
``include: ["reasoning.encrypted_content"]``, which `to_request` does when ``reasoning`` is
set).

- An assistant turn becomes, in its order: ``reasoning`` items (only reasoning stored from
  this format: ``providerData {"format": "openai-responses", "item": {...}}``, the item as the
  API returned it), an assistant ``message`` for its text, a ``function_call`` per call;
  then one ``function_call_output`` per call in call order. A result with images is sent as
  a list of ``input_text`` / ``input_image`` parts. There is no error flag: the result's text
  says what went wrong.
- A reasoning item's summary parts are joined with a blank line into the block's text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ...core.messages import ImageBlock, Message, ReasoningBlock, TextBlock, ToolCallBlock
from ...errors import ProviderResponseError
from ..deltas import Finish, ModelDelta, ReasoningDelta, TextDelta, ToolCallDelta
from ._common import (
    AssistantTurn,
    ToolDefinition,
    UserTurn,
    data_url,
    plan_history,
    result_images,
    result_text,
    usage_dict,
)

__all__ = [
    "FORMAT",
    "ResponsesStreamDecoder",
    "parse_response",
    "to_input",
    "to_request",
    "to_tools",
]

FORMAT = "openai-responses"
_REASONING_KEYS = ("type", "id", "summary", "encrypted_content", "content")
_SUMMARY_JOIN = "\n\n"


def _parts(blocks: Sequence[TextBlock | ImageBlock]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append({"type": "input_text", "text": block.text})
        else:
            parts.append({"type": "input_image", "image_url": data_url(block), "detail": "auto"})
    return parts


def _reasoning_item(turn: AssistantTurn, block: ReasoningBlock) -> dict[str, Any] | None:
    data = turn.reasoning_data(block, FORMAT)
    item = data.get("item") if data is not None else None
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        return None
    out = {k: item[k] for k in _REASONING_KEYS if k in item and item[k] is not None}
    out["type"] = "reasoning"
    out.setdefault("summary", [])
    return out


def _assistant(turn: AssistantTurn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    text: list[str] = []

    def flush_text() -> None:
        if text:
            items.append({"type": "message", "role": "assistant", "content": "".join(text)})
            text.clear()

    for block in turn.message.content:
        if isinstance(block, TextBlock):
            if block.text:
                text.append(block.text)
            continue
        flush_text()
        if isinstance(block, ReasoningBlock):
            item = _reasoning_item(turn, block)
            if item is not None:
                items.append(item)
        elif isinstance(block, ToolCallBlock):
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.id,
                    "name": block.name,
                    "arguments": block.arguments,
                }
            )
    flush_text()
    for call in turn.calls:
        result = turn.result(call)
        output: str | list[dict[str, Any]] = result_text(result)
        if result_images(result):
            output = _parts([b for b in result.content if isinstance(b, TextBlock | ImageBlock)])
        items.append({"type": "function_call_output", "call_id": call.id, "output": output})
    return items


def to_input(
    messages: Sequence[Message], *, reasoning_from: str | None = None
) -> list[dict[str, Any]]:
    """The ``input`` items of a Responses request (module docstring for the rules;
    ``reasoning_from``: see `plan_history`)."""
    items: list[dict[str, Any]] = []
    for turn in plan_history(messages, reasoning_from):
        if isinstance(turn, UserTurn):
            items.append({"type": "message", "role": "user", "content": _parts(turn.blocks)})
        else:
            items += _assistant(turn)
    return items


def to_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": tool["name"],
            "description": tool.get("description", ""),
            "parameters": tool.get("parameters", {"type": "object"}),
            "strict": False,
        }
        for tool in tools
    ]


def to_request(
    messages: Sequence[Message],
    *,
    model: str,
    system: str | None = None,
    tools: Sequence[ToolDefinition] = (),
    reasoning: Mapping[str, Any] | None = None,
    reasoning_from: str | None = None,
    stream: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Responses request params (``client.responses.create(**params)``), ``store: false``."""
    params: dict[str, Any] = {
        "model": model,
        "input": to_input(messages, reasoning_from=reasoning_from),
        "store": False,
    }
    if system:
        params["instructions"] = system
    if tools:
        params["tools"] = to_tools(tools)
    if reasoning is not None:
        params["reasoning"] = dict(reasoning)
        params["include"] = ["reasoning.encrypted_content"]
    if stream:
        params["stream"] = True
    if extra:
        params.update(extra)
    return params


# -- responses back to deltas ------------------------------------------------------------------


def _reasoning_delta(item: Mapping[str, Any], *, with_text: bool) -> ReasoningDelta:
    stored = {k: item[k] for k in _REASONING_KEYS if k in item and item[k] is not None}
    text = ""
    if with_text:
        text = _SUMMARY_JOIN.join(
            part.get("text", "") for part in item.get("summary") or [] if isinstance(part, dict)
        )
    return ReasoningDelta(text, {"format": FORMAT, "item": stored})


def _item_deltas(item: Mapping[str, Any]) -> list[ModelDelta]:
    kind = item.get("type")
    if kind == "reasoning":
        return [_reasoning_delta(item, with_text=True)]
    if kind == "message":
        return [
            TextDelta(part.get("text", ""))
            for part in item.get("content") or []
            if part.get("type") == "output_text"
        ]
    if kind == "function_call":
        return [ToolCallDelta(item["call_id"], item["name"], item.get("arguments") or "{}")]
    return []


def _finish(response: Mapping[str, Any], saw_calls: bool) -> Finish:
    reason: Literal["stop", "tool-calls", "max-tokens"] = "tool-calls" if saw_calls else "stop"
    details = response.get("incomplete_details") or {}
    if response.get("status") == "incomplete" and details.get("reason") == "max_output_tokens":
        reason = "max-tokens"
    return Finish(reason, usage_dict(response.get("usage")))


def parse_response(response: Mapping[str, Any]) -> list[ModelDelta]:
    """A whole ``Response`` (as a dict) as deltas, output item by item, then the `Finish`."""
    if response.get("status") == "failed":
        error = response.get("error") or {}
        raise ProviderResponseError(FORMAT, f"the response failed: {error.get('message', error)}")
    output = response.get("output")
    if not isinstance(output, list):
        raise ProviderResponseError(FORMAT, "the response has no output list")
    deltas: list[ModelDelta] = []
    for item in output:
        deltas += _item_deltas(item)
    calls = any(isinstance(d, ToolCallDelta) for d in deltas)
    return [*deltas, _finish(response, calls)]


class ResponsesStreamDecoder:
    """Turns Responses stream events (dicts with ``type``) into deltas as they arrive.

    Output text and reasoning summary text go out as they stream; a reasoning item is closed
    with its stored item at ``response.output_item.done``, a function call goes out whole
    there. ``response.completed`` / ``response.incomplete`` give the `Finish`.
    """

    def __init__(self) -> None:
        self._calls = False
        self._finish: Finish | None = None
        self._streamed_summary = False

    def feed(self, event: Mapping[str, Any]) -> list[ModelDelta]:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            return [TextDelta(event.get("delta", ""))]
        if kind == "response.reasoning_summary_text.delta":
            self._streamed_summary = True
            return [ReasoningDelta(event.get("delta", ""))]
        if kind == "response.reasoning_summary_part.added" and event.get("summary_index", 0) > 0:
            return [ReasoningDelta(_SUMMARY_JOIN)]
        if kind == "response.output_item.done":
            item = event.get("item") or {}
            if item.get("type") == "reasoning":
                streamed, self._streamed_summary = self._streamed_summary, False
                return [_reasoning_delta(item, with_text=not streamed)]
            if item.get("type") == "function_call":
                self._calls = True
                return _item_deltas(item)
            return []
        if kind in ("response.completed", "response.incomplete"):
            self._finish = _finish(event.get("response") or {}, self._calls)
        elif kind in ("response.failed", "error"):
            error = (event.get("response") or {}).get("error") or event
            raise ProviderResponseError(FORMAT, f"the response failed: {error.get('message')}")
        return []

    def end(self) -> list[ModelDelta]:
        """The `Finish` (call once the stream has ended)."""
        if self._finish is None:
            raise ProviderResponseError(FORMAT, "the stream ended before response.completed")
        finish, self._finish = self._finish, None
        return [finish]
