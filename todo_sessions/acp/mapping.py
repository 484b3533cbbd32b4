"""Session events as ACP ``session/update`` notifications. Pure: no I/O, no asyncio.

See docs/design.md, "ACP bridge".

- `todos_to_plan`: a todo list as a ``plan`` update (the client replaces its whole plan).
- `event_to_updates`: the updates one event shows a client, live or on replay.
- `replay_updates`: the updates of a whole log, in log order (``session/load``).
- `update_to_wire`: an update as the JSON the SDK sends inside ``session/update`` params.

Message chunks carry a ``messageId`` derived from the event's seq (``seq-<N>`` for user and
agent text, ``seq-<N>-thought`` for reasoning), so a replay and the live stream of the same
event agree and every log message is one client message.

Replay shows what the log holds, in log order: a surface event that a later ``replace``
removed from the model's view is still replayed, and so is the replacing event (for example
a compaction summary appears as a user message after the messages it summarises). The client
sees the conversation as it happened; `derive_messages` is what the model sees.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ..core.catalog import AssistantMessageData, ToolCallData, ToolResultData
from ..core.envelope import SessionEvent
from ..core.messages import (
    ContentBlock,
    ImageBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMessage,
)
from ..core.todos import TodoItem, todos_from_payload
from ..errors import InvalidEventError
from . import _sdk
from ._sdk import SessionUpdate

__all__ = [
    "PresentCall",
    "SessionUpdate",
    "chunk_to_updates",
    "event_to_updates",
    "replay_updates",
    "todos_to_plan",
    "update_to_wire",
]

PresentCall = Callable[[str, Any], Mapping[str, Any] | None]
"""``present_call(tool_name, parsed_arguments)``: ``{title, kind, raw_input}`` or ``None``.

Any key that is missing or ``None`` falls back to the default (tool name, ``"other"``, the
parsed arguments); a ``kind`` the SDK does not know becomes ``"other"``.
"""


def todos_to_plan(todos: Sequence[TodoItem]) -> _sdk.PlanUpdate:
    """A ``plan`` update: one entry per todo in list order, status 1:1, priority ``medium``.

    ``[]`` gives an empty plan, which clears the client's plan.
    """
    entries = [
        _sdk.PlanEntry(content=item.content, status=item.status, priority="medium")
        for item in todos
    ]
    return _sdk.PlanUpdate(session_update="plan", entries=entries)


def update_to_wire(update: SessionUpdate) -> dict[str, Any]:
    """The update as JSON, exactly as the SDK sends it in ``session/update`` (``params.update``)."""
    return _sdk.wire_dump(update)


def _content(block: ContentBlock) -> _sdk.ContentBlock | None:
    """An ACP content block for a text or image block (empty text gives nothing)."""
    if isinstance(block, TextBlock | ReasoningBlock):
        return _sdk.TextContent(type="text", text=block.text) if block.text else None
    if isinstance(block, ImageBlock):
        return _sdk.ImageContent(type="image", data=block.data, mime_type=block.media_type)
    return None


def _message_id(event: SessionEvent, suffix: str = "") -> str:
    return f"seq-{event.seq}{suffix}"


def _user_updates(event: SessionEvent, message: UserMessage) -> list[SessionUpdate]:
    message_id = _message_id(event)
    updates: list[SessionUpdate] = []
    for block in message.content:
        content = _content(block)
        if content is not None:
            updates.append(
                _sdk.UserMessageChunk(
                    session_update="user_message_chunk", content=content, message_id=message_id
                )
            )
    return updates


def _assistant_updates(event: SessionEvent, data: AssistantMessageData) -> list[SessionUpdate]:
    updates: list[SessionUpdate] = []
    for block in data.message.content:
        content = _content(block)
        if content is None:
            continue
        if isinstance(block, ReasoningBlock):
            updates.append(
                _sdk.AgentThoughtChunk(
                    session_update="agent_thought_chunk",
                    content=content,
                    message_id=_message_id(event, "-thought"),
                )
            )
        else:
            updates.append(
                _sdk.AgentMessageChunk(
                    session_update="agent_message_chunk",
                    content=content,
                    message_id=_message_id(event),
                )
            )
    return updates


def chunk_to_updates(event: SessionEvent) -> list[SessionUpdate]:
    """Live streaming: an ``assistant/chunk`` text or reasoning delta as a message chunk.

    Replays skip chunks (the ``assistant/message`` carries the whole text); a live sender
    forwards the deltas as they arrive and then skips the text of the streamed message.
    Chunks of one model call share the message id ``t<turn>.<step>``.
    """
    if event.type != "assistant/chunk":
        return []
    data = event.data
    chunk = data.get("chunk")
    if not isinstance(chunk, dict) or not isinstance(chunk.get("text"), str) or not chunk["text"]:
        return []
    message_id = f"t{data.get('turn')}.{data.get('step')}"
    content = _sdk.TextContent(type="text", text=chunk["text"])
    if chunk.get("type") == "text-delta":
        return [
            _sdk.AgentMessageChunk(
                session_update="agent_message_chunk", content=content, message_id=message_id
            )
        ]
    if chunk.get("type") == "reasoning-delta":
        return [
            _sdk.AgentThoughtChunk(
                session_update="agent_thought_chunk",
                content=content,
                message_id=f"{message_id}-thought",
            )
        ]
    return []


def _parse_arguments(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def _call_start(
    call_id: str,
    name: str,
    arguments: str,
    status: Literal["pending", "in_progress"],
    present_call: PresentCall | None,
) -> _sdk.ToolCallStart:
    parsed = _parse_arguments(arguments)
    shown: Mapping[str, Any] = (present_call(name, parsed) if present_call else None) or {}
    kind = shown.get("kind")
    raw_input = shown.get("raw_input")
    return _sdk.ToolCallStart(
        session_update="tool_call",
        tool_call_id=call_id,
        title=shown.get("title") or name,
        kind=kind if kind in _sdk.TOOL_KINDS else "other",
        status=status,
        raw_input=parsed if raw_input is None else raw_input,
    )


def _result_update(data: ToolResultData) -> _sdk.ToolCallProgress:
    block = data.message.content[0]
    assert isinstance(block, ToolResultBlock)  # guaranteed by ToolResultMessage's validator
    failed = bool(block.is_error) or data.error is not None
    contents = [content for inner in block.content if (content := _content(inner)) is not None]
    return _sdk.ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=block.tool_call_id,
        status="failed" if failed else "completed",
        content=[_sdk.ToolCallContent(type="content", content=c) for c in contents] or None,
    )


_PAYLOADS: dict[str, type[BaseModel]] = {
    "user/message": UserMessage,
    "assistant/message": AssistantMessageData,
    "tool/call": ToolCallData,
    "tool/result": ToolResultData,
}


def _updates(
    event: SessionEvent, payload: BaseModel | None, present_call: PresentCall | None
) -> list[SessionUpdate]:
    if isinstance(payload, UserMessage):
        return _user_updates(event, payload)
    if isinstance(payload, AssistantMessageData):
        return _assistant_updates(event, payload)
    if isinstance(payload, ToolCallData):
        start = _call_start(
            payload.call_id, payload.name, payload.arguments, "in_progress", present_call
        )
        return [start]
    if isinstance(payload, ToolResultData):
        return [_result_update(payload)]
    if event.type == "todo/write":
        return [todos_to_plan(todos_from_payload(event.data, seq=event.seq))]
    return []


def _parse(event: SessionEvent) -> BaseModel | None:
    """The typed payload of an event type the mapping reads, else None."""
    model = _PAYLOADS.get(event.type)
    if model is None:
        return None
    try:
        return model.model_validate(event.data_copy())
    except ValidationError as exc:
        raise InvalidEventError(
            f"invalid event {event.type!r} (seq {event.seq}): {exc.errors()[0]['msg']}",
            event_type=event.type,
            seq=event.seq,
            field="data",
        ) from None


def event_to_updates(
    event: SessionEvent, *, present_call: PresentCall | None = None
) -> list[SessionUpdate]:
    """The ``session/update`` payloads one event shows a client (often none).

    - ``user/message``: a ``user_message_chunk`` per text or image block.
    - ``assistant/message``: ``agent_message_chunk`` per text (or image) block,
      ``agent_thought_chunk`` per reasoning block; tool-call blocks are shown by their
      ``tool/call`` events. (``assistant/chunk`` gives nothing: the message carries the text.)
    - ``tool/call``: a ``tool_call`` (status ``in_progress``) titled by ``present_call`` when it
      returns something, else by the tool name with kind ``other`` and the parsed arguments
      (the raw string when they are not JSON) as ``rawInput``.
    - ``tool/result``: a ``tool_call_update``, ``failed`` when the result block has ``isError``
      or the payload has ``error``, else ``completed``, with the result's text as content.
    - ``todo/write``: the whole list as a ``plan`` (`todos_to_plan`).
    - anything else: nothing.

    Empty text blocks give no chunk. Raises `InvalidEventError` if the payload of one of these
    types is invalid; exceptions of ``present_call`` propagate.
    """
    return _updates(event, _parse(event), present_call)


def replay_updates(
    events: Iterable[SessionEvent], *, present_call: PresentCall | None = None
) -> list[SessionUpdate]:
    """The updates of a whole log in log order (`event_to_updates` of each event).

    Replaced surface events are replayed too (see the module docstring). One addition keeps
    the client consistent: a ``tool/result`` whose call never had a ``tool/call`` event (a
    crash-repair "not started" result) is preceded by a ``tool_call`` with status ``pending``,
    presented from the assistant's tool-call block when the log has one, so the client never
    gets an update for a tool call it was not shown.
    """
    updates: list[SessionUpdate] = []
    started: set[str] = set()
    requested: dict[str, ToolCallBlock] = {}
    for event in events:
        payload = _parse(event)
        if isinstance(payload, AssistantMessageData):
            for block in payload.message.content:
                if isinstance(block, ToolCallBlock):
                    requested.setdefault(block.id, block)
        elif isinstance(payload, ToolCallData):
            started.add(payload.call_id)
        elif isinstance(payload, ToolResultData) and payload.message.source.call_id not in started:
            call_id = payload.message.source.call_id
            started.add(call_id)
            updates.append(_unstarted_call(call_id, requested.get(call_id), present_call))
        updates.extend(_updates(event, payload, present_call))
    return updates


def _unstarted_call(
    call_id: str, asked: ToolCallBlock | None, present_call: PresentCall | None
) -> _sdk.ToolCallStart:
    """A ``pending`` tool call for a result whose call never started."""
    if asked is not None:
        return _call_start(call_id, asked.name, asked.arguments, "pending", present_call)
    return _sdk.ToolCallStart(
        session_update="tool_call",
        tool_call_id=call_id,
        title="tool call",
        kind="other",
        status="pending",
    )
