"""What the three provider formats share: pairing tool calls with their results, and helpers.

`plan_history` turns the derived history (`derive_messages`) into the shape every provider
wants: user turns and assistant turns, each assistant turn carrying the result of every tool
call it made, in call order, right after it. The log already pairs them (the loop and crash
repair answer every call), but a replaced or summarised history, a history cut at an
arbitrary seq, or a foreign log may not, so:

- a result is attached to the assistant message that made the call, wherever it appears;
- a call with no result gets an error result ("no result was recorded"), so the request is
  valid;
- a result whose call is not in the history (or a second result for one call) becomes user
  text (``[result of tool call ID] …``), so nothing the model was told is lost;
- blocks of unknown types are left out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core.messages import (
    AssistantMessage,
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

__all__ = [
    "MISSING_RESULT",
    "AssistantTurn",
    "ToolDefinition",
    "UserTurn",
    "arguments_object",
    "data_url",
    "plan_history",
    "provider_data",
]

ToolDefinition = dict[str, Any]
"""``{name, description, parameters}``, as `ToolRegistry.definitions()` gives them."""

MISSING_RESULT = "no result was recorded for this tool call; it may not have run"


@dataclass
class UserTurn:
    """User content: text and image blocks (tool results have been paired away)."""

    blocks: list[TextBlock | ImageBlock] = field(default_factory=list)


@dataclass
class AssistantTurn:
    message: AssistantMessage
    results: dict[str, ToolResultBlock] = field(default_factory=dict)
    reasoning: bool = True
    """Whether its reasoning may be sent back (see `plan_history`'s ``reasoning_from``)."""

    def reasoning_data(self, block: ContentBlock, fmt: str) -> dict[str, Any] | None:
        """A reasoning block's provider data in format ``fmt``, if it may be sent back."""
        return provider_data(block, fmt) if self.reasoning else None

    @property
    def calls(self) -> list[ToolCallBlock]:
        return [b for b in self.message.content if isinstance(b, ToolCallBlock)]

    def result(self, call: ToolCallBlock) -> ToolResultBlock:
        """The call's result, or an error result saying none was recorded."""
        found = self.results.get(call.id)
        if found is not None:
            return found
        return ToolResultBlock(
            tool_call_id=call.id, content=[TextBlock(text=MISSING_RESULT)], is_error=True
        )


Turn = UserTurn | AssistantTurn


def _orphan(block: ToolResultBlock) -> list[TextBlock | ImageBlock]:
    label = "error result" if block.is_error else "result"
    out: list[TextBlock | ImageBlock] = [
        TextBlock(text=f"[{label} of tool call {block.tool_call_id}]")
    ]
    out += [b for b in block.content if isinstance(b, TextBlock | ImageBlock)]
    return out


def plan_history(messages: Sequence[Message], reasoning_from: str | None = None) -> list[Turn]:
    """User and assistant turns, every tool call paired with one result (module docstring).

    With ``reasoning_from``, only assistant messages whose ``source.provider`` is that
    provider keep their reasoning (a format shared by several providers, such as
    ``openai-chat``, must not send one provider's reasoning fields to another).
    """
    turns: list[Turn] = []
    owner: dict[str, AssistantTurn] = {}
    for message in messages:
        if isinstance(message, AssistantMessage):
            keep = reasoning_from is None or message.source.provider == reasoning_from
            turn = AssistantTurn(message, reasoning=keep)
            turns.append(turn)
            for call in turn.calls:
                owner.setdefault(call.id, turn)
            continue
        user: list[TextBlock | ImageBlock] = []
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                made = owner.get(block.tool_call_id)
                if made is not None and block.tool_call_id not in made.results:
                    made.results[block.tool_call_id] = block
                else:
                    user += _orphan(block)
            elif isinstance(block, TextBlock | ImageBlock):
                user.append(block)
        if user:
            if turns and isinstance(turns[-1], UserTurn):
                turns[-1].blocks += user
            else:
                turns.append(UserTurn(user))
    return turns


def provider_data(block: ContentBlock, fmt: str) -> dict[str, Any] | None:
    """A reasoning block's provider data when it is in format ``fmt``, else None."""
    if not isinstance(block, ReasoningBlock) or block.provider_data is None:
        return None
    return block.provider_data if block.provider_data.get("format") == fmt else None


def arguments_object(raw: str) -> dict[str, Any]:
    """A tool call's raw JSON arguments as an object (for formats that want one).

    Arguments that are not a JSON object are kept, as ``{"_raw_arguments": raw}``, so the
    model still sees what it sent.
    """
    try:
        value = json.loads(raw)
    except ValueError:
        return {"_raw_arguments": raw}
    return value if isinstance(value, dict) else {"_raw_arguments": raw}


def data_url(block: ImageBlock) -> str:
    return f"data:{block.media_type};base64,{block.data}"


def result_text(block: ToolResultBlock) -> str:
    """The text blocks of a result, joined by newlines."""
    return "\n".join(b.text for b in block.content if isinstance(b, TextBlock))


def result_images(block: ToolResultBlock) -> list[ImageBlock]:
    return [b for b in block.content if isinstance(b, ImageBlock)]


def last_user_index(turns: Sequence[Turn]) -> int:
    """Index of the last user turn (-1 if none): where the current turn starts."""
    return max((i for i, t in enumerate(turns) if isinstance(t, UserTurn)), default=-1)


def usage_dict(usage: Any) -> dict[str, Any] | None:
    """A provider's usage object as a plain JSON dict (None when absent)."""
    if usage is None:
        return None
    if hasattr(usage, "model_dump"):
        usage = usage.model_dump(mode="json", exclude_none=True)
    if not isinstance(usage, dict):
        return None
    return {k: v for k, v in usage.items() if v is not None}
