"""The timeline: one row per event (`event_row`), a page of them read as one `stream` page
(`load_timeline`), each text cut to the message limit (`cut_row`). Plain data: `render` turns
rows into escaped markup."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.envelope import SessionEvent
from ..core.types import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    SESSION_END_SEED,
    SESSION_META,
    STEP_END,
    STEP_START,
    TODO_WRITE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from ..store.store import SessionStore
from .bounds import MESSAGE_LIMIT, TIMELINE_PAGE, closing, cut_text

__all__ = ["REPAIR_CODES", "Row", "cut_row", "event_row", "load_timeline"]

REPAIR_CODES = frozenset({"TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"})
"""The error codes of the results crash repair writes (shown as repairs)."""


@dataclass
class Row:
    """One event of the timeline, ready to show."""

    seq: int
    type: str
    kind: str
    """CSS class: turn, step, user, assistant, call, result, todo, end, seed, meta, chunk,
    compaction, other."""
    label: str
    text: str = ""
    reasoning: str = ""
    detail: str = ""
    error: str = ""
    repair: bool = False
    minor: bool = False
    """Hidden unless the viewer asks for every event (chunks, step ends, request records)."""
    todos: list[dict[str, str]] = field(default_factory=list)
    subagent: dict[str, Any] | None = None
    """On a ``tool/call`` that started a subagent: ``{id}`` of its session, and once known
    (`load_timeline`) its ``title``, ``status`` and ``open`` (open todos)."""
    full_url: str = ""
    """Set when a text of the row was cut (`cut_row`): where the full text is."""


def _texts(blocks: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if not isinstance(blocks, list):
        return out
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind in ("text", "reasoning") and isinstance(block.get("text"), str):
            out.append((str(kind), block["text"]))
        elif kind == "tool-call":
            out.append(("tool-call", f"{block.get('name')}({block.get('arguments', '')})"))
        elif kind == "tool-result":
            inner = [t for k, t in _texts(block.get("content")) if k == "text"]
            out.append(("tool-result", "\n".join(inner)))
        elif kind == "image":
            out.append(("image", f"[image {block.get('mediaType', '')}]"))
        elif isinstance(kind, str):
            out.append((kind, f"[{kind} block]"))
    return out


def _short_json(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


RowMaker = Callable[[SessionEvent, Any, dict[str, str]], Row]
"""Makes the row of one event type from the event, its data and the tool names seen so far."""


def _turn_start(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    return Row(event.seq, event.type, "turn", f"turn {data.get('turn')}")


def _step_start(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    return Row(event.seq, event.type, "step", f"step {data.get('step')}")


def _step_end(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    return Row(event.seq, event.type, "step", f"end of step {data.get('step')}", minor=True)


def _user_message(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    parts = _texts(data.get("content"))
    note = "" if event.surface_op in (None, "append") else " (replaces earlier history)"
    text = "\n".join(t for _, t in parts)
    return Row(event.seq, event.type, "user", "user" + note, text=text)


def _assistant_message(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    message = data.get("message") or {}
    parts = _texts(message.get("content"))
    return Row(
        event.seq,
        event.type,
        "assistant",
        "assistant",
        text="\n".join(t for k, t in parts if k == "text"),
        reasoning="\n".join(t for k, t in parts if k == "reasoning"),
        detail="\n".join(t for k, t in parts if k == "tool-call"),
    )


def _tool_call(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    call_id = str(data.get("callId", ""))
    name = str(data.get("name", ""))
    calls[call_id] = name
    row = Row(event.seq, event.type, "call", f"→ {name}", detail=str(data.get("arguments", "")))
    child = data.get("subagentSessionId")
    if isinstance(child, str):
        row.subagent = {"id": child}
    return row


def _tool_result(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    message = data.get("message") or {}
    blocks = message.get("content") or [{}]
    block = blocks[0] if isinstance(blocks[0], Mapping) else {}
    call_id = str(block.get("toolCallId", ""))
    error = data.get("error") if isinstance(data.get("error"), Mapping) else None
    code = str(error.get("code", "")) if error else ""
    failed = bool(block.get("isError")) or error is not None
    repair = code in REPAIR_CODES or ":repair:" in str(message.get("id", ""))
    name = calls.get(call_id, call_id)
    return Row(
        event.seq,
        event.type,
        "result",
        f"← {name}" + (" failed" if failed else ""),
        text="\n".join(t for _, t in _texts([block])),
        error=code,
        repair=repair,
    )


def _todo_write(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    todos = data.get("todos") if isinstance(data.get("todos"), list) else []
    items = [
        {"content": str(t.get("content", "")), "status": str(t.get("status", ""))}
        for t in todos
        if isinstance(t, Mapping)
    ]
    return Row(event.seq, event.type, "todo", "todo list written", todos=items)


def _turn_end(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    reason = data.get("reason") or {}
    how = str(reason.get("kind", "?"))
    error = reason.get("error") or {}
    text = str(error.get("message", "")) if isinstance(error, Mapping) else ""
    label = f"turn {data.get('turn')} ended: {how}"
    return Row(event.seq, event.type, "end", label, text=text, repair=how == "interrupted")


def _end_seed(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    return Row(event.seq, event.type, "seed", "end of inherited history (fork seed)")


def _meta(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    changed = ", ".join(key for key in ("title", "tags", "metadata") if key in data)
    label = f"set {changed or 'nothing'}"
    return Row(event.seq, event.type, "meta", label, detail=_short_json(data))


def _chunk(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    chunk = data.get("chunk") or {}
    piece = chunk.get("text") or chunk.get("name") or ""
    label = f"chunk {chunk.get('type', '')}"
    return Row(event.seq, event.type, "chunk", label, text=piece, minor=True)


def _compaction(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    return _compaction_row(event)


def _other(event: SessionEvent, data: Any, calls: dict[str, str]) -> Row:
    return Row(event.seq, event.type, "other", event.type, detail=_short_json(data), minor=True)


ROW_MAKERS: dict[str, RowMaker] = {
    TURN_START: _turn_start,
    STEP_START: _step_start,
    STEP_END: _step_end,
    USER_MESSAGE: _user_message,
    ASSISTANT_MESSAGE: _assistant_message,
    TOOL_CALL: _tool_call,
    TOOL_RESULT: _tool_result,
    TODO_WRITE: _todo_write,
    TURN_END: _turn_end,
    SESSION_END_SEED: _end_seed,
    SESSION_META: _meta,
    ASSISTANT_CHUNK: _chunk,
}
"""The row of each event type with a row of its own (``compaction/*``: `_compaction_row`;
any other type: a minor row with its data as short JSON)."""


def event_row(event: SessionEvent, calls: dict[str, str]) -> Row:
    """The timeline row of one event. ``calls`` maps tool call ids to tool names, filled as
    calls are seen, so a result can name its tool."""
    maker = ROW_MAKERS.get(event.type)
    if maker is None:
        maker = _compaction if event.type.startswith("compaction/") else _other
    return maker(event, event.data, calls)


def _compaction_row(event: SessionEvent) -> Row:
    """The timeline mark of a ``compaction/*`` event (docs/format.md, "Compaction"): the
    trigger and tokens before at the start, the replaced range at the summary, the tokens
    after (or the error) at the end, the pruned result at a prune."""
    data: Any = event.data
    kind, seq = event.type, event.seq
    shadowed = data.get("shadowedRange") if isinstance(data.get("shadowedRange"), Mapping) else {}
    span = f"seqs {shadowed.get('start', '?')}..{shadowed.get('end', '?')}"
    if kind == COMPACTION_START:
        tokens = data.get("tokensBefore")
        text = f"{tokens} tokens before" if tokens is not None else ""
        return Row(seq, kind, "compaction", f"compaction ({data.get('trigger') or '?'})", text=text)
    if kind == COMPACTION_SUMMARY:
        count = len(data.get("shadowedSeqs") or ())
        summary = "\n".join(t for _, t in _texts(data.get("summary")))
        return Row(
            seq, kind, "compaction", f"compaction: {span} replaced ({count} messages)", text=summary
        )
    if kind == COMPACTION_END:
        if data.get("error"):
            return Row(seq, kind, "compaction", "compaction failed", text=str(data["error"]))
        tokens = data.get("tokensAfter")
        text = f"{tokens} tokens after" if tokens is not None else ""
        return Row(seq, kind, "compaction", "compaction done", text=text)
    if kind == COMPACTION_PRUNE:
        return Row(seq, kind, "compaction", f"tool result {shadowed.get('start', '?')} pruned")
    return Row(seq, kind, "other", kind, detail=_short_json(data), minor=True)


def cut_row(row: Row, full_url: str, limit: int = MESSAGE_LIMIT) -> Row:
    """``row`` with each text longer than ``limit`` bytes cut; ``full_url`` is kept on the
    row when anything was."""
    for name in ("text", "reasoning", "detail"):
        shown, size = cut_text(getattr(row, name), limit)
        if size is not None:
            setattr(row, name, shown + f"\n… (cut: {size} bytes in all)")
            row.full_url = full_url
    return row


async def load_timeline(
    store: SessionStore,
    session_id: str,
    start: int,
    *,
    full_url: Any = None,
    limit: int = MESSAGE_LIMIT,
) -> list[Row]:
    """The rows of the timeline page that starts at ``start`` (one `stream` page), each text
    cut to ``limit`` bytes (``full_url(seq)``: the link to a cut text's whole)."""
    rows: list[Row] = []
    calls: dict[str, str] = {}
    async with closing(store.stream(session_id, start, page_size=TIMELINE_PAGE)) as events:
        async for event in events:
            row = event_row(event, calls)
            rows.append(cut_row(row, full_url(event.seq) if full_url else "", limit))
            if len(rows) == TIMELINE_PAGE:
                break
    if any(row.subagent for row in rows):
        await _with_children(store, session_id, rows)
    return rows


async def _with_children(store: SessionStore, session_id: str, rows: list[Row]) -> None:
    """Fill in the title, status and open todos of the subagent sessions the rows started."""
    known = {c.id: c for c in await store.children(session_id)}
    for row in rows:
        child = known.get(row.subagent["id"]) if row.subagent else None
        if row.subagent is not None and child is not None:
            row.subagent.update(title=child.title, status=child.status, open=len(child.open_todos))
