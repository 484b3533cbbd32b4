"""The recorder: the one seam between `SessionStore` and a database backend.

A recorder does exactly what needs a database: it appends a prepared batch under the seq check,
runs read operations (plain functions of `reads` over a `Rows` source) in one consistent
snapshot, deletes, lists, waits for appends, and runs migrations under the migration lock.
Everything else (validation, projections, crash repair, fork, strict structure) lives in
`SessionStore` and the pure core, written once for every backend.

There is exactly one recorder per backend: `SQLiteRecorder` (``store/sqlite.py``, file and
in-memory databases) and `PostgresRecorder` (``store/postgres.py``), chosen once when the store
opens (`open_recorder`). The append transaction's steps are shared here (`AppendBatch`,
`check_batch_start`, `new_session_values`); each backend writes the transaction itself once,
on its own driver. See docs/design.md, "Backends".
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sqlalchemy.engine import Connection

from ..core.jsonvalue import canonical_json
from ..core.meta import MetaChange, fold_title
from ..errors import SeqConflictError
from .engine import SQLiteOptions, StoreURL
from .leases import Lease

if TYPE_CHECKING:
    from .namespace import Namespace

__all__ = [
    "AppendBatch",
    "AppendOutcome",
    "LocalWakeups",
    "Projection",
    "Recorder",
    "Wait",
    "check_batch_start",
    "new_session_values",
    "open_recorder",
    "projection_of",
]

T = TypeVar("T")

AppendOutcome = tuple[str, int, int]
"""``(incarnation, revision, next_seq)`` after a committed append."""

Wait = Callable[[float], Any]
"""``await wait(poll_interval)``: returns when the followed session may have new events."""


@dataclass(frozen=True, slots=True)
class Projection:
    """What an append changes of the session's projected columns (from its batch's
    ``session/meta`` and ``todo/write`` events, `core.meta.batch_change`), computed before the
    transaction: ``params`` of `queries.update_projection`, and the new tags when they change
    (``session_tags`` is then replaced)."""

    params: dict[str, Any]
    tags: tuple[str, ...] | None


def projection_of(session_id: str, change: MetaChange) -> Projection:
    """The column values of a batch's change (tags and metadata as JSON text, NULL when
    empty; the title with its casefold)."""
    tags, metadata = change.tags, change.metadata
    return Projection(
        {
            "p_id": session_id,
            "p_set_title": change.title_set,
            "p_title": change.title,
            "p_title_folded": fold_title(change.title),
            "p_set_tags": tags is not None,
            "p_tags": canonical_json(list(tags)) if tags else None,
            "p_set_metadata": metadata is not None,
            "p_metadata": canonical_json(metadata) if metadata else None,
            "p_set_open": change.open_todos is not None,
            "p_open_todos": bool(change.open_todos),
        },
        tags,
    )


@dataclass(frozen=True, slots=True)
class AppendBatch:
    """One append, ready for the database: rows of contiguous events of one session.

    ``rows`` are ``session_events`` rows as dicts (see `codec.event_row`); ``header`` is the
    ``sessions`` row of a pending (created, never appended) session, or None; ``now`` is the
    store clock's time for ``updated_at``; ``lease``, when given, is checked inside the append
    transaction (`leases.check`); ``projection``, when given, is applied after the events are
    inserted (a batch without ``session/meta`` or ``todo/write`` events has none).
    """

    session_id: str
    rows: Sequence[dict[str, Any]]
    header: dict[str, Any] | None
    now: int
    lease: Lease | None = None
    projection: Projection | None = None

    @property
    def first_seq(self) -> int:
        return int(self.rows[0]["seq"])


def check_batch_start(session_id: str, first_seq: int, next_seq: int) -> None:
    """A batch must start exactly at the stored next seq."""
    if first_seq != next_seq:
        raise SeqConflictError(session_id, first_seq, next_seq)


def new_session_values(header: dict[str, Any], now: int) -> dict[str, Any]:
    """The ``sessions`` row that materialises a session: a fresh incarnation, revision 0."""
    title = header.get("title")
    return {
        **header,
        "incarnation": str(uuid.uuid4()),
        "revision": 0,
        "next_seq": 0,
        "updated_at": now,
        "title_folded": fold_title(title),
        "tags": None,
        "metadata": None,
        "open_todos": False,
    }


def after_append(
    next_seq: int, revision: int, count: int, now: int, session_id: str
) -> dict[str, Any]:
    """Parameters of the ``sessions`` update that ends an append of ``count`` events."""
    return {
        "b_next_seq": next_seq + count,
        "b_revision": revision + 1,
        "b_updated_at": now,
        "b_id": session_id,
    }


class LocalWakeups:
    """Followers that poll, woken at once by appends made through the same store."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def wake(self, session_id: str) -> None:
        """Wake the followers of ``session_id``, each on its own event loop (a SQLite store
        serves callers on several loops: an `asyncio.Event` is set only from its loop)."""
        waiters = self._waiters.get(session_id)
        if not waiters:  # the usual case: every append calls this, few sessions are followed
            return
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for loop, event in waiters:
            if loop is here:
                event.set()
            else:
                with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                    loop.call_soon_threadsafe(event.set)

    @contextlib.asynccontextmanager
    async def polling(self, session_id: str) -> AsyncIterator[Wait]:
        """A `Wait` that returns after ``poll_interval`` or at this store's next append."""
        wake = asyncio.Event()
        waiter = (asyncio.get_running_loop(), wake)
        self._waiters.setdefault(session_id, set()).add(waiter)

        async def poll(interval: float) -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), interval)
            wake.clear()

        try:
            yield poll
        finally:
            waiters = self._waiters.get(session_id)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[session_id]


class Recorder(Protocol):
    """What `SessionStore` needs from a backend. One implementation per backend."""

    dialect: str

    async def open(self) -> None:
        """Connect (threads, pool); the schema is `migrate.prepare_schema`'s business."""
        ...

    async def append(self, batch: AppendBatch) -> AppendOutcome:
        """Append in one all-or-nothing transaction: read the session's state under the write
        lock, materialise the session row on its first append, check that the batch starts at
        the stored next seq (`SeqConflictError`), insert, advance next seq and revision."""
        ...

    async def read(self, op: Callable[..., T], *args: Any) -> T:
        """Run a read operation of `reads` (``op(rows, *args)``) in one read snapshot."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Delete a session row (its events cascade). False if there was none."""
        ...

    def wait_for_append(self, session_id: str) -> AbstractAsyncContextManager[Wait]:
        """A context whose ``wait(poll_interval)`` returns when ``session_id`` may have grown."""
        ...

    async def check_integrity(self) -> list[str]:
        """The database engine's own check of its files: each problem it reports (none: [])."""
        ...

    async def run_locked(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(sync SQLAlchemy connection)`` in one transaction under the migration lock."""
        ...

    async def run_sync(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        """Run ``fn(sync SQLAlchemy connection)`` in one transaction (maintenance, tests)."""
        ...

    async def close(self) -> None:
        """Finish queued work, then release every connection and thread. Idempotent."""
        ...


def open_recorder(
    target: StoreURL,
    *,
    sqlite: SQLiteOptions,
    pool_size: int = 5,
    max_overflow: int = 10,
    listen: StoreURL | None = None,
    namespace: Namespace | None = None,
) -> Recorder:
    """The recorder for ``target``'s backend (not yet connected), for the tables of
    ``namespace`` (None: the default namespace)."""
    from .namespace import DEFAULT

    namespace = DEFAULT if namespace is None else namespace
    namespace.check_dialect(target.dialect)
    if target.dialect == "postgresql":
        from .postgres import PostgresRecorder

        return PostgresRecorder(
            target,
            pool_size=pool_size,
            max_overflow=max_overflow,
            listen=listen,
            namespace=namespace,
        )
    from .sqlite import SQLiteRecorder

    return SQLiteRecorder(target, sqlite, namespace)
