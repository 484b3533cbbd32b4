"""The message pane: the messages the surface events of one timeline window put on the
surface (`window_messages`), in wire JSON (`messages_json`) with long texts cut
(`cut_messages`), and the full text behind a cut one (`full_text`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.envelope import SessionEvent, SurfaceReplace
from ..core.messages import Message, messages_adapter
from ..core.surface import derive_messages, fold_surface
from ..errors import InvalidEventError
from ..store.store import SessionStore
from .bounds import MESSAGE_LIMIT, TIMELINE_PAGE, closing, cut_text
from .timeline import event_row

__all__ = [
    "cut_messages",
    "full_text",
    "message_text",
    "messages_json",
    "window_messages",
    "window_surface",
]


async def window_messages(
    store: SessionStore, session_id: str, start: int, at: int
) -> tuple[list[int], list[Message]]:
    """The messages the surface events of seqs ``start..at`` put on the surface (one
    timeline window), with the seq of each: each event read once, one `stream` page."""
    window: list[SessionEvent] = []
    async with closing(store.stream(session_id, start, page_size=TIMELINE_PAGE)) as events:
        async for event in events:
            if event.seq > at or event.seq >= start + TIMELINE_PAGE:
                break
            if event.surface_op is not None:
                window.append(event)
    return window_surface(window, start)


def window_surface(window: Sequence[SessionEvent], start: int) -> tuple[list[int], list[Message]]:
    """The messages of a window's surface events (those from seq ``start`` on), in surface
    order, with the seq of each. A replacing event (a summary, a pruned result) takes the place
    of what it replaced when that lies in the window too, as the model saw it; one whose span
    begins before the window is shown as the message it is (what it replaced may be far back
    and is not looked up)."""
    by_seq = {event.seq: event for event in window}
    folded = [
        event
        if isinstance(event.surface_op, SurfaceReplace) and event.surface_op.start >= start
        else _alone(event)
        for event in window
    ]
    try:
        order: Sequence[int] = fold_surface(folded).seqs
    except InvalidEventError:  # a span the window cannot apply: each event as it came
        order = [event.seq for event in window]
    seqs: list[int] = []
    messages: list[Message] = []
    for seq in order:
        for message in derive_messages([_alone(by_seq[seq])]):
            seqs.append(seq)
            messages.append(message)
    return seqs, messages


def _alone(event: SessionEvent) -> SessionEvent:
    """``event`` as an append: its message on its own, whatever it replaced."""
    if event.surface_op == "append":
        return event
    return event.replace(surface_op="append", source_event_seqs=None)


def full_text(event: SessionEvent) -> str:
    """The full text of an event, for the "full text" link of a cut one: its message's texts
    (`message_text`) for a surface event, else what its timeline row shows, uncut."""
    if event.surface_op is not None:
        messages = derive_messages([_alone(event)])
        if messages:
            return message_text(messages[0])
    row = event_row(event, {})
    return "\n\n".join(part for part in (row.reasoning, row.text, row.detail) if part)


def message_text(message: Message) -> str:
    """Every text of a message, in order (what the "full text" link shows): texts,
    reasoning, tool call arguments, tool result texts."""
    out: list[str] = []
    for block in messages_json([message])[0].get("content", []):
        for key in ("text", "arguments"):
            if isinstance(block.get(key), str):
                out.append(block[key])
        for inner in block.get("content", []) if isinstance(block.get("content"), list) else []:
            if isinstance(inner, Mapping) and isinstance(inner.get("text"), str):
                out.append(inner["text"])
    return "\n\n".join(out)


def cut_messages(dumped: list[dict[str, Any]], limit: int = MESSAGE_LIMIT) -> bool:
    """Cut, in place, every text of wire-JSON messages longer than ``limit`` bytes; a cut block
    gets ``"cut": {"bytes": FULL_SIZE}``. Whether anything was cut."""
    cut = False

    def shorten(block: dict[str, Any], key: str) -> None:
        nonlocal cut
        value = block.get(key)
        if isinstance(value, str):
            shown, size = cut_text(value, limit)
            if size is not None:
                block[key] = shown
                block["cut"] = {"bytes": size}
                cut = True

    for message in dumped:
        for block in message.get("content", []):
            if not isinstance(block, dict):
                continue
            shorten(block, "text")
            shorten(block, "arguments")
            for inner in block.get("content", []) if isinstance(block.get("content"), list) else []:
                if isinstance(inner, dict):
                    shorten(inner, "text")
                    if "cut" in inner:
                        block.setdefault("cut", inner["cut"])
    return cut


def messages_json(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in their wire JSON (as ``todo-sessions messages --json`` prints them)."""
    dumped: list[dict[str, Any]] = messages_adapter.dump_python(
        list(messages), mode="json", by_alias=True, exclude_none=True
    )
    return dumped
