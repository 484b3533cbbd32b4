"""`SessionStore.children`: the sub-agent sessions a session started, with their status.

Built on the store's own reads (`list` by parent, `header`, `latest_event`, `current_todos`,
`lease_holders`); no query of its own. See docs/design.md, "Subagent sessions".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..core.todos import TodoItem
from ..core.types import TURN_END, TURN_START

if TYPE_CHECKING:
    from .store import SessionStore

__all__ = ["ChildSession", "ChildStatus", "list_children"]

ChildStatus = Literal["running", "completed", "failed", "aborted", "interrupted"]

_PAGE = 100


@dataclass(frozen=True, slots=True)
class ChildSession:
    """One entry of `SessionStore.children`.

    ``status``: ``running`` while its last turn is open and its lease is live (or it has no
    lease), ``interrupted`` when its owner is gone with the turn open (before or after crash
    repair closed it), else how its last turn ended: ``completed``, ``aborted`` or
    ``failed`` (an error, ``max-tokens`` or any other end). ``open_todos``: the items of its
    current todo list that are pending or in progress.
    """

    id: str
    title: str | None
    status: ChildStatus
    open_todos: tuple[TodoItem, ...]
    origin: str | None
    delegation_depth: int
    created_at: int
    updated_at: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this entry."""
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "openTodos": [item.model_dump() for item in self.open_todos],
            "origin": self.origin,
            "delegationDepth": self.delegation_depth,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


_ENDS: dict[Any, ChildStatus] = {
    "completed": "completed",
    "aborted": "aborted",
    "interrupted": "interrupted",
}
"""The ``turn/end`` kinds that are a status of their own (any other end: ``failed``)."""


async def list_children(store: SessionStore, session_id: str) -> list[ChildSession]:
    """The sessions whose header names ``session_id`` as ``parent_session`` and that are not
    forks of it (no ``seed_length``), oldest first."""
    summaries = []
    page = await store.list(parent=session_id, limit=_PAGE)
    while page:
        summaries.extend(page)
        page = await store.list(parent=session_id, limit=_PAGE, before=page[-1])
    holders = await store.lease_holders(s.id for s in summaries)
    now = store._clock()
    found: list[ChildSession] = []
    for summary in summaries:
        header = await store.header(summary.id)
        if header.seed_length is not None:
            continue  # a fork
        last = await store.latest_event(summary.id, TURN_START, TURN_END)
        if last is not None and last.type == TURN_END:
            status = _ENDS.get(last.data.get("reason", {}).get("kind"), "failed")
        else:
            holder = holders.get(summary.id)
            status = "running" if holder is None or holder.live(now) else "interrupted"
        todos = await store.current_todos(summary.id) or []
        found.append(
            ChildSession(
                id=summary.id,
                title=summary.title,
                status=status,
                open_todos=tuple(t for t in todos if t.status != "completed"),
                origin=header.origin,
                delegation_depth=header.delegation_depth,
                created_at=header.created_at,
                updated_at=summary.updated_at,
            )
        )
    found.sort(key=lambda c: (c.created_at, c.id))
    return found
