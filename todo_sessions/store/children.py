"""`SessionStore.children`: the sub-agent sessions a session started, with their status.

Built on the store's own reads (`list` by parent, `header`, `latest_event`, `current_todos`,
`lease_holders`); no query of its own. See docs/design.md, "Subagent sessions".
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..core.envelope import SessionEvent
from ..core.header import SessionHeader
from ..core.todos import TodoItem
from ..core.types import TURN_END, TURN_START
from .leases import LeaseHolder
from .results import SessionSummary

__all__ = ["ChildReads", "ChildSession", "ChildStatus", "list_children"]

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


class ChildReads(Protocol):
    """What `list_children` reads of a store (`SessionStore` has it)."""

    async def list(
        self, *, limit: int = ..., before: SessionSummary | None = ..., parent: str | None = ...
    ) -> builtins.list[SessionSummary]: ...

    async def header(self, session_id: str) -> SessionHeader: ...

    async def latest_event(self, session_id: str, *types: str) -> SessionEvent | None: ...

    async def current_todos(self, session_id: str) -> builtins.list[TodoItem] | None: ...

    async def lease_holders(self, session_ids: Iterable[str]) -> dict[str, LeaseHolder]: ...


_ENDS: dict[Any, ChildStatus] = {
    "completed": "completed",
    "aborted": "aborted",
    "interrupted": "interrupted",
}
"""The ``turn/end`` kinds that are a status of their own (any other end: ``failed``)."""


async def list_children(
    store: ChildReads, session_id: str, now: int
) -> builtins.list[ChildSession]:
    """The sessions whose header names ``session_id`` as ``parent_session`` and that are not
    forks of it (no ``seed_length``), oldest first; ``now`` (epoch ms) tells which leases
    are live."""
    summaries = []
    page = await store.list(parent=session_id, limit=_PAGE)
    while page:
        summaries.extend(page)
        page = await store.list(parent=session_id, limit=_PAGE, before=page[-1])
    holders = await store.lease_holders(s.id for s in summaries)
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
