"""What the agent had and what the model saw as of a seq: the todo list and what its write
changed, the turn open there, and the messages of the window that holds it (`load_state`,
`State`). Each read is bounded: the todo list is `latest_event` (one indexed row), the messages
one `stream` page (`messages.window_messages`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.messages import Message
from ..core.todos import TodoItem, todos_from_payload
from ..core.types import TODO_WRITE, TURN_END, TURN_START
from ..store.results import SessionSummary
from ..store.store import SessionStore
from .bounds import MESSAGE_LIMIT, TIMELINE_PAGE, page_start
from .messages import cut_messages, messages_json, window_messages
from .timeline import Row

__all__ = ["SessionPage", "State", "TodoChange", "load_state", "open_turn", "todo_changes"]


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


async def open_turn(store: SessionStore, session_id: str, at: int) -> int | None:
    """The turn still open at seq ``at`` (a fork there is refused), or None between turns."""
    event = await store.latest_event(session_id, TURN_START, TURN_END, upto_seq=at)
    if event is None or event.type != TURN_START:
        return None
    turn = event.data.get("turn")
    return turn if isinstance(turn, int) else -1


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
    """The messages of the window (`window_messages`), not the whole history."""
    open_turn: int | None = None
    """The turn open at ``at``, where a fork is refused (None: between turns, or unknown)."""
    message_seqs: list[int] = field(default_factory=list)
    """The seq of the event each message comes from."""
    window_start: int = 0
    """The first seq of the window the messages come from (the timeline page of ``at``)."""
    limit: int = MESSAGE_LIMIT
    """Texts longer than this many bytes are cut (`cut_messages`)."""

    def messages_json(self, last: int | None = None) -> list[dict[str, Any]]:
        """The messages in wire JSON, texts cut to `limit`: all of them, or the ``last``
        ones."""
        chosen = self.messages if last is None else self.messages[-last:] if last else []
        dumped = messages_json(chosen)
        cut_messages(dumped, self.limit)
        return dumped

    def shown_seqs(self, last: int) -> list[int]:
        """The seqs of the ``last`` messages (those `messages_json(last)` gives)."""
        return self.message_seqs[-last:] if last else []

    def window(self) -> dict[str, Any]:
        """``{start, end, previous, next}``: the window's seqs, and the ``at`` of the windows
        before and after it (None at either end)."""
        end = min(self.at, self.window_start + TIMELINE_PAGE - 1)
        later = self.window_start + TIMELINE_PAGE
        return {
            "start": self.window_start,
            "end": end,
            "previous": self.window_start - 1 if self.window_start > 0 else None,
            "next": min(later + TIMELINE_PAGE - 1, self.last) if later <= self.last else None,
        }

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
            "window": self.window(),
            "messageSeqs": list(self.message_seqs),
        }
        if with_messages:
            out["messages"] = self.messages_json()
        return out


async def _latest_write(
    store: SessionStore, session_id: str, at: int
) -> tuple[list[TodoItem] | None, int | None]:
    """The list of the last ``todo/write`` at or before ``at`` and its seq (one indexed
    row), or ``(None, None)``."""
    event = await store.latest_event(session_id, TODO_WRITE, upto_seq=at)
    if event is None:
        return None, None
    return todos_from_payload(event.data, seq=event.seq), event.seq


async def _todo_state(
    store: SessionStore, session_id: str, at: int
) -> tuple[list[TodoItem] | None, list[TodoChange], int | None, int | None]:
    """The list as of ``at``, what its write changed, the seq of that write and of the one
    before it."""
    todos, write_seq = await _latest_write(store, session_id, at)
    if todos is None or write_seq is None:
        return None, [], None, None
    previous, previous_seq = (None, None)
    if write_seq > 0:
        previous, previous_seq = await _latest_write(store, session_id, write_seq - 1)
    return todos, todo_changes(todos, previous), write_seq, previous_seq


async def load_state(
    store: SessionStore, session_id: str, at: int, last: int, *, limit: int = MESSAGE_LIMIT
) -> State:
    """The state as of ``at``: the todo list, the turn open there, and the messages of the
    window that holds ``at`` (`window_messages`), read side by side."""
    start = page_start(at)
    (seqs, messages), (todos, changes, write_seq, previous_seq), turn = await asyncio.gather(
        window_messages(store, session_id, start, at),
        _todo_state(store, session_id, at),
        open_turn(store, session_id, at),
    )
    return State(
        at,
        last,
        todos,
        changes,
        write_seq,
        previous_seq,
        messages,
        turn,
        message_seqs=seqs,
        window_start=start,
        limit=limit,
    )


@dataclass
class SessionPage:
    """Everything the session page shows at first."""

    header: dict[str, Any]
    summary: SessionSummary
    turns: int
    state: State
    start: int
    rows: list[Row]
