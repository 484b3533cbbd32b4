"""What the pages show, as plain data read through the store's public API.

Nothing here knows HTML: `render` turns these values into escaped markup, and the JSON API
sends them as they are. Every read is bounded: a timeline page is one `stream` page, the todo
list is `current_todos` (one indexed row), the messages are `derive_messages` (surface rows).
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from ..core.envelope import SessionEvent
from ..core.messages import Message, messages_adapter
from ..core.todos import TodoItem
from ..store.results import SessionSummary
from ..store.store import SessionStore

__all__ = [
    "MESSAGES_SHOWN",
    "TIMELINE_PAGE",
    "TODO_SCAN_LIMIT",
    "Row",
    "SessionPage",
    "State",
    "TodoChange",
    "event_row",
    "list_page",
    "load_state",
    "load_timeline",
    "messages_json",
    "page_start",
    "when",
]

TIMELINE_PAGE = 200
"""Events per timeline page (the page holding the selected seq is shown)."""

MESSAGES_SHOWN = 200
"""The message pane shows the last this many derived messages (the JSON API has them all)."""

TODO_SCAN_LIMIT = 5_000
"""How far back from the selected seq the viewer looks for the todo write it shows, to mark
what that write changed. The store answers the list itself in one row, but has no call that
says *which* seq wrote it, so the viewer scans back page by page; past this many events it
shows the list without the changes."""

T = TypeVar("T")


@asynccontextmanager
async def closing(iterator: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """``contextlib.aclosing`` for the store's iterators (typed as plain async iterators):
    leaving the block closes the generator at once, releasing what it holds."""
    try:
        yield iterator
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()


REPAIR_CODES = frozenset({"TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"})


def when(ms: int | None) -> str:
    """Epoch milliseconds as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if ms is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def page_start(seq: int) -> int:
    return seq - seq % TIMELINE_PAGE


# -- the session list ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ListEntry:
    summary: SessionSummary
    turns: int

    def to_json(self) -> dict[str, Any]:
        s = self.summary
        return {
            "id": s.id,
            "title": s.title,
            "cwd": s.cwd,
            "createdAt": s.created_at,
            "updatedAt": s.updated_at,
            "events": s.next_seq,
            "turns": self.turns,
            "revision": s.revision,
        }


async def list_page(
    store: SessionStore, *, limit: int, before: str | None
) -> tuple[list[ListEntry], str | None]:
    """One page of `SessionStore.list` (newest activity first) with turn counts, and the id to
    pass as ``before`` for the next page (None on the last page)."""
    after = await store.summary(before) if before is not None else None
    summaries = await store.list(limit=limit, before=after)
    entries = [ListEntry(s, await store.count(s.id, type="turn/start")) for s in summaries]
    more = entries[-1].summary.id if len(entries) == limit else None
    return entries, more


# -- timeline rows ------------------------------------------------------------------------------


@dataclass
class Row:
    """One event of the timeline, ready to show."""

    seq: int
    type: str
    kind: str
    """CSS class: turn, step, user, assistant, call, result, todo, end, seed, chunk, other."""
    label: str
    text: str = ""
    reasoning: str = ""
    detail: str = ""
    error: str = ""
    repair: bool = False
    minor: bool = False
    """Hidden unless the viewer asks for every event (chunks, step ends, request records)."""
    todos: list[dict[str, str]] = field(default_factory=list)


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


def event_row(event: SessionEvent, calls: dict[str, str]) -> Row:
    """The timeline row of one event. ``calls`` maps tool call ids to tool names, filled as
    calls are seen, so a result can name its tool."""
    data: Any = event.data
    kind = event.type
    seq = event.seq
    if kind == "turn/start":
        return Row(seq, kind, "turn", f"turn {data.get('turn')}")
    if kind == "step/start":
        return Row(seq, kind, "step", f"step {data.get('step')}")
    if kind == "step/end":
        return Row(seq, kind, "step", f"end of step {data.get('step')}", minor=True)
    if kind == "user/message":
        parts = _texts(data.get("content"))
        note = "" if event.surface_op in (None, "append") else " (replaces earlier history)"
        return Row(seq, kind, "user", "user" + note, text="\n".join(t for _, t in parts))
    if kind == "assistant/message":
        message = data.get("message") or {}
        parts = _texts(message.get("content"))
        return Row(
            seq,
            kind,
            "assistant",
            "assistant",
            text="\n".join(t for k, t in parts if k == "text"),
            reasoning="\n".join(t for k, t in parts if k == "reasoning"),
            detail="\n".join(t for k, t in parts if k == "tool-call"),
        )
    if kind == "tool/call":
        call_id = str(data.get("callId", ""))
        name = str(data.get("name", ""))
        calls[call_id] = name
        return Row(seq, kind, "call", f"→ {name}", detail=str(data.get("arguments", "")))
    if kind == "tool/result":
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
            seq,
            kind,
            "result",
            f"← {name}" + (" failed" if failed else ""),
            text="\n".join(t for _, t in _texts([block])),
            error=code,
            repair=repair,
        )
    if kind == "todo/write":
        todos = data.get("todos") if isinstance(data.get("todos"), list) else []
        items = [
            {"content": str(t.get("content", "")), "status": str(t.get("status", ""))}
            for t in todos
            if isinstance(t, Mapping)
        ]
        return Row(seq, kind, "todo", "todo list written", todos=items)
    if kind == "turn/end":
        reason = data.get("reason") or {}
        how = str(reason.get("kind", "?"))
        error = reason.get("error") or {}
        text = str(error.get("message", "")) if isinstance(error, Mapping) else ""
        label = f"turn {data.get('turn')} ended: {how}"
        return Row(seq, kind, "end", label, text=text, repair=how == "interrupted")
    if kind == "session/end-seed":
        return Row(seq, kind, "seed", "end of inherited history (fork seed)")
    if kind == "assistant/chunk":
        chunk = data.get("chunk") or {}
        piece = chunk.get("text") or chunk.get("name") or ""
        return Row(seq, kind, "chunk", f"chunk {chunk.get('type', '')}", text=piece, minor=True)
    return Row(seq, kind, "other", kind, detail=_short_json(data), minor=True)


async def load_timeline(store: SessionStore, session_id: str, start: int) -> list[Row]:
    """The rows of the timeline page that starts at ``start`` (one `stream` page)."""
    rows: list[Row] = []
    calls: dict[str, str] = {}
    async with closing(store.stream(session_id, start, page_size=TIMELINE_PAGE)) as events:
        async for event in events:
            rows.append(event_row(event, calls))
            if len(rows) == TIMELINE_PAGE:
                break
    return rows


# -- the state at a seq ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TodoChange:
    content: str
    status: str
    change: str
    """``added``, ``status`` (``before`` holds the old status), ``same`` or ``removed``."""
    before: str | None = None


def todo_changes(
    todos: Sequence[TodoItem] | None, previous: Sequence[TodoItem] | None
) -> list[TodoChange]:
    """The list of a todo write compared with the write before it: every current item with
    what changed, then the items that were dropped."""
    if todos is None:
        return []
    before = {item.content: item.status for item in previous or []}
    out: list[TodoChange] = []
    for item in todos:
        old = before.get(item.content)
        if old is None:
            out.append(TodoChange(item.content, item.status, "added"))
        elif old != item.status:
            out.append(TodoChange(item.content, item.status, "status", old))
        else:
            out.append(TodoChange(item.content, item.status, "same"))
    current = {item.content for item in todos}
    out.extend(
        TodoChange(item.content, item.status, "removed")
        for item in previous or []
        if item.content not in current
    )
    return out


async def last_of(
    store: SessionStore, session_id: str, at: int, types: frozenset[str]
) -> tuple[SessionEvent | None, bool]:
    """The last event at or before ``at`` whose type is in ``types``, scanning back page by
    page for at most `TODO_SCAN_LIMIT` events (about 50 ms), and whether the answer is sure:
    ``(None, True)`` when the scan reached seq 0 without one, ``(None, False)`` when it
    stopped at the limit."""
    high = at
    size = 256
    scanned = 0
    while high >= 0 and scanned < TODO_SCAN_LIMIT:
        low = max(0, high - min(size, TODO_SCAN_LIMIT - scanned) + 1)
        want = high - low + 1
        found: SessionEvent | None = None
        seen = 0
        async with closing(store.stream(session_id, low, page_size=want)) as events:
            async for event in events:
                if event.type in types:
                    found = event
                seen += 1
                if seen == want:
                    break
        if found is not None:
            return found, True
        scanned += want
        high = low - 1
        size *= 2
    return None, high < 0


_TODO_WRITE = frozenset({"todo/write"})
_TURN_BOUNDARY = frozenset({"turn/start", "turn/end"})


async def latest_write_seq(store: SessionStore, session_id: str, at: int) -> int | None:
    """The seq of the last ``todo/write`` at or before ``at``, or None if the scan of
    `last_of` did not find one."""
    event, _ = await last_of(store, session_id, at, _TODO_WRITE)
    return None if event is None else event.seq


async def open_turn(store: SessionStore, session_id: str, at: int) -> int | None:
    """The turn still open at seq ``at`` (a fork there is refused), or None: between turns,
    or not known within the scan (then the server's answer to a fork decides)."""
    event, _ = await last_of(store, session_id, at, _TURN_BOUNDARY)
    if event is None or event.type != "turn/start":
        return None
    turn = event.data.get("turn")
    return turn if isinstance(turn, int) else -1


def messages_json(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in their wire JSON (as ``todo-sessions messages --json`` prints them)."""
    dumped: list[dict[str, Any]] = messages_adapter.dump_python(
        list(messages), mode="json", by_alias=True, exclude_none=True
    )
    return dumped


@dataclass
class State:
    """What the agent had and what the model saw as of seq ``at``."""

    at: int
    last: int
    todos: list[TodoItem] | None
    changes: list[TodoChange]
    write_seq: int | None
    previous_write_seq: int | None
    messages: list[Message]
    open_turn: int | None = None
    """The turn open at ``at``, where a fork is refused (None: between turns, or unknown)."""

    def messages_json(self, last: int | None = None) -> list[dict[str, Any]]:
        """The messages in wire JSON: all of them, or the ``last`` ones (a page shows only
        those, and dumping 20,000 messages to show 200 costs more than showing them)."""
        chosen = self.messages if last is None else self.messages[-last:] if last else []
        return messages_json(chosen)

    def to_json(self, *, with_messages: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "at": self.at,
            "last": self.last,
            "todos": None if self.todos is None else [t.model_dump() for t in self.todos],
            "todoWriteSeq": self.write_seq,
            "previousTodoWriteSeq": self.previous_write_seq,
            "todoChanges": [asdict(c) for c in self.changes],
            "messageCount": len(self.messages),
            "openTurn": self.open_turn,
        }
        if with_messages:
            out["messages"] = self.messages_json()
        return out


def clamp(at: int | None, last: int) -> int:
    """The seq to show: ``at`` within ``0..last`` (None: the end)."""
    if at is None or at > last:
        return max(last, 0)
    return max(at, 0)


async def _todo_state(
    store: SessionStore, session_id: str, at: int
) -> tuple[list[TodoItem] | None, list[TodoChange], int | None, int | None]:
    """The list as of ``at``, what its write changed, the seq of that write and of the one
    before it."""
    todos = await store.current_todos(session_id, upto_seq=at)
    if todos is None:
        return None, [], None, None
    write_seq = await latest_write_seq(store, session_id, at)
    if write_seq is None:
        return todos, [], None, None
    previous = None
    previous_seq = None
    if write_seq > 0:
        previous = await store.current_todos(session_id, upto_seq=write_seq - 1)
        if previous is not None:
            previous_seq = await latest_write_seq(store, session_id, write_seq - 1)
    return todos, todo_changes(todos, previous), write_seq, previous_seq


async def load_state(store: SessionStore, session_id: str, at: int, last: int) -> State:
    """The state as of ``at``. The three parts are read side by side: the messages are by
    far the slowest on a long session, and the rest fits in their shadow."""
    messages, (todos, changes, write_seq, previous_seq), turn = await asyncio.gather(
        store.derive_messages(session_id, upto_seq=at),
        _todo_state(store, session_id, at),
        open_turn(store, session_id, at),
    )
    return State(at, last, todos, changes, write_seq, previous_seq, messages, turn)


@dataclass
class SessionPage:
    """Everything the session page shows at first."""

    header: dict[str, Any]
    summary: SessionSummary
    turns: int
    state: State
    start: int
    rows: list[Row]
