"""The recorder contract: what a database backend does for `SessionStore`, operation by name.

A recorder is the only code that talks to a database. Each operation takes and returns plain
values of the store (strings, ints, dicts of column values, `SessionEvent`, `Lease`,
`AppendBatch`, ...): no SQLAlchemy objects, no callbacks. Everything else (validation,
projections, crash repair, fork, strict structure, retries) lives in `SessionStore` and the
pure core, written once for every backend.

There is exactly one recorder per backend: `SQLiteRecorder` (``store/sqlite/``, file and
in-memory databases) and `PostgresRecorder` (``store/postgres/``), chosen once when the store
opens (`backends.open_recorder`, the one place that picks a backend). A recorder serves the
tables of one namespace, given when it is made. ``tests/test_recorder_contract.py`` holds
every backend to this contract. See docs/design.md, "Backends".

Reads return typed rows (`records`: `SessionRow`, `SummaryRow`, `ChainRow`, ...; named tuples),
never dicts or anonymous tuples. Driver errors are raised as they are; the store
translates them (`translate.translate_errors`).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from ..core.envelope import SessionEvent
    from ..core.search import SearchQuery
    from ..core.todos import TodoItem
    from .batch import AppendBatch, AppendOutcome
    from .checkpoints import CheckpointWrite
    from .folds import StateRead
    from .index_ops import IndexRow, SearchPage
    from .leases import Lease, LeaseHolder
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
    from .search import SearchFilters
    from .wakeups import Wait

__all__ = ["Recorder"]


class Recorder(Protocol):
    """What `SessionStore` needs from a backend. One implementation per backend."""

    dialect: str
    """``"sqlite"`` or ``"postgresql"``."""
    loop_bound: bool
    """Whether the recorder serves only the event loop that opened it. Neither backend does:
    SQLite's threads serve any loop, and PostgreSQL keeps an engine per loop (asyncpg's
    connections belong to the loop that made them)."""

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect (threads, pool), so a bad URL or file fails here. Idempotent. The schema
        is `schema_revision` / `migrate`'s business."""
        ...

    async def close(self) -> None:
        """Finish queued work, then release every connection and thread. Idempotent."""
        ...

    # -- schema ---------------------------------------------------------------------------------

    async def schema_revision(self) -> str | None:
        """The namespace's alembic revision (None: never migrated); `SchemaError` for a
        revision this version does not know, or for tables of ours it did not create."""
        ...

    async def migrate(self, revision: str, *, downgrade: bool = False) -> str | None:
        """Upgrade (or step back) the namespace's schema to ``revision`` in one transaction
        holding the migration lock (SQLite ``BEGIN IMMEDIATE``, a PostgreSQL advisory lock),
        so concurrent migrations serialise. Returns the revision it found."""
        ...

    async def store_id(self) -> str | None:
        """The database's random id (``store_state``), or None when it has none."""
        ...

    async def check_integrity(self) -> list[str]:
        """The database engine's own check of its files: each problem it reports (none: [])."""
        ...

    # -- writing --------------------------------------------------------------------------------

    async def append(self, batch: AppendBatch) -> AppendOutcome:
        """Append in one all-or-nothing transaction: read the session's state under the write
        lock, check the batch's lease (`LeaseLostError`), materialise the session row on its
        first append, check that the batch starts at the stored next seq
        (`SeqConflictError`), insert, apply the projection, advance next seq and revision."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Delete a session row (its events, tags and checkpoints cascade) and its lease.
        False if there was none."""
        ...

    async def acquire_lease(
        self, session_id: str, owner: str, now: int, ttl_ms: int, *, steal: bool
    ) -> Lease:
        """Take the lease in one write transaction (`leases.acquired` decides):
        `SessionLeasedError` while another live owner holds it, unless ``steal``."""
        ...

    async def renew_lease(self, lease: Lease, now: int, ttl_ms: int) -> Lease:
        """Extend a lease still held (`LeaseLostError` when taken over or expired)."""
        ...

    async def release_lease(self, lease: Lease) -> bool:
        """Delete the lease row if it is still ``lease``'s; False when it was not."""
        ...

    async def write_checkpoint(self, checkpoint: CheckpointWrite) -> bool:
        """Store a checkpoint, replacing one at its seq, keeping the newest ``keep``; False
        (nothing written) when the session's stored log ends before its seq;
        `SessionNotFoundError` for an unknown session."""
        ...

    async def delete_checkpoints(self, session_id: str) -> int:
        """Delete every checkpoint of a session; how many there were."""
        ...

    async def thin_checkpoints(self, session_id: str, keep: int) -> int:
        """Delete the session's checkpoints older than its newest ``keep``; how many."""
        ...

    async def catch_up_index(self) -> int:
        """Index every append committed before this call that the search index has not taken
        yet (`indexer.catch_up_all`: transactions of many sessions, each moving the marks of
        the sessions it indexed); the index rows written. From any process: the marks are in
        the database."""
        ...

    async def reindex(self, search_config: str | None = None) -> int:
        """Rebuild the search index from the logs in one transaction (PostgreSQL: under the
        index's lock; ``search_config``: its text search configuration from now on, a
        `ValueError` for a name the server does not know); the index rows it holds. The
        appends' marks stay (clearing them would hold every marked session row for the whole
        rebuild on PostgreSQL): the next catch-up finds their events indexed and clears them."""
        ...

    # -- the search index -----------------------------------------------------------------------

    async def search(
        self,
        query: SearchQuery,
        kinds: Sequence[str],
        filters: SearchFilters,
        limit: int,
        before: int | None,
    ) -> SearchPage:
        """One page of hits (`index_ops.SearchRow`), newest index row first, below index row
        ``before``, with the sessions of the page that ever replaced surface events."""
        ...

    async def search_config(self) -> str | None:
        """PostgreSQL: the index's text search configuration; SQLite: None."""
        ...

    async def index_problems(self) -> list[str]:
        """The database engine's own check of the index against its rows (SQLite's FTS5)."""
        ...

    async def index_rows(self, session_id: str) -> list[IndexRow]:
        """The stored index rows of one session, in seq order."""
        ...

    async def pending_index(self) -> int:
        """How many stored events wait for the search index (0: none)."""
        ...

    # -- reading (each in one consistent snapshot) --------------------------------------------

    async def find_session(self, session_id: str) -> SessionRow | None:
        """The ``sessions`` row, or None."""
        ...

    async def read_session(self, session_id: str) -> SessionRow:
        """The ``sessions`` row: `SessionNotFoundError` for an unknown id,
        `FormatUnsupportedError` for a newer format."""
        ...

    async def read_summary(self, session_id: str) -> SummaryRow:
        """The `SessionSummary` columns of one session (`SessionNotFoundError`)."""
        ...

    async def read_events(
        self, session_id: str, from_seq: int, limit: int | None = None
    ) -> EventsRead:
        """The session row and its events from ``from_seq`` (at most ``limit``), bounded by
        the row's next seq; a missing seq below it is a `CorruptSessionError`."""
        ...

    async def count_events(self, session_id: str, event_type: str | None) -> int:
        """How many events the session has (of one type)."""
        ...

    async def latest_todos(self, session_id: str, upto_seq: int | None) -> list[TodoItem] | None:
        """The list of the latest ``todo/write`` at or before ``upto_seq``, or None."""
        ...

    async def latest_event(
        self, session_id: str, types: tuple[str, ...], upto_seq: int | None
    ) -> SessionEvent | None:
        """The latest event of one of ``types`` at or before ``upto_seq``, or None."""
        ...

    async def read_surface_state(self, session_id: str, upto_seq: int | None) -> StateRead:
        """The surface as of ``upto_seq``, from the newest usable checkpoint at or below it
        and the surface rows after it."""
        ...

    async def read_live_state(self, session_id: str) -> StateRead:
        """The live state at the end of the log, from the newest usable checkpoint and the
        events after it."""
        ...

    async def read_checkpoints(self, session_id: str) -> list[CheckpointInfo]:
        """``(seq, format_version, created_at, size)`` of each checkpoint, oldest first."""
        ...

    async def read_checkpoint_texts(self, session_id: str) -> list[CheckpointText]:
        """``(seq, state text)`` of each checkpoint, oldest first."""
        ...

    async def list_sessions(
        self, limit: int, before: tuple[int, str] | None, filters: ListFilters | None
    ) -> list[SummaryRow]:
        """One page of summary rows, newest activity first, after ``(updated_at, id)``,
        matching ``filters``."""
        ...

    async def session_ids(
        self, source: Literal["sessions", "events"], after: str, limit: int
    ) -> list[str]:
        """One page of session ids after ``after``, from the session rows or the events."""
        ...

    async def usage_payloads(self, session_id: str) -> list[UsagePayload]:
        """``(seq, decoded data)`` of each ``assistant/message``."""
        ...

    async def read_chain(
        self, session_id: str, from_seq: int, limit: int
    ) -> tuple[SessionRow, list[ChainRow]]:
        """The ``sessions`` row and, undecoded, the stored fields and ``chain`` of its events
        from ``from_seq`` (at most ``limit``, below its next seq; `records.ChainRow`)."""
        ...

    async def chain_head(self, session_id: str) -> tuple[int, str | None] | None:
        """``(seq, chain value)`` of the last event (None: no events;
        `SessionNotFoundError` for an unknown id)."""
        ...

    async def seqs_past_end(self, session_id: str, limit: int) -> list[int]:
        """Seqs of event rows at or after the session's stored next seq."""
        ...

    async def lease_holders(self, session_ids: tuple[str, ...]) -> dict[str, LeaseHolder]:
        """The stored lease rows of these sessions (live or expired)."""
        ...

    # -- following ------------------------------------------------------------------------------

    def wait_for_append(self, session_id: str) -> AbstractAsyncContextManager[Wait]:
        """A context whose ``wait(poll_interval)`` returns when ``session_id`` may have grown
        (PostgreSQL: a notification; SQLite: the poll interval, or this store's append)."""
        ...
