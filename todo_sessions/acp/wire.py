"""The replay's fast path: the wire JSON of `UpdateMapper.feed_wire`, built straight from the
stored JSON for the frequent kinds (message chunks, tool calls and results) without the SDK's
models. See `todo_sessions.acp.mapping`; tests check it against the models' path.

`wire_updates` builds from payloads of the shape the catalog validated on append; anything
else (another shape, a number or string the models would write otherwise, a ``present_call``
that gives a ``rawInput``) is None: the caller takes the models' path, so the JSON is the same.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson

from ..core.envelope import SessionEvent
from ..core.types import ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, USER_MESSAGE
from . import _sdk
from .shown import ClientView

__all__ = ["WIRE_KINDS", "wire_updates"]


class _Fallback(Exception):
    """The payload is not of the plain shape the fast path builds from: use the models."""


def _payload(event: SessionEvent) -> Any:
    """The event's stored JSON, decoded once (orjson: the strings the fast path copies are
    the stdlib's; a number it would change is never copied to the wire)."""
    try:
        return orjson.loads(event.data_json)
    except orjson.JSONDecodeError:
        raise _Fallback from None


def _text_or_image(block: Any) -> dict[str, Any] | None:
    """`_content` of a stored block, as wire JSON (None: shows nothing)."""
    if type(block) is not dict:
        raise _Fallback
    kind = block.get("type")
    if kind == "text" or kind == "reasoning":
        text = block.get("text")
        if type(text) is not str:
            raise _Fallback
        return {"text": text, "type": "text"} if text else None
    if kind == "image":
        media_type, data = block.get("mediaType"), block.get("data")
        if type(media_type) is not str or type(data) is not str:
            raise _Fallback
        return {"data": data, "mimeType": media_type, "type": "image"}
    if type(kind) is not str:
        raise _Fallback
    return None


def _blocks(message: Any) -> list[Any]:
    content = message.get("content") if type(message) is dict else None
    if type(content) is not list:
        raise _Fallback
    return content


def _wire_user(view: ClientView, event: SessionEvent) -> list[dict[str, Any]] | None:
    try:
        blocks = _blocks(_payload(event))
        message_id = f"seq-{event.seq}"
        return [
            {"content": content, "messageId": message_id, "sessionUpdate": "user_message_chunk"}
            for block in blocks
            if (content := _text_or_image(block)) is not None
        ]
    except _Fallback:
        return None


def _wire_assistant(view: ClientView, event: SessionEvent) -> list[dict[str, Any]] | None:
    try:
        blocks = _blocks(_payload(event).get("message"))
        shown = [(block["type"], c) for block in blocks if (c := _text_or_image(block)) is not None]
    except (_Fallback, AttributeError):
        return None
    anchor, streamed = view.end_call(event)
    base = f"seq-{event.seq if anchor is None else anchor}"
    updates: list[dict[str, Any]] = []
    for kind, content in shown:
        if kind in streamed:
            continue
        if kind == "reasoning":
            updates.append(
                {
                    "content": content,
                    "messageId": f"{base}-thought",
                    "sessionUpdate": "agent_thought_chunk",
                }
            )
        else:
            updates.append(
                {"content": content, "messageId": base, "sessionUpdate": "agent_message_chunk"}
            )
    return updates


def _wire_chunk(view: ClientView, event: SessionEvent) -> list[dict[str, Any]] | None:
    data = _payload(event)
    chunk = data.get("chunk") if type(data) is dict else None
    anchor = view.chunk(event.seq, None)
    if type(chunk) is not dict or type(chunk.get("text")) is not str or not chunk["text"]:
        return []
    message_id = f"seq-{anchor}"
    content = {"text": chunk["text"], "type": "text"}
    kind = chunk.get("type")
    if kind == "text-delta":
        view.streamed.add("text")
        return [
            {"content": content, "messageId": message_id, "sessionUpdate": "agent_message_chunk"}
        ]
    if kind == "reasoning-delta":
        view.streamed.add("reasoning")
        thought = f"{message_id}-thought"
        return [{"content": content, "messageId": thought, "sessionUpdate": "agent_thought_chunk"}]
    return []


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _no_constants(name: str) -> Any:
    raise ValueError(name)  # NaN and Infinity: the models serialise them differently


def _finite(text: str) -> float:
    value = float(text)
    if value - value != 0.0:  # 1e999 parses to inf: the models' path
        raise ValueError(text)
    return value


_ARGUMENTS = json.JSONDecoder(parse_constant=_no_constants, parse_float=_finite)
"""Tool arguments as `_parse_arguments` reads them, refusing what the models write otherwise."""


def _wire_call(view: ClientView, event: SessionEvent) -> list[dict[str, Any]] | None:
    data = _payload(event)
    if type(data) is not dict:
        return None
    call_id, name, arguments = data.get("callId"), data.get("name"), data.get("arguments")
    if type(call_id) is not str or type(name) is not str or type(arguments) is not str:
        return None
    if not call_id or not name:
        return None
    if _SURROGATE.search(arguments):
        return None  # a lone surrogate maybe: the models' path
    try:
        parsed = _ARGUMENTS.decode(arguments)
    except ValueError:
        return None  # not JSON (passed raw) or with NaN: the models' path
    present = view.present_call
    shown = (present(name, parsed) if present else None) or {}
    title, kind = shown.get("title") or name, shown.get("kind")
    if shown.get("raw_input") is not None or type(title) is not str:
        return None  # what the tool presents is serialised by the models
    view.calls.add(call_id)
    update: dict[str, Any] = {
        "toolCallId": call_id,
        "title": title,
        "kind": kind if kind in _sdk.TOOL_KINDS else "other",
        "status": "in_progress",
    }
    if parsed is not None:
        update["rawInput"] = parsed
    update["sessionUpdate"] = "tool_call"
    return [update]


def _wire_result(view: ClientView, event: SessionEvent) -> list[dict[str, Any]] | None:
    if event.surface_op is not None and event.surface_op != "append":
        return None  # a rewritten result: what it shows is the models' path's to say
    try:
        data = _payload(event)
        message = data["message"]
        source_call = message["source"]["callId"]
        block = _blocks(message)[0]
        if type(block) is not dict or block.get("type") != "tool-result":
            return None
        call_id, is_error = block["toolCallId"], block.get("isError")
        if type(source_call) is not str or type(call_id) is not str or not call_id:
            return None
        if is_error is not None and type(is_error) is not bool:
            return None
        contents = [c for inner in _blocks(block) if (c := _text_or_image(inner)) is not None]
    except (_Fallback, KeyError, TypeError, IndexError):
        return None
    if source_call not in view.calls:
        return []  # the client never saw this call start: nothing to update
    failed = bool(is_error) or data.get("error") is not None
    update: dict[str, Any] = {
        "toolCallId": call_id,
        "status": "failed" if failed else "completed",
    }
    if contents:
        update["content"] = [{"content": c, "type": "content"} for c in contents]
    update["sessionUpdate"] = "tool_call_update"
    return [update]


_WIRE: dict[str, Callable[[ClientView, SessionEvent], list[dict[str, Any]] | None]] = {
    USER_MESSAGE: _wire_user,
    ASSISTANT_MESSAGE: _wire_assistant,
    ASSISTANT_CHUNK: _wire_chunk,
    TOOL_CALL: _wire_call,
    TOOL_RESULT: _wire_result,
}


WIRE_KINDS = frozenset(_WIRE)
"""The event types `wire_updates` builds."""


def wire_updates(view: ClientView, event: SessionEvent) -> list[dict[str, Any]] | None:
    """The updates of an event of `WIRE_KINDS` as wire JSON, ``view`` updated as the models'
    path updates it; None: not of the plain shape, take the models' path (``view`` untouched)."""
    build = _WIRE.get(event.type)
    if build is None:
        return None
    try:
        return build(view, event)
    except _Fallback:
        return None
