"""`SessionStore`: the session log on SQLite or PostgreSQL.

The store composes a backend's recorder (`recorder.Recorder`: the only code that talks to the
database) with what is the same on every backend: validation at append, strict structure,
projections, crash repair, fork, paged streams and follow. It returns values
(`SessionEvent`, `StoredLog`, `SessionSummary`), never rows or connections, and translates
every driver exception at this boundary (`translate_errors`). See docs/design.md, "The store
contract".
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import EllipsisType, TracebackType
from typing import Any, Literal, NoReturn, Self, TypeVar

from sqlalchemy.engine import URL, Connection

from ..core.catalog import FORMAT_VERSION, validate_event
from ..core.checkpoint import LiveState
from ..core.envelope import SessionEvent
from ..core.header import SessionHeader, check_session_id
from ..core.jsonvalue import decode_json
from ..core.messages import Message
from ..core.meta import META_TYPE, add_usage, batch_change
from ..core.repair import closers_for, interrupted_turn_closers
from ..core.structure import StructureChecker
from ..core.todos import TodoItem
from ..errors import (
    CorruptSessionError,
    InvalidEventError,
    SeqConflictError,
    SessionExistsError,
    SessionNotFoundError,
    StoreError,
    StoreUnavailableError,
    StructureError,
)
from . import checkpoints, leases, reads
from .codec import event_row, header_from_row, header_row
from .engine import SQLiteOptions, StoreURL, parse_url
from .leases import Lease, LeaseHolder
from .migrate import namespace_of, prepare_schema
from .namespace import Namespace
from .recorder import AppendBatch, Recorder, open_recorder, projection_of
from .results import (
    CheckpointInfo,
    ResumedState,
    SessionSummary,
    SessionUsage,
    StoredLog,
    revision_token,
)
from .translate import is_unique_violation, translate_errors

__all__ = ["SessionStore", "default_url"]

logger = logging.getLogger("todo_sessions.store")

EventInput = SessionEvent | Mapping[str, Any]
T = TypeVar("T")

_LOAD_ATTEMPTS = 5


def _append_failed(exc: Exception, session_id: str, first: int) -> NoReturn:
    """Raise what a failed append's error means (`translate_errors`)."""
    with translate_errors(f"appending to session {session_id!r}"):
        # The seq was checked against the next seq read under the write lock, so a row already
        # at one of the batch's seqs lies past the session's stored end: it was put there
        # outside todo_sessions.
        if is_unique_violation(exc):
            raise CorruptSessionError(
                session_id,
                first,
                f"a stored row at seq {first} or later lies past the session's stored end; it "
                "was written outside todo_sessions (run `todo-sessions verify`)",
            ) from exc
        raise exc
    raise AssertionError("unreachable: translate_errors re-raises what it catches")


def _ttl_ms(ttl: float) -> int:
    if not ttl > 0:
        raise ValueError(f"a lease's ttl must be > 0 seconds, got {ttl!r}")
    return max(1, round(ttl * 1000))


_RECONNECT_FIRST_PAUSE = 0.05
_RECONNECT_MAX_PAUSE = 1.0
"""A follower retries an unreachable database after 50 ms, doubling up to 1 s."""


def default_url() -> str:
    """``TODO_SESSIONS_URL``, else an SQLite file in the user's data directory."""
    env = os.environ.get("TODO_SESSIONS_URL")
    if env:
        return env
    from platformdirs import user_data_path

    return f"sqlite:///{user_data_path('todo-sessions') / 'sessions.db'}"


def wall_clock_ms() -> int:
    """The default clock of a store: Unix epoch milliseconds."""
    return time.time_ns() // 1_000_000


def _writable(path: Path) -> bool:
    """Whether this process may write the SQLite file and create its journal beside it."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


def _check_upto(upto_seq: int | None) -> None:
    if upto_seq is not None and (type(upto_seq) is not int or upto_seq < 0):
        raise ValueError(f"upto_seq must be a non-negative int, got {upto_seq!r}")


class SessionStore:
    """The append-only session log.

    ``SessionStore(url)`` takes a SQLAlchemy-style URL (``sqlite:///path``,
    ``postgresql://user@host/db``) or a plain file path; with no URL it uses
    ``TODO_SESSIONS_URL`` or an SQLite file in the user's data directory. Use it as an async
    context manager (or call `open` / `aclose`). Opening migrates the database to the newest
    schema unless ``migrate=False``, in which case an unmigrated database raises `SchemaError`.

    SQLite settings: ``journal_mode`` (WAL), ``synchronous`` ("FULL" or "NORMAL"),
    ``busy_timeout_ms`` (5000), ``read_only`` (default: read-only exactly when the file
    exists and this process may not write it or its directory; reads work, appends and
    deletes raise `StoreError`, an old schema is a `SchemaError`). PostgreSQL: ``pool_size``;
    behind PgBouncer in transaction mode add ``?pgbouncer=true`` to the URL (no prepared
    statement outlives its transaction) and give ``listen_url``, a direct connection for
    `follow`'s LISTEN (without it, followers poll). ``clock`` (Unix epoch ms, default the wall
    clock) stamps ``updated_at`` of appends and ``created_at`` of forks.

    Namespaces (docs/design.md, "Namespaces"): ``schema="agent"`` (PostgreSQL) puts every
    table, trigger and the version table in that schema, created by the migrations;
    ``table_prefix="agent_"`` (SQLite) prefixes every name. The URL parameters ``?schema=`` /
    ``?table_prefix=`` do the same (the keyword and the URL must agree). A malformed name, or
    the other backend's option, is a `NamespaceError`.
    """

    def __init__(
        self,
        url: str | URL | os.PathLike[str] | None = None,
        *,
        strict: bool = False,
        migrate: bool = True,
        journal_mode: str = "WAL",
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        busy_timeout_ms: int = 5000,
        pool_size: int = 5,
        page_size: int = 1000,
        clock: Callable[[], int] = wall_clock_ms,
        read_only: bool | None = None,
        listen_url: str | URL | None = None,
        schema: str | None = None,
        table_prefix: str | None = None,
    ) -> None:
        self._target: StoreURL = parse_url(url if url is not None else default_url())
        self.namespace: Namespace = namespace_of(
            self._target, schema=schema, table_prefix=table_prefix
        )
        """Where this store's tables are (`Namespace`: a schema, a table prefix, or the
        default)."""
        self._listen = parse_url(listen_url) if listen_url is not None else None
        if self._listen is not None and self._listen.dialect != "postgresql":
            raise ValueError("listen_url must be a PostgreSQL URL (a direct connection)")
        if read_only is None:  # an existing SQLite file we may not write: read it read-only
            path = self._target.path
            read_only = path is not None and path.is_file() and not _writable(path)
        self.read_only = read_only
        self._sqlite = SQLiteOptions(journal_mode, synchronous, busy_timeout_ms, read_only)
        self.strict = strict
        self._migrate = migrate
        self._pool_size = pool_size
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        self.page_size = page_size
        self._clock = clock
        self._recorder: Recorder | None = None
        self._store_id = ""
        self._pending: dict[str, SessionHeader] = {}
        self._checkers: dict[str, StructureChecker] = {}
        self._open_lock = asyncio.Lock()
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The database URL (password masked)."""
        return self._target.render()

    @property
    def dialect(self) -> str:
        return self._target.dialect

    @property
    def store_id(self) -> str:
        """The database's random id (part of every revision token). Empty until opened."""
        return self._store_id

    async def open(self) -> Self:
        """Connect, check (and by default migrate) the schema. Idempotent.

        On PostgreSQL the store belongs to the event loop that opened it (its connections do):
        using it from another loop raises `StoreError`. SQLite stores work from any loop."""
        if self._recorder is not None:
            self._check_loop()
            return self
        async with self._open_lock:
            if self._closed:
                raise RuntimeError("this SessionStore is closed")
            if self._recorder is not None:
                self._check_loop()
                return self
            recorder = open_recorder(
                self._target,
                sqlite=self._sqlite,
                pool_size=self._pool_size,
                listen=self._listen,
                namespace=self.namespace,
            )
            try:
                with translate_errors(f"opening {self.url}"):
                    await recorder.open()
                    store_id = await prepare_schema(
                        recorder,
                        migrate=self._migrate,
                        url=self.url,
                        read_only=self.read_only,
                        namespace=self.namespace,
                    )
            except BaseException:
                await recorder.close()
                raise
            self._store_id = store_id
            self._loop: asyncio.AbstractEventLoop = asyncio.get_running_loop()
            self._recorder = recorder
            return self

    async def aclose(self) -> None:
        """Finish appends already handed to the database, then close every connection and
        thread of the store. Pending (never appended) creates are forgotten."""
        self._closed = True
        recorder, self._recorder = self._recorder, None
        if recorder is not None:
            await recorder.close()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _ready(self) -> Recorder:
        recorder = self._recorder
        if recorder is None:
            await self.open()
            recorder = self._recorder
            if recorder is None:  # closed while opening
                raise RuntimeError("this SessionStore is closed")
        else:
            self._check_loop()
        return recorder

    def _check_loop(self) -> None:
        """A PostgreSQL pool's connections belong to the loop that made them: refuse another
        loop with a clear error rather than the driver's RuntimeError deep inside a query."""
        if self._target.dialect == "postgresql" and asyncio.get_running_loop() is not self._loop:
            raise StoreError(
                f"this SessionStore ({self.url}) was opened on another event loop; its "
                "PostgreSQL connections belong to that loop. Use one store per event loop, or "
                "todo_sessions.sync (SyncSessionStore, SyncSessionService) from code without one"
            )

    def _check_writable(self, what: str) -> None:
        if self.read_only:
            raise StoreError(f"cannot {what}: {self.url} is open read-only")

    def _token(self, incarnation: str, revision: int) -> str:
        return revision_token(self._store_id, incarnation, revision)

    async def _read(self, what: str, op: Callable[..., T], *args: Any) -> T:
        """Run a read operation of `reads` in one read transaction of the recorder."""
        recorder = await self._ready()
        with translate_errors(what):
            return await recorder.read(op, *args)

    # -- writing --------------------------------------------------------------------------------

    async def create(self, header: SessionHeader) -> None:
        """Register a new session. Nothing is written until its first non-empty append."""
        if not isinstance(header, SessionHeader):
            raise TypeError(f"create() takes a SessionHeader, got {type(header).__name__}")
        if header.format_version > FORMAT_VERSION:
            raise InvalidEventError(
                f"session {header.id!r}: format_version {header.format_version} is newer than "
                f"this version writes ({FORMAT_VERSION})",
                field="format_version",
            )
        if header.id in self._pending:
            raise SessionExistsError(header.id)
        found = await self._read(f"creating session {header.id!r}", reads.find_session, header.id)
        if found is not None:
            raise SessionExistsError(header.id)
        self._pending[header.id] = header

    async def append(
        self, session_id: str, events: Iterable[EventInput], *, lease: Lease | None = None
    ) -> str:
        """Append a contiguous batch starting at the stored next seq, all or nothing.

        Returns the new revision token. Raises `SeqConflictError` when the batch does not start
        at the stored next seq (another writer was first, or a replay), `InvalidEventError` for
        a malformed event, `SessionNotFoundError` for an id with neither a stored log nor a
        pending `create`. An empty batch writes nothing and returns the current token.
        Events that already passed `validate_event` are not checked again.

        With ``lease`` (from `acquire_lease`), the append checks inside its own transaction
        that the lease is still held and unexpired, else raises `LeaseLostError` and writes
        nothing (fencing; `SessionService` passes its leases here).
        """
        check_session_id(session_id)
        if self.read_only:
            self._check_writable(f"append to session {session_id!r}")
        batch = [e if isinstance(e, SessionEvent) else SessionEvent.from_dict(e) for e in events]
        recorder = self._recorder
        if recorder is None or self._target.dialect == "postgresql":
            recorder = await self._ready()  # opens the store; checks a PostgreSQL store's loop
        if not batch:
            return await self._current_token(session_id)
        first = batch[0].seq
        for offset, event in enumerate(batch):
            if offset and event.seq != first + offset:
                raise SeqConflictError(
                    session_id,
                    first,
                    None,
                    detail=f"but the batch is not contiguous: seq {event.seq} follows "
                    f"seq {batch[offset - 1].seq}",
                )
            validate_event(event)
        checker = await self._strict_checker(session_id, batch) if self.strict else None
        pending = self._pending.get(session_id)
        # session/meta and todo/write change projected columns of `sessions` (`core.meta`)
        inherited = pending.seed_length if pending is not None else None
        change = batch_change(batch, inherited_below=inherited)
        prepared = AppendBatch(
            session_id,
            [event_row(session_id, e) for e in batch],
            header_row(pending) if pending is not None else None,
            self._clock(),
            lease,
            None if change is None else projection_of(session_id, change),
        )
        try:
            incarnation, revision, _ = await recorder.append(prepared)
        except Exception as exc:
            # Translated on the error path only: a `with translate_errors(...)` block around
            # every append cost about as much as validating its event.
            _append_failed(exc, session_id, first)
        if pending is not None:
            self._pending.pop(session_id, None)
        if checker is not None:
            self._checkers[session_id] = checker
        return self._token(incarnation, revision)

    async def _strict_checker(
        self, session_id: str, batch: Sequence[SessionEvent]
    ) -> StructureChecker | None:
        """Strict mode: the structure state after ``batch`` (raises `StructureError`).

        The state at the end of the stored log is cached per session after each append through
        this store; on a miss (first use, or another writer appended) it is rebuilt by reading
        the log once. A batch that does not start at the known next seq is left to the seq
        check, which reports it as a `SeqConflictError`.
        """
        cached = self._checkers.get(session_id)
        if cached is None or cached.next_seq != batch[0].seq:
            cached = StructureChecker()
            if session_id not in self._pending:
                for event in await self.read_from(session_id):
                    cached.advance(event)
        if cached.next_seq != batch[0].seq:
            return None
        checker = copy.deepcopy(cached)
        for event in batch:
            checker.apply(event)
        return checker

    # -- leases ---------------------------------------------------------------------------------

    async def acquire_lease(
        self, session_id: str, owner: str, *, ttl: float = 30.0, steal: bool = False
    ) -> Lease:
        """Take the ownership lease on a session for ``ttl`` seconds (docs/design.md,
        "Leases"). Free, expired or already ``owner``'s → a new epoch; held by another live
        owner → `SessionLeasedError` naming it and its expiry, unless ``steal``."""
        check_session_id(session_id)
        self._check_writable(f"lease session {session_id!r}")
        ttl_ms = _ttl_ms(ttl)
        table = self.namespace.tables.session_leases
        return await self._write_sync(
            f"leasing session {session_id!r}",
            lambda c: leases.acquire(
                c, table, session_id, owner, self._clock(), ttl_ms, steal=steal
            ),
        )

    async def renew_lease(self, lease: Lease, *, ttl: float = 30.0) -> Lease:
        """Extend a lease still held for ``ttl`` seconds from now; `LeaseLostError` when it
        was taken over or ran out meanwhile."""
        ttl_ms = _ttl_ms(ttl)
        table = self.namespace.tables.session_leases
        return await self._write_sync(
            f"renewing the lease on session {lease.session_id!r}",
            lambda c: leases.renew(c, table, lease, self._clock(), ttl_ms),
        )

    async def release_lease(self, lease: Lease) -> bool:
        """Give a lease back. False when it was no longer this holder's (nothing changed)."""
        return await self._write_sync(
            f"releasing the lease on session {lease.session_id!r}",
            lambda c: leases.release(c, self.namespace.tables.session_leases, lease),
        )

    async def lease_holders(self, session_ids: Iterable[str]) -> dict[str, LeaseHolder]:
        """The stored lease rows of these sessions (live or expired: see `LeaseHolder.live`)."""
        ids = list(session_ids)
        table = self.namespace.tables.session_leases
        recorder = await self._ready()
        with translate_errors("reading session leases"):
            return await recorder.run_sync(lambda c: leases.holders(c, table, ids), write=False)

    async def _write_sync(self, what: str, fn: Callable[[Connection], T]) -> T:
        recorder = await self._ready()
        with translate_errors(what):
            return await recorder.run_sync(fn, write=True)

    async def delete(self, session_id: str) -> None:
        """Remove a session and all its events (the only way rows ever leave)."""
        check_session_id(session_id)
        self._check_writable(f"delete session {session_id!r}")
        recorder = await self._ready()
        pending = self._pending.pop(session_id, None)
        self._checkers.pop(session_id, None)
        with translate_errors(f"deleting session {session_id!r}"):
            deleted = await recorder.delete(session_id)
        if not deleted and pending is None:
            raise SessionNotFoundError(session_id)

    # -- reading --------------------------------------------------------------------------------

    async def _current_token(self, session_id: str) -> str:
        row = await self._read(f"reading session {session_id!r}", reads.find_session, session_id)
        if row is not None:
            return self._token(row["incarnation"], row["revision"])
        if session_id in self._pending:
            return self._token("", 0)
        raise SessionNotFoundError(session_id)

    async def _read_events(
        self, session_id: str, from_seq: int, limit: int | None = None
    ) -> tuple[dict[str, Any], list[SessionEvent]]:
        check_session_id(session_id)
        return await self._read(
            f"reading session {session_id!r}", reads.read_events, session_id, from_seq, limit
        )

    async def read_from(
        self, session_id: str, from_seq: int = 0, *, limit: int | None = None
    ) -> list[SessionEvent]:
        """The stored events with ``seq >= from_seq`` (at most ``limit``), exactly as stored."""
        reads.check_from_seq(from_seq)
        if limit is not None and (type(limit) is not int or limit < 0):
            raise ValueError(f"limit must be a non-negative int, got {limit!r}")
        return (await self._read_events(session_id, from_seq, limit))[1]

    async def read(self, session_id: str) -> StoredLog:
        """Header, every event and the revision token, read in one transaction."""
        row, events = await self._read_events(session_id, 0)
        return StoredLog(
            header_from_row(row), tuple(events), self._token(row["incarnation"], row["revision"])
        )

    async def _session(self, session_id: str) -> dict[str, Any]:
        check_session_id(session_id)
        return await self._read(f"reading session {session_id!r}", reads.read_session, session_id)

    async def header(self, session_id: str) -> SessionHeader:
        """The stored header of a session."""
        return header_from_row(await self._session(session_id))

    async def revision(self, session_id: str) -> str:
        """The current revision token of a stored session."""
        row = await self._session(session_id)
        return self._token(row["incarnation"], row["revision"])

    async def summary(self, session_id: str) -> SessionSummary:
        """The `list` entry of one session."""
        check_session_id(session_id)
        return self._summary(
            await self._read(f"reading session {session_id!r}", reads.read_summary, session_id)
        )

    async def count(self, session_id: str, *, type: str | None = None) -> int:
        """How many events the session has (of one ``type``, through the type index)."""
        check_session_id(session_id)
        return await self._read(
            f"counting events of session {session_id!r}", reads.count_of_type, session_id, type
        )

    def _summary(self, r: Mapping[str, Any]) -> SessionSummary:
        tags, metadata = r["tags"], r["metadata"]
        try:
            return SessionSummary(
                id=r["id"],
                created_at=r["created_at"],
                updated_at=r["updated_at"],
                cwd=r["cwd"],
                title=r["title"],
                next_seq=r["next_seq"],
                revision=self._token(r["incarnation"], r["revision"]),
                parent=r["parent_session"],
                tags=() if tags is None else tuple(decode_json(tags, strict=False)),
                metadata={} if metadata is None else decode_json(metadata, strict=False),
                open_todos=bool(r["open_todos"]),
            )
        except (ValueError, TypeError) as exc:
            raise CorruptSessionError(r["id"], None, f"stored tags or metadata: {exc}") from None

    # -- projections ----------------------------------------------------------------------------

    async def current_todos(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> list[TodoItem] | None:
        """The todo list of the latest ``todo/write`` (as of ``upto_seq``), or None: one
        indexed row read, whatever the session's length."""
        _check_upto(upto_seq)
        check_session_id(session_id)
        return await self._read(
            f"reading todos of session {session_id!r}", reads.latest_todos, session_id, upto_seq
        )

    async def latest_event(
        self, session_id: str, *types: str, upto_seq: int | None = None
    ) -> SessionEvent | None:
        """The latest event of one of ``types`` (as of ``upto_seq``), or None: one indexed row
        read per type, whatever the session's length. ``latest_event(id, "todo/write")`` is the
        write `current_todos` reads; ``latest_event(id, "turn/start", "turn/end")`` tells
        whether a turn is open."""
        _check_upto(upto_seq)
        check_session_id(session_id)
        if not types or any(type(t) is not str for t in types):
            raise ValueError(f"latest_event needs one or more event types (str), got {types!r}")
        return await self._read(
            f"reading the latest {'/'.join(types)} of session {session_id!r}",
            reads.latest_event,
            session_id,
            types,
            upto_seq,
        )

    async def derive_messages(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> list[Message]:
        """The model's message history, read from surface rows only (as of ``upto_seq``)."""
        _check_upto(upto_seq)
        check_session_id(session_id)
        found = await self._read(
            f"reading messages of session {session_id!r}",
            reads.surface_state,
            session_id,
            upto_seq,
        )
        self._skipped(session_id, found.skipped)
        return found.state.surface.messages()

    # -- checkpoints ----------------------------------------------------------------------------

    async def write_checkpoint(self, session_id: str, state: LiveState, *, keep: int = 4) -> bool:
        """Store ``state`` as the session's checkpoint at ``state.next_seq`` (docs/design.md,
        "Checkpoints"), keeping the newest ``keep``. False, and nothing written, when the
        stored log ends before that seq. Checkpoints are derived data: never required."""
        check_session_id(session_id)
        self._check_writable(f"checkpoint session {session_id!r}")
        if type(keep) is not int or keep < 1:
            raise ValueError(f"keep must be an int >= 1, got {keep!r}")
        if state.next_seq < 1:
            return False
        seq, text = state.next_seq, state.encode()  # together: the state may grow meanwhile
        now = self._clock()
        tables = self.namespace.tables
        return await self._write_sync(
            f"writing a checkpoint of session {session_id!r}",
            lambda c: checkpoints.write(c, tables, session_id, seq, text, now, keep),
        )

    async def checkpoints(self, session_id: str) -> list[CheckpointInfo]:
        """The session's stored checkpoints, oldest first."""
        check_session_id(session_id)
        found = await self._read(
            f"reading checkpoints of session {session_id!r}", reads.checkpoint_list, session_id
        )
        return [CheckpointInfo(*row) for row in found]

    async def checkpoint_texts(self, session_id: str) -> list[tuple[int, str]]:
        """``(seq, state text)`` of each stored checkpoint, oldest first (what `verify`
        recomputes)."""
        check_session_id(session_id)
        return await self._read(
            f"reading checkpoints of session {session_id!r}", reads.checkpoint_texts, session_id
        )

    async def delete_checkpoints(self, session_id: str) -> int:
        """Delete every checkpoint of a session; how many there were. Changes nothing but the
        speed of `resume_state` and `derive_messages`."""
        check_session_id(session_id)
        self._check_writable(f"delete checkpoints of session {session_id!r}")
        tables = self.namespace.tables
        return await self._write_sync(
            f"deleting checkpoints of session {session_id!r}",
            lambda c: checkpoints.delete_all(c, tables, session_id),
        )

    def _skipped(self, session_id: str, skipped: list[str]) -> None:
        for reason in skipped:
            logger.warning(
                "session %r: %s; passed over (run `todo-sessions verify`)", session_id, reason
            )

    async def resume_state(
        self, session_id: str, *, repair: bool = True, lease: Lease | None = None
    ) -> ResumedState:
        """The live state at the end of the stored log, read from the newest usable checkpoint
        and the events after it, never the whole log; an interrupted last turn is closed
        durably first, as `load` does (``repair=False``: read only; the state then shows the
        open turn). The closers are appended under ``lease`` when one is given. A checkpoint
        that cannot be used is passed over with a warning (the result is the same, only
        slower)."""
        check_session_id(session_id)
        for _ in range(_LOAD_ATTEMPTS):
            found = await self._read(
                f"resuming session {session_id!r}", reads.live_state, session_id
            )
            self._skipped(session_id, found.skipped)
            state, row = found.state, found.row
            closers: list[SessionEvent] = []
            if repair and state.last_time is not None:
                closers = closers_for(
                    state.structure, last_time=state.last_time, session_id=session_id
                )
            revision = self._token(row["incarnation"], row["revision"])
            if closers:
                try:
                    revision = await self.append(session_id, closers, lease=lease)
                except SeqConflictError:
                    continue  # another writer appended meanwhile: look again
                state.apply_all(closers)
            return ResumedState(
                header_from_row(row), state, revision, tuple(closers), found.from_checkpoint
            )
        raise SeqConflictError(
            session_id,
            -1,
            None,
            detail=f"resume kept racing other writers ({_LOAD_ATTEMPTS} tries)",
        )

    # -- crash repair ---------------------------------------------------------------------------

    async def inspect(self, session_id: str) -> StoredLog:
        """The stored log plus, in memory only, the closers of an interrupted last turn.

        ``events`` includes the closers; ``closers`` lists them. Nothing is written.
        """
        log = await self.read(session_id)
        closers = interrupted_turn_closers(log.events, session_id=session_id)
        return StoredLog(log.header, log.events + tuple(closers), log.revision, tuple(closers))

    async def load(self, session_id: str) -> StoredLog:
        """Like `inspect`, but the closers are appended durably first (the revision changes
        once). Loading a log with no open turn writes nothing."""
        for _ in range(_LOAD_ATTEMPTS):
            log = await self.read(session_id)
            closers = interrupted_turn_closers(log.events, session_id=session_id)
            if not closers:
                return log
            try:
                revision = await self.append(session_id, closers)
            except SeqConflictError:
                continue  # another writer appended meanwhile: look again
            return StoredLog(log.header, log.events + tuple(closers), revision, tuple(closers))
        raise SeqConflictError(
            session_id, -1, None, detail=f"load kept racing other writers ({_LOAD_ATTEMPTS} tries)"
        )

    # -- fork -----------------------------------------------------------------------------------

    async def fork(
        self,
        source_id: str,
        boundary: int | None = None,
        child_id: str | None = None,
        *,
        title: str | None = None,
    ) -> StoredLog:
        """A new session seeded with events ``0..boundary`` (default: all) of ``source_id``,
        followed by ``session/end-seed``. The prefix may not end inside an open turn."""
        log = await self.read(source_id)
        end = len(log.events) - 1 if boundary is None else boundary
        if type(end) is not int or not 0 <= end < len(log.events):
            raise ValueError(
                f"fork boundary {boundary!r} is outside session {source_id!r} "
                f"(seqs 0..{len(log.events) - 1})"
            )
        prefix = log.events[: end + 1]
        state = StructureChecker()
        for event in prefix:
            state.advance(event)
        if state.open_turn is not None:
            raise StructureError(
                f"cannot fork session {source_id!r} at seq {end}: turn {state.open_turn} "
                "is still open there",
                seq=end,
                rule="fork-inside-turn",
            )
        source = log.header
        header = SessionHeader(
            id=child_id or f"{source_id[:150]}-fork-{uuid.uuid4().hex[:12]}",
            created_at=self._clock(),
            cwd=source.cwd,
            parent_session=source_id,
            seed_length=len(prefix),
            origin=source.origin,
            delegation_depth=source.delegation_depth,
            title=title if title is not None else source.title,
        )
        seed = SessionEvent("session/end-seed", len(prefix), prefix[-1].time, {})
        await self.create(header)
        revision = await self.append(header.id, [*prefix, seed])
        return StoredLog(header, (*prefix, seed), revision)

    # -- streams --------------------------------------------------------------------------------

    async def stream(
        self, session_id: str, from_seq: int = 0, *, page_size: int | None = None
    ) -> AsyncIterator[SessionEvent]:
        """Like `read_from`, as an async iterator reading ``page_size`` events per query.

        Each page is its own short read transaction, so no transaction stays open while the
        caller works, and memory stays flat for any session size.
        """
        reads.check_from_seq(from_seq)
        async for event in self._pages(session_id, from_seq, page_size or self.page_size, None):
            yield event

    async def follow(
        self,
        session_id: str,
        from_seq: int = 0,
        *,
        poll_interval: float = 0.05,
        page_size: int | None = None,
        reconnect_timeout: float = 30.0,
    ) -> AsyncIterator[SessionEvent]:
        """The stored events from ``from_seq``, then each new one as any process appends it,
        in seq order with no gaps or duplicates. Runs until the caller stops iterating (or the
        session is deleted: `SessionNotFoundError`). Closing the iterator releases what it
        holds.

        On PostgreSQL a follower sleeps until a notification for the session (all followers of
        a store share one listening connection outside the pool); on SQLite it polls every
        ``poll_interval`` seconds.

        A lost connection does not end it: the follower reconnects and goes on from the last
        event it yielded. Only when the database stays unreachable for ``reconnect_timeout``
        seconds does it raise `StoreUnavailableError` (a `StoreError`).
        """
        reads.check_from_seq(from_seq)
        if reconnect_timeout < 0:
            raise ValueError("reconnect_timeout must be >= 0")
        size = page_size or self.page_size
        recorder = await self._ready()
        async with recorder.wait_for_append(session_id) as wait:
            pages = self._pages(
                session_id, from_seq, size, lambda: wait(poll_interval), reconnect_timeout
            )
            async for event in pages:
                yield event

    async def _pages(
        self,
        session_id: str,
        from_seq: int,
        size: int,
        wait: Callable[[], Awaitable[Any]] | None,
        reconnect_timeout: float = 0.0,
    ) -> AsyncIterator[SessionEvent]:
        """Events from ``from_seq``, a page (one short read transaction) at a time; at the end
        of the log, stop (``wait`` None) or wait and read on. While the database is unreachable
        the page is retried with backoff, for at most ``reconnect_timeout`` seconds."""
        seq = from_seq
        lost_since: float | None = None
        pause = _RECONNECT_FIRST_PAUSE

        async def back_off(exc: StoreUnavailableError) -> None:
            nonlocal lost_since, pause
            now = time.monotonic()
            lost_since = now if lost_since is None else lost_since
            if now - lost_since >= reconnect_timeout:
                raise StoreUnavailableError(
                    f"following session {session_id!r}: the database stayed unreachable for "
                    f"{reconnect_timeout:g} s; the last event yielded was seq {seq - 1} ({exc})"
                ) from exc
            await asyncio.sleep(pause)
            pause = min(pause * 2, _RECONNECT_MAX_PAUSE)

        while True:
            try:
                page = (await self._read_events(session_id, seq, size))[1]
            except StoreUnavailableError as exc:
                if wait is None:
                    raise
                await back_off(exc)
                continue
            lost_since, pause = None, _RECONNECT_FIRST_PAUSE
            for event in page:
                yield event
            seq += len(page)
            if len(page) < size:
                if wait is None:
                    return
                try:
                    await wait()
                except StoreUnavailableError as exc:
                    await back_off(exc)

    # -- integrity --------------------------------------------------------------------------

    async def check_database(self) -> list[str]:
        """The database engine's own integrity check (SQLite: ``PRAGMA integrity_check``):
        each problem it reports, or ``[]`` when it finds none. Changes nothing."""
        recorder = await self._ready()
        with translate_errors("checking the database"):
            return await recorder.check_integrity()

    async def session_ids(
        self, *, source: Literal["sessions", "events"] = "sessions", page_size: int = 1000
    ) -> AsyncIterator[str]:
        """Every stored session id in id order, paged. ``source="events"`` reads the ids from
        the event rows themselves: it also finds events whose session row is missing."""
        after = ""
        while True:
            page = await self._read(
                "listing session ids", reads.session_ids, source, after, page_size
            )
            for session_id in page:
                yield session_id
            if len(page) < page_size:
                return
            after = page[-1]

    async def seqs_past_end(self, session_id: str, *, limit: int = 100) -> list[int]:
        """Seqs of event rows at or after the session's stored next seq (at most ``limit``).
        A healthy log has none: such rows were written outside todo_sessions."""
        check_session_id(session_id)
        return await self._read(
            f"reading session {session_id!r}", reads.seqs_past_end, session_id, limit
        )

    # -- escape hatch for tests and tools -----------------------------------------------------

    async def _run_sync(self, fn: Callable[[Connection], T], *, write: bool = False) -> T:
        """Run ``fn(sync SQLAlchemy connection)`` in one transaction (maintenance and tests)."""
        recorder = await self._ready()
        with translate_errors("running a maintenance function"):
            return await recorder.run_sync(fn, write=write)

    # -- session metadata -----------------------------------------------------------------------

    async def update_meta(
        self,
        session_id: str,
        *,
        title: str | EllipsisType | None = ...,
        tags: Iterable[str] | None = None,
        add_tags: Iterable[str] = (),
        remove_tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        lease: Lease | None = None,
    ) -> SessionSummary:
        """Append one ``session/meta`` event to a stored session that changes what is asked
        (docs/format.md, "Session metadata"): ``title`` (None clears it; ``...``, the default,
        keeps it), ``tags`` (replaces them), ``add_tags`` / ``remove_tags`` (applied to the
        current tags, keeping their order; new ones go last), ``metadata`` (replaces it).
        Nothing is appended when nothing would change. Returns the summary after the change.
        The event is marked ``ignorable``, so readers that do not know the type skip it.

        The event goes at the stored next seq; when another writer appends meanwhile the
        current tags are read again and the event recomputed (a `SeqConflictError` only after
        five tries). A session owned live by a service must be changed through that service
        (its next flush would meet a conflict): pass its ``lease``, or use its session.
        """
        check_session_id(session_id)
        new_tags = None if tags is None else list(tags)
        adding, removing = list(add_tags), set(remove_tags)
        for _ in range(_LOAD_ATTEMPTS):
            current = await self.summary(session_id)
            data: dict[str, Any] = {}
            if title is not ... and title != current.title:
                data["title"] = title
            wanted = list(current.tags) if new_tags is None else list(new_tags)
            wanted += [t for t in dict.fromkeys(adding) if t not in wanted]
            wanted = [t for t in wanted if t not in removing]
            if tuple(wanted) != current.tags:
                data["tags"] = wanted
            if metadata is not None and dict(metadata) != dict(current.metadata):
                data["metadata"] = dict(metadata)
            if not data:
                return current
            # ignorable: a reader without the type (an older version, the TypeScript
            # harness) keeps and skips it; the log means the same to the model either way
            event = SessionEvent(META_TYPE, current.next_seq, self._clock(), data, ignorable=True)
            try:
                await self.append(session_id, [event], lease=lease)
            except SeqConflictError:
                continue  # another writer appended meanwhile: look again
            return await self.summary(session_id)
        raise SeqConflictError(
            session_id,
            -1,
            None,
            detail=f"update_meta kept racing other writers ({_LOAD_ATTEMPTS} tries)",
        )

    async def usage(self, session_id: str) -> SessionUsage:
        """The ``usage`` objects of the session's ``assistant/message`` events added up, in
        all and per turn (`SessionUsage`), read through the type index."""
        check_session_id(session_id)
        found = await self._read(
            f"reading usage of session {session_id!r}", reads.usage_payloads, session_id
        )
        total: dict[str, int | float] = {}
        turns: dict[int, dict[str, int | float]] = {}
        counted = 0
        for _seq, data in found:
            usage = data.get("usage") if isinstance(data, dict) else None
            if not isinstance(usage, dict):
                continue
            counted += 1
            add_usage(total, usage)
            turn = data.get("turn")
            if type(turn) is int:
                add_usage(turns.setdefault(turn, {}), usage)
        return SessionUsage(total, turns, counted)

    # -- listing (last: the name shadows the builtin in the class body) ----------------------

    async def list(
        self,
        *,
        limit: int = 100,
        before: SessionSummary | None = None,
        cwd: str | None = None,
        tag: str | None = None,
        since: int | None = None,
        until: int | None = None,
        parent: str | None = None,
        has_open_todos: bool | None = None,
        text: str | None = None,
    ) -> list[SessionSummary]:
        """Sessions with events, newest activity first. Pass a page's last summary as
        ``before`` to get the next page (keyset pagination on ``(updated_at, id)``).

        Filters (None: not filtered; all given ones must hold): ``cwd`` equal; ``tag`` among
        the session's tags; last activity ``since <= updated_at < until`` (epoch ms);
        ``parent`` equal to the header's ``parent_session`` (forks and sub-agent sessions of
        that session); ``has_open_todos``: whether the latest ``todo/write`` holds an item
        pending or in progress (False: none does, or there is no list); ``text``: a substring
        of the title, compared after `str.casefold` (case-insensitive).
        """
        if type(limit) is not int or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        for name, ms in (("since", since), ("until", until)):
            if ms is not None and type(ms) is not int:
                raise TypeError(f"{name} must be an int (epoch ms), got {ms!r}")
        for name, value in (("cwd", cwd), ("tag", tag), ("parent", parent), ("text", text)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str, got {value!r}")
            if value is not None and "\x00" in value:
                raise ValueError(f"{name} must not contain NUL characters")
        if has_open_todos is not None and not isinstance(has_open_todos, bool):
            raise TypeError(f"has_open_todos must be a bool, got {has_open_todos!r}")
        filters = reads.ListFilters(cwd, tag, since, until, parent, has_open_todos, text)
        after = None if before is None else (before.updated_at, before.id)
        rows = await self._read("listing sessions", reads.list_sessions, limit, after, filters)
        return [self._summary(r) for r in rows]
