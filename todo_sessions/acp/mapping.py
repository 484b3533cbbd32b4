"""Session events as ACP ``session/update`` notifications. Pure: no I/O, no asyncio.

See docs/design.md, "ACP bridge".

- `todos_to_plan`: a todo list as a ``plan`` update (the client replaces its whole plan).
- `event_to_updates`: the updates one event shows a client, live or on replay.
- `UpdateMapper`: the updates of a log fed event by event; the agent's live stream and
  `replay_updates` both use it, so live and replay of the same events are the same updates.
- `replay_updates`: the updates of a whole log, in log order (``session/load``).
- `update_to_wire`: an update as the JSON the SDK sends inside ``session/update`` params.
- `UpdateMapper.feed_wire`: the same updates as `update_to_wire` gives, built straight from
  the stored JSON for the frequent kinds (message chunks, tool calls and results) without the
  SDK's models (`todo_sessions.acp.wire`); what ``session/load`` replays with (tests check it
  against the models).

Message chunks carry a ``messageId`` derived from the log (``seq-<N>`` for user and agent
text, ``seq-<N>-thought`` for reasoning). ``N`` is the event's seq for a user message and for
an assistant message that was not streamed; a streamed model call (``assistant/chunk`` events
cited by its ``assistant/message``) uses the seq of its first chunk, known as soon as the first
delta arrives. Streamed text is sent delta by delta, live and on replay alike, and the message
that cites the chunks sends no text again.

A ``tool_call_update`` is only ever sent for a call the client was shown (its ``tool/call``
event came first): the result of a call that never started (an aborted or repaired turn's
"not run" closer) shows nothing, live and on replay.

Replay shows what the log holds, in log order: a surface event that a later ``replace``
removed from the model's view is still replayed, and so is the replacing event (for example
a compaction summary appears as a user message after the messages it summarises). The client
sees the conversation as it happened; `derive_messages` is what the model sees. A pruned
``tool/result`` (a content rewrite) sends nothing: the client keeps the output it was shown.
The ``compaction/*`` records send nothing here (`todo_sessions.acp.presenter` shows them to
clients that advertise compaction), so the plan the client shows stays.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ..core.catalog import AssistantMessageData, ToolCallData, ToolResultData
from ..core.envelope import SessionEvent
from ..core.messages import (
    ContentBlock,
    ImageBlock,
    ReasoningBlock,
    TextBlock,
    ToolResultBlock,
    UserMessage,
)
from ..core.todos import TodoItem, todos_from_payload
from ..core.types import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TODO_WRITE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from ..errors import InvalidEventError
from . import _sdk
from ._sdk import SessionUpdate
from .shown import ClientView, PresentCall
from .wire import WIRE_KINDS, wire_updates

__all__ = [
    "PresentCall",
    "SessionUpdate",
    "UpdateMapper",
    "chunk_to_updates",
    "event_to_updates",
    "replay_updates",
    "todos_to_plan",
    "update_to_wire",
]


def todos_to_plan(todos: Sequence[TodoItem]) -> _sdk.PlanUpdate:
    """A ``plan`` update: one entry per todo in list order, status 1:1, priority ``medium``.

    ``[]`` gives an empty plan, which clears the client's plan.
    """
    entries = [
        _sdk.PlanEntry(content=item.content, status=item.status, priority="medium")
        for item in todos
    ]
    return _sdk.PlanUpdate(session_update="plan", entries=entries)


def update_to_wire(update: SessionUpdate | dict[str, Any]) -> dict[str, Any]:
    """The update as JSON, exactly as the SDK sends it in ``session/update`` (``params.update``);
    wire JSON already (the kinds the pinned SDK has no model of) is returned as it is."""
    return update if isinstance(update, dict) else _sdk.wire_dump(update)


def _content(block: ContentBlock) -> _sdk.ContentBlock | None:
    """An ACP content block for a text or image block (empty text gives nothing)."""
    if isinstance(block, TextBlock | ReasoningBlock):
        return _sdk.TextContent(type="text", text=block.text) if block.text else None
    if isinstance(block, ImageBlock):
        return _sdk.ImageContent(type="image", data=block.data, mime_type=block.media_type)
    return None


def _user_updates(event: SessionEvent, message: UserMessage) -> list[SessionUpdate]:
    message_id = f"seq-{event.seq}"
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


def _assistant_updates(
    event: SessionEvent,
    data: AssistantMessageData,
    *,
    anchor: int | None = None,
    skip: frozenset[str] = frozenset(),
) -> list[SessionUpdate]:
    """Chunks of an assistant message's blocks, ids from seq ``anchor`` (default: its own);
    blocks of the kinds in ``skip`` (``text``, ``reasoning``) were streamed already."""
    base = f"seq-{event.seq if anchor is None else anchor}"
    updates: list[SessionUpdate] = []
    for block in data.message.content:
        content = _content(block)
        if content is None or block.type in skip:
            continue
        if isinstance(block, ReasoningBlock):
            updates.append(
                _sdk.AgentThoughtChunk(
                    session_update="agent_thought_chunk",
                    content=content,
                    message_id=f"{base}-thought",
                )
            )
        else:
            updates.append(
                _sdk.AgentMessageChunk(
                    session_update="agent_message_chunk", content=content, message_id=base
                )
            )
    return updates


def chunk_to_updates(event: SessionEvent, anchor: int | None = None) -> list[SessionUpdate]:
    """An ``assistant/chunk`` text or reasoning delta as a message chunk.

    Chunks of one model call share the message id ``seq-<anchor>``, the seq of the call's
    first chunk (default: this chunk's own seq); `UpdateMapper` tracks the anchor.
    """
    if event.type != ASSISTANT_CHUNK:
        return []
    chunk = event.data.get("chunk")
    if not isinstance(chunk, dict) or not isinstance(chunk.get("text"), str) or not chunk["text"]:
        return []
    message_id = f"seq-{event.seq if anchor is None else anchor}"
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
    USER_MESSAGE: UserMessage,
    ASSISTANT_MESSAGE: AssistantMessageData,
    TOOL_CALL: ToolCallData,
    TOOL_RESULT: ToolResultData,
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
    if event.type == TODO_WRITE:
        return [todos_to_plan(todos_from_payload(event.data, seq=event.seq))]
    return []


def _parse(event: SessionEvent) -> BaseModel | None:
    """The typed payload of an event type the mapping reads, else None."""
    model = _PAYLOADS.get(event.type)
    if model is None:
        return None
    try:  # from the stored JSON text: parsed in pydantic's core, no Python copy of the payload
        return model.model_validate_json(event.data_json)
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


_BOUNDARIES = frozenset((STEP_START, STEP_END, TURN_START, TURN_END))
"""Where a streamed model call that no message cited ends."""


class UpdateMapper:
    """The updates of one session's log, fed event by event in log order.

    Keeps what the client was shown so far: the tool calls it saw start, and the first chunk
    of the model call being streamed. The agent feeds its live events through one (primed with
    the stored log when it resumes a session) and `replay_updates` feeds a whole log through a
    fresh one, so both send the same updates for the same events.
    """

    __slots__ = ("_view",)

    def __init__(self, *, present_call: PresentCall | None = None) -> None:
        self._view = ClientView(present_call)

    def shown(self, call_id: str) -> bool:
        """Whether the client was shown a ``tool_call`` for ``call_id``."""
        return call_id in self._view.calls

    def feed(self, event: SessionEvent) -> list[SessionUpdate]:
        """The updates ``event`` shows the client (often none)."""
        view = self._view
        if event.type == ASSISTANT_CHUNK:
            updates = chunk_to_updates(event, view.chunk(event.seq, None))
            for update in updates:
                kind = "reasoning" if update.session_update == "agent_thought_chunk" else "text"
                view.chunk(event.seq, kind)
            return updates
        payload = _parse(event)
        if isinstance(payload, AssistantMessageData):
            anchor, streamed = view.end_call(event)
            return _assistant_updates(event, payload, anchor=anchor, skip=streamed)
        if event.type in _BOUNDARIES:
            view.forget_call()
            return []
        if isinstance(payload, ToolCallData):
            view.calls.add(payload.call_id)
        elif isinstance(payload, ToolResultData) and not self.shown(payload.message.source.call_id):
            return []  # the client never saw this call start: nothing to update
        elif isinstance(payload, ToolResultData) and event.surface_op not in (None, "append"):
            return []  # a pruned result: the client keeps the output it was shown
        return _updates(event, payload, view.present_call)

    def feed_wire(self, event: SessionEvent) -> list[dict[str, Any]]:
        """``[update_to_wire(u) for u in self.feed(event)]``, built without the SDK's models.

        For the kinds a replay is made of (``user/message``, ``assistant/message``,
        ``assistant/chunk``, ``tool/call``, ``tool/result``) the wire dicts are built from the
        event's JSON text in one decode, for payloads of the shape the catalog validated on
        append; anything else (other kinds, a payload of another shape, a ``present_call``
        that gives a ``rawInput``) takes `feed` and the SDK's models, so the JSON is the same.
        """
        kind = event.type
        if kind in WIRE_KINDS:
            wire = wire_updates(self._view, event)
            if wire is not None:
                return wire
        elif kind in _BOUNDARIES:
            self._view.forget_call()  # as `feed` does
            return []
        elif kind != TODO_WRITE:
            return []  # `feed` shows nothing of any other kind
        return [update_to_wire(update) for update in self.feed(event)]


def replay_updates(
    events: Iterable[SessionEvent], *, present_call: PresentCall | None = None
) -> list[SessionUpdate]:
    """The updates of a whole log in log order, through a fresh `UpdateMapper`.

    The same updates a live client was sent for these events (see the module docstring):
    streamed text delta by delta, a result only for a call that was shown. Replaced surface
    events are replayed too.
    """
    mapper = UpdateMapper(present_call=present_call)
    return [update for event in events for update in mapper.feed(event)]
