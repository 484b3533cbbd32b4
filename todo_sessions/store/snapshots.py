"""The read operations of the recorder contract, each one function of `reads` run in one read
snapshot: written once here for every backend (`SnapshotReads`), over each backend's own
``_snapshot`` (where and how a snapshot is taken: a reader thread's ``BEGIN``, a PostgreSQL
``REPEATABLE READ`` transaction)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from ..core.envelope import SessionEvent
from ..core.todos import TodoItem
from . import folds, reads
from .folds import StateRead
from .leases import LeaseHolder
from .reads import ListFilters
from .records import (
    ChainRow,
    CheckpointInfo,
    CheckpointText,
    EventsRead,
    SessionRow,
    SummaryRow,
    UsagePayload,
)

__all__ = ["SnapshotReads"]

T = TypeVar("T")


class SnapshotReads:
    """The named reads of `recorder.Recorder`, for a backend that gives ``_snapshot``."""

    async def _snapshot(self, op: Callable[..., T], *args: Any) -> T:
        raise NotImplementedError

    async def find_session(self, session_id: str) -> SessionRow | None:
        return await self._snapshot(reads.find_session, session_id)

    async def read_session(self, session_id: str) -> SessionRow:
        return await self._snapshot(reads.read_session, session_id)

    async def read_summary(self, session_id: str) -> SummaryRow:
        return await self._snapshot(reads.read_summary, session_id)

    async def read_events(
        self, session_id: str, from_seq: int, limit: int | None = None
    ) -> EventsRead:
        return await self._snapshot(reads.read_events, session_id, from_seq, limit)

    async def count_events(self, session_id: str, event_type: str | None) -> int:
        return await self._snapshot(reads.count_of_type, session_id, event_type)

    async def latest_todos(self, session_id: str, upto_seq: int | None) -> list[TodoItem] | None:
        return await self._snapshot(reads.latest_todos, session_id, upto_seq)

    async def latest_event(
        self, session_id: str, types: tuple[str, ...], upto_seq: int | None
    ) -> SessionEvent | None:
        return await self._snapshot(reads.latest_event, session_id, types, upto_seq)

    async def read_surface_state(self, session_id: str, upto_seq: int | None) -> StateRead:
        return await self._snapshot(folds.surface_state, session_id, upto_seq)

    async def read_live_state(self, session_id: str) -> StateRead:
        return await self._snapshot(folds.live_state, session_id)

    async def read_checkpoints(self, session_id: str) -> list[CheckpointInfo]:
        return await self._snapshot(reads.checkpoint_list, session_id)

    async def read_checkpoint_texts(self, session_id: str) -> list[CheckpointText]:
        return await self._snapshot(reads.checkpoint_texts, session_id)

    async def list_sessions(
        self, limit: int, before: tuple[int, str] | None, filters: ListFilters | None
    ) -> list[SummaryRow]:
        return await self._snapshot(reads.list_sessions, limit, before, filters)

    async def session_ids(
        self, source: Literal["sessions", "events"], after: str, limit: int
    ) -> list[str]:
        return await self._snapshot(reads.session_ids, source, after, limit)

    async def usage_payloads(self, session_id: str) -> list[UsagePayload]:
        return await self._snapshot(reads.usage_payloads, session_id)

    async def read_chain(
        self, session_id: str, from_seq: int, limit: int
    ) -> tuple[SessionRow, list[ChainRow]]:
        return await self._snapshot(reads.chain_rows, session_id, from_seq, limit)

    async def chain_head(self, session_id: str) -> tuple[int, str | None] | None:
        return await self._snapshot(reads.chain_head, session_id)

    async def seqs_past_end(self, session_id: str, limit: int) -> list[int]:
        return await self._snapshot(reads.seqs_past_end, session_id, limit)

    async def lease_holders(self, session_ids: tuple[str, ...]) -> dict[str, LeaseHolder]:
        return await self._snapshot(reads.lease_holders, tuple(session_ids))

    async def store_id(self) -> str | None:
        return await self._snapshot(reads.read_store_id)
