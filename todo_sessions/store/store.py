"""`SessionStore`: the session log on SQLite or PostgreSQL (SPEC §7, §8, §12, §14).

The store is the only code that talks to a database. It returns values (`SessionEvent`,
`StoredLog`, `SessionSummary`), never rows or connections, and it translates every driver
exception at this boundary (`translate_errors`). Transactions are short and never span an
``await`` of caller code.
"""

from __future__ import annotations

import asyncio
import copy
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..core.catalog import FORMAT_VERSION, validate_event
from ..core.envelope import SessionEvent
from ..core.header import SessionHeader, check_session_id
from ..core.structure import StructureChecker
from ..errors import (
    InvalidEventError,
    SchemaError,
    SeqConflictError,
    SessionExistsError,
    SessionNotFoundError,
    StoreError,
)
from . import queries as q
from . import reads
from .append import AppendOutcome, check_batch_start, new_session_values
from .codec import event_row, header_from_row, header_row
from .engine import SQLiteOptions, StoreURL, begin_write, make_engine, parse_url
from .gcpause import paused_gc
from .migrate import _upgrade, check_not_foreign, check_revision, head_revision, run_locked
from .postgres import append_asyncpg
from .reads import AsyncpgRows, CoreRows
from .results import SessionSummary, StoredLog, revision_token
from .schema import sessions
from .sqlite import SQLiteReader, SQLiteWriter
from .tail import LogTail, PgListener
from .translate import is_unique_violation, translate_errors
from .views import LogViews

__all__ = ["SessionStore", "default_url"]

EventInput = SessionEvent | Mapping[str, Any]
T = TypeVar("T")


def default_url() -> str:
    """``TODO_SESSIONS_URL``, else an SQLite file in the user's data directory."""
    env = os.environ.get("TODO_SESSIONS_URL")
    if env:
        return env
    from platformdirs import user_data_path

    return f"sqlite:///{user_data_path('todo-sessions') / 'sessions.db'}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class SessionStore(LogViews, LogTail):
    """The append-only session log.

    ``SessionStore(url)`` takes a SQLAlchemy-style URL (``sqlite:///path``,
    ``postgresql://user@host/db``) or a plain file path; with no URL it uses
    ``TODO_SESSIONS_URL`` or an SQLite file in the user's data directory. Use it as an async
    context manager (or call `open` / `aclose`). Opening migrates the database to the newest
    schema unless ``migrate=False``, in which case an unmigrated database raises `SchemaError`.

    SQLite settings: ``journal_mode`` (WAL), ``synchronous`` ("FULL" or "NORMAL"),
    ``busy_timeout_ms`` (5000).
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
    ) -> None:
        self._target: StoreURL = parse_url(url if url is not None else default_url())
        self._sqlite = SQLiteOptions(journal_mode, synchronous, busy_timeout_ms)
        self.strict = strict
        self._migrate = migrate
        self._pool_size = pool_size
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        self.page_size = page_size
        self._engine: AsyncEngine | None = None
        self._writer: SQLiteWriter | None = None
        self._reader: SQLiteReader | None = None
        self._store_id = ""
        self._pending: dict[str, SessionHeader] = {}
        self._checkers: dict[str, StructureChecker] = {}
        self._open_lock = asyncio.Lock()
        # An in-memory SQLite database is one connection: serialise everything on it.
        self._memory_lock = asyncio.Lock() if self._target.memory else None
        self._closed = False
        self._pg_listener: PgListener | None = None

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
        """Connect, check (and by default migrate) the schema. Idempotent."""
        async with self._open_lock:
            if self._closed:
                raise RuntimeError("this SessionStore is closed")
            if self._engine is not None:
                return self
            engine = make_engine(self._target, sqlite=self._sqlite, pool_size=self._pool_size)
            try:
                with translate_errors(f"opening {self.url}"):
                    await self._prepare_schema(engine)
                    async with engine.connect() as conn:
                        store_id = (await conn.execute(q.select_store_id)).scalar_one_or_none()
                if store_id is None:
                    raise SchemaError(f"{self.url}: store_state has no store id; not our database")
            except TypeError as exc:  # the driver refused a query parameter of the URL
                await engine.dispose()
                if "unexpected keyword argument" not in str(exc):
                    raise
                raise StoreError(f"{self.url}: unsupported URL parameter ({exc})") from exc
            except BaseException:
                await engine.dispose()
                raise
            self._store_id = store_id
            if self._target.path is not None:
                self._writer = SQLiteWriter(self._target.path, self._sqlite)
                self._reader = SQLiteReader(self._target.path, self._sqlite)
            self._engine = engine
            return self

    async def _prepare_schema(self, engine: AsyncEngine) -> None:
        async with engine.connect() as conn:
            revision = await conn.run_sync(check_revision)
            if revision is None:
                await conn.run_sync(check_not_foreign)
        if revision == head_revision():
            return
        if not self._migrate:
            state = "not migrated" if revision is None else f"at revision {revision!r}"
            raise SchemaError(
                f"{self.url} is {state}; run `todo-sessions migrate` or open the store "
                "with migrate=True"
            )
        await run_locked(engine, _upgrade)

    async def aclose(self) -> None:
        """Close connections. Pending (never appended) creates are forgotten."""
        self._closed = True
        writer, reader, engine = self._writer, self._reader, self._engine
        self._writer = self._reader = None
        self._engine = None
        if self._pg_listener is not None:
            await self._pg_listener.close()
            self._pg_listener = None
        if writer is not None:
            await writer.close()
        if reader is not None:
            await reader.close()
        if engine is not None:
            await engine.dispose()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _ready(self) -> AsyncEngine:
        if self._engine is None:
            await self.open()
        assert self._engine is not None
        return self._engine

    def _read_conn(self, engine: AsyncEngine) -> _Conn:
        return _Conn(engine, self._memory_lock, write=False)

    def _write_conn(self, engine: AsyncEngine) -> _Conn:
        return _Conn(engine, self._memory_lock, write=True)

    def _token(self, incarnation: str, revision: int) -> str:
        return revision_token(self._store_id, incarnation, revision)

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
        engine = await self._ready()
        if header.id in self._pending:
            raise SessionExistsError(header.id)
        with translate_errors(f"creating session {header.id!r}"):
            async with self._read_conn(engine) as conn:
                found = (await conn.execute(q.select_header, {"session_id": header.id})).first()
        if found is not None:
            raise SessionExistsError(header.id)
        self._pending[header.id] = header

    async def append(self, session_id: str, events: Iterable[EventInput]) -> str:
        """Append a contiguous batch starting at the stored next seq, all or nothing.

        Returns the new revision token. Raises `SeqConflictError` when the batch does not start
        at the stored next seq (another writer was first, or a replay), `InvalidEventError` for
        a malformed event, `SessionNotFoundError` for an id with neither a stored log nor a
        pending `create`. An empty batch writes nothing and returns the current token.
        """
        batch = [e if isinstance(e, SessionEvent) else SessionEvent.from_dict(e) for e in events]
        return await self._append(session_id, batch, validate=True)

    async def _append(self, session_id: str, batch: list[SessionEvent], *, validate: bool) -> str:
        """`append` proper. ``validate=False`` is for callers in this package that have just
        run `validate_event` on every event themselves (the JSONL import)."""
        check_session_id(session_id)
        engine = await self._ready()
        if not batch:
            return await self._current_token(engine, session_id)
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
            if validate:
                validate_event(event)
        checker = await self._strict_checker(session_id, batch) if self.strict else None
        rows = [event_row(session_id, e) for e in batch]
        pending = self._pending.get(session_id)
        header = header_row(pending) if pending is not None else None
        now = _now_ms()
        with translate_errors(f"appending to session {session_id!r}"):
            try:
                if self._writer is not None:
                    incarnation, revision, _ = await self._writer.append(
                        session_id, rows, header, now
                    )
                elif self.dialect == "postgresql":
                    async with engine.connect() as conn:
                        raw = await conn.get_raw_connection()
                        incarnation, revision, _ = await append_asyncpg(
                            raw.driver_connection, session_id, rows, header, now
                        )
                else:
                    incarnation, revision, _ = await self._append_core(
                        engine, session_id, rows, header, now
                    )
            except Exception as exc:
                if is_unique_violation(exc):
                    raise SeqConflictError(
                        session_id, first, None, detail="which a concurrent writer stored first"
                    ) from exc
                raise
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

    async def _append_core(
        self,
        engine: AsyncEngine,
        session_id: str,
        rows: Sequence[dict[str, Any]],
        header: dict[str, Any] | None,
        now: int,
    ) -> AppendOutcome:
        async with self._write_conn(engine) as conn:
            state = (await conn.execute(q.append_state, {"session_id": session_id})).first()
            if state is None:
                if header is None:
                    raise SessionNotFoundError(session_id, "create it before the first append")
                insert = q.insert_session(conn.dialect.name)
                await conn.execute(insert, new_session_values(header, now))
                state = (await conn.execute(q.append_state, {"session_id": session_id})).first()
                assert state is not None
            next_seq, revision, incarnation = state
            check_batch_start(session_id, rows[0]["seq"], next_seq)
            await conn.execute(q.insert_events, list(rows))
            new_next = next_seq + len(rows)
            await conn.execute(
                q.update_after_append,
                {
                    "b_next_seq": new_next,
                    "b_revision": revision + 1,
                    "b_updated_at": now,
                    "b_id": session_id,
                },
            )
        return incarnation, revision + 1, new_next

    async def delete(self, session_id: str) -> None:
        """Remove a session and all its events (the only way rows ever leave)."""
        check_session_id(session_id)
        engine = await self._ready()
        pending = self._pending.pop(session_id, None)
        self._checkers.pop(session_id, None)
        with translate_errors(f"deleting session {session_id!r}"):
            async with self._write_conn(engine) as conn:
                result = await conn.execute(sessions.delete().where(sessions.c.id == session_id))
        if result.rowcount == 0 and pending is None:
            raise SessionNotFoundError(session_id)

    # -- reading --------------------------------------------------------------------------------

    async def _current_token(self, engine: AsyncEngine, session_id: str) -> str:
        with translate_errors(f"reading session {session_id!r}"):
            async with self._read_conn(engine) as conn:
                row = (await conn.execute(q.select_header, {"session_id": session_id})).first()
        if row is not None:
            return self._token(row.incarnation, row.revision)
        if session_id in self._pending:
            return self._token("", 0)
        raise SessionNotFoundError(session_id)

    async def _listener(self) -> PgListener:
        """The store's LISTEN connection for `follow` (PostgreSQL), opened on first use."""
        if self._pg_listener is None:
            dsn = self._target.url.set(drivername="postgresql")
            self._pg_listener = PgListener(
                dsn.render_as_string(hide_password=False), self._target.connect_args
            )
        await self._pg_listener.ensure_connected()
        return self._pg_listener

    async def _read(self, what: str, op: Callable[..., T], *args: Any) -> T:
        """Run a read operation of `reads` in one read transaction: in a reader thread on a
        SQLite file, else through ``run_sync`` on a pooled SQLAlchemy connection."""
        check_session_id(args[0])  # every read is of one session
        engine = await self._ready()
        with translate_errors(what):
            if self._reader is not None:
                return await self._reader.run(op, *args)
            async with self._read_conn(engine) as conn:
                return await conn.run_sync(_with_rows, op, args)

    async def _read_events(
        self, session_id: str, from_seq: int, limit: int | None = None
    ) -> tuple[dict[str, Any], list[SessionEvent]]:
        return await self._read(
            f"reading session {session_id!r}", reads.read_events, session_id, from_seq, limit
        )

    async def read_from(self, session_id: str, from_seq: int = 0) -> list[SessionEvent]:
        """The stored events with ``seq >= from_seq``, exactly as stored."""
        reads.check_from_seq(from_seq)
        return (await self._read_events(session_id, from_seq))[1]

    async def read(self, session_id: str) -> StoredLog:
        """Header, every event and the revision token, read in one transaction."""
        row, events = await self._read_events(session_id, 0)
        return StoredLog(
            header_from_row(row), tuple(events), self._token(row["incarnation"], row["revision"])
        )

    async def _session(self, session_id: str) -> dict[str, Any]:
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
        return self._summary(await self._session(session_id))

    async def count(self, session_id: str, *, type: str | None = None) -> int:
        """How many events the session has (of one ``type``, through the type index)."""
        return await self._read(
            f"counting events of session {session_id!r}", reads.count_of_type, session_id, type
        )

    def _summary(self, r: Any) -> SessionSummary:
        return SessionSummary(
            id=r["id"],
            created_at=r["created_at"],
            updated_at=r["updated_at"],
            cwd=r["cwd"],
            title=r["title"],
            next_seq=r["next_seq"],
            revision=self._token(r["incarnation"], r["revision"]),
        )

    async def list(
        self, *, limit: int = 100, before: SessionSummary | None = None
    ) -> list[SessionSummary]:
        """Sessions with events, newest activity first. Pass a page's last summary as
        ``before`` to get the next page (keyset pagination)."""
        if type(limit) is not int or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        engine = await self._ready()
        params: dict[str, Any] = {"limit": limit}
        if before is not None:
            params.update(b_updated_at=before.updated_at, b_id=before.id)
        with translate_errors("listing sessions"):
            async with self._read_conn(engine) as conn:
                result = await conn.execute(q.select_summaries(before=before is not None), params)
                rows = result.mappings().all()
        return [self._summary(r) for r in rows]

    # -- escape hatch for tests and tools -----------------------------------------------------

    async def _run_sync(self, fn: Any, *, write: bool = False) -> Any:
        """Run ``fn(sync_connection)`` in one transaction (maintenance and tests only)."""
        engine = await self._ready()
        with translate_errors("running a maintenance function"):
            async with _Conn(engine, self._memory_lock, write=write) as conn:
                return await conn.run_sync(fn)


def _with_rows(sync_conn: Any, op: Callable[..., T], args: tuple[Any, ...]) -> T:
    if sync_conn.dialect.name != "postgresql":
        with paused_gc():
            return op(CoreRows(sync_conn), *args)
    rows = AsyncpgRows(sync_conn)
    if not getattr(op, "snapshot", True):
        return op(rows, *args)
    # The reads run on the driver, outside SQLAlchemy's (lazy, never started) transaction:
    # give them one snapshot of their own.
    rows.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    try:
        with paused_gc():
            return op(rows, *args)
    finally:
        rows.execute("ROLLBACK")


class _Conn:
    """``async with _Conn(engine, lock, write=...) as conn``: one short transaction.

    Writes take the write lock up front (``BEGIN IMMEDIATE`` on SQLite). For an in-memory
    SQLite database every transaction also holds the store's lock, since there is only one
    connection.
    """

    def __init__(self, engine: AsyncEngine, lock: asyncio.Lock | None, *, write: bool) -> None:
        self._engine = engine
        self._lock = lock
        self._write = write
        self._conn: AsyncConnection | None = None
        self._tx: Any = None

    async def __aenter__(self) -> AsyncConnection:
        if self._lock is not None:
            await self._lock.acquire()
        try:
            conn = await self._engine.connect()
            if self._write:
                conn = await begin_write(conn)
            self._conn = conn
            self._tx = await conn.begin()
        except BaseException:
            await self._release()
            raise
        return conn

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if self._tx is not None:
                if exc_type is None:
                    await self._tx.commit()
                else:
                    await self._tx.rollback()
        finally:
            await self._release()

    async def _release(self) -> None:
        try:
            if self._conn is not None:
                await self._conn.close()
        finally:
            if self._lock is not None:
                self._lock.release()
