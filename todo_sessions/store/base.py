"""The core of `SessionStore`: the state its parts share (settings, the recorder, the
per-session state of this process), opening and closing, and the one way the parts call the
recorder contract (`StoreCore.call`, which translates driver errors). It is an object the
store and each of its parts hold, not a base class."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Literal, TypeVar

from sqlalchemy.engine import URL

from ..core.chain import derive_key
from ..core.header import SessionHeader
from ..core.jsonvalue import decode_json
from ..core.structure import StructureChecker
from ..errors import CorruptSessionError, StoreError
from .backends import BackendRecorder, check_listen_target, open_recorder, replica_target
from .engine import SQLiteOptions, StoreURL, parse_url
from .migrate import namespace_of, prepare_schema
from .namespace import Namespace
from .options import PostgresOptions
from .recorder import Recorder
from .records import SummaryRow
from .results import SessionSummary, revision_token
from .translate import raise_translated, translate_errors

__all__ = ["StoreCore", "default_url", "wall_clock_ms"]

logger = logging.getLogger("todo_sessions.store")

FAILOVER_TIMEOUT = 15.0
"""``reconnect_timeout`` of a store whose URL names several hosts (one host: 0, fail fast)."""

T = TypeVar("T")


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


class StoreCore:
    """Settings, lifecycle and the recorder of a `SessionStore` (its constructor's arguments,
    see there), shared by the store's parts."""

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
        read_url: str | URL | None = None,
        reconnect_timeout: float | None = None,
        replica_wait: float = 1.0,
        search_index: bool = True,
        chain_key: str | bytes | None = None,
    ) -> None:
        self.chain_key = b"" if chain_key is None else derive_key(chain_key)
        """The hash chain's key (`core.chain.derive_key`; empty: a plain hash)."""
        self.target: StoreURL = parse_url(url if url is not None else default_url())
        self.namespace: Namespace = namespace_of(
            self.target, schema=schema, table_prefix=table_prefix
        )
        listen = parse_url(listen_url) if listen_url is not None else None
        if listen is not None:
            check_listen_target(listen)
        if reconnect_timeout is None:  # several hosts: a failover is expected, wait for it
            reconnect_timeout = FAILOVER_TIMEOUT if self.target.hosts else 0.0
        self.postgres = PostgresOptions(
            pool_size=pool_size,
            listen=listen,
            reconnect_timeout=float(reconnect_timeout),
            replica=replica_target(self.target, read_url),
            replica_wait=float(replica_wait),
        )
        """The PostgreSQL options (`options.PostgresOptions`)."""
        if self.target.read_only:  # ``?mode=ro``
            if read_only is False:
                raise ValueError("read_only=False contradicts mode=ro in the database URL")
            read_only = True
        if read_only is None:  # an existing SQLite file we may not write: read it read-only
            path = self.target.path
            read_only = path is not None and path.is_file() and not _writable(path)
        self.read_only = read_only
        self.sqlite = SQLiteOptions(journal_mode, synchronous, busy_timeout_ms, read_only)
        """The SQLite options (`engine.SQLiteOptions`)."""
        self.strict = strict
        self.migrate = migrate
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        self.page_size = page_size
        self.clock = clock
        self.search_index = bool(search_index)
        self.recorder: BackendRecorder | None = None
        self._store_id = ""
        self.pending: dict[str, SessionHeader] = {}
        self.checkers: dict[str, StructureChecker] = {}
        self.chained_next: dict[str, int] = {}  # `keying.remember`
        self._opening_lock = threading.Lock()
        """Guards ``_opening`` and ``_closed`` (held around no ``await``): a store may be first
        used from several threads at once, each with its own event loop."""
        self._opening: Future[None] | None = None
        """Settled when the open under way ends (a thread-safe future: any loop waits on it)."""
        self._closed = False

    @property
    def url(self) -> str:
        """The database URL (password masked)."""
        return self.target.render()

    @property
    def keyed(self) -> bool:
        """Whether this store chains (and verifies) its events with a key."""
        return bool(self.chain_key)

    @property
    def dialect(self) -> str:
        return self.target.dialect

    @property
    def store_id(self) -> str:
        """The database's random id (part of every revision token). Empty until opened."""
        return self._store_id

    async def open(self) -> None:
        """`SessionStore.open`: calls that race to open the store wait for the first, each on
        its own loop."""
        while self.recorder is None:
            with self._opening_lock:
                if self._closed:
                    raise RuntimeError("this SessionStore is closed")
                if self.recorder is not None:
                    break
                waiting = self._opening
                if waiting is None:
                    opening: Future[None] = Future()
                    self._opening = opening
                    opening.set_running_or_notify_cancel()  # a waiter cancelled cannot cancel it
            if waiting is not None:
                await asyncio.wrap_future(waiting)  # then look again: it may have failed
                continue
            try:
                await self._open_recorder()
            finally:
                with self._opening_lock:
                    self._opening = None
                opening.set_result(None)

    async def _open_recorder(self) -> None:
        recorder = open_recorder(
            self.target,
            sqlite=self.sqlite,
            postgres=self.postgres,
            namespace=self.namespace,
        )
        try:
            with translate_errors(f"opening {self.url}"):
                await recorder.open()
                store_id = await prepare_schema(
                    recorder, migrate=self.migrate, url=self.url, read_only=self.read_only
                )
        except BaseException:
            await recorder.close()
            raise
        with self._opening_lock:
            closed = self._closed
            if not closed:
                self._store_id = store_id
                self.recorder = recorder
        if closed:  # closed while opening
            await recorder.close()
            raise RuntimeError("this SessionStore is closed")

    async def aclose(self) -> None:
        """`SessionStore.aclose`."""
        with self._opening_lock:
            self._closed = True
            recorder, self.recorder = self.recorder, None
        if recorder is not None:
            await recorder.close()

    async def ready(self) -> BackendRecorder:
        """The open recorder (the store opened first if it is not)."""
        recorder = self.recorder
        if recorder is None:
            await self.open()
            recorder = self.recorder
            if recorder is None:  # closed while opening
                raise RuntimeError("this SessionStore is closed")
        return recorder

    def check_writable(self, what: str) -> None:
        if self.read_only:
            raise StoreError(f"cannot {what}: {self.url} is open read-only")

    def token(self, incarnation: str, revision: int) -> str:
        return revision_token(self._store_id, incarnation, revision)

    async def call(self, what: str, operation: Callable[[Recorder], Awaitable[T]]) -> T:
        """Run one operation of the recorder contract (``operation(recorder)``), its driver
        errors translated as doing ``what``."""
        recorder = self.recorder
        if recorder is None:
            recorder = await self.ready()
        try:
            return await operation(recorder)
        except Exception as exc:  # translated on the error path only: reads are hot paths
            raise_translated(exc, what)

    def summary(self, r: SummaryRow) -> SessionSummary:
        tags, metadata = r.tags, r.metadata
        try:
            return SessionSummary(
                id=r.id,
                created_at=r.created_at,
                updated_at=r.updated_at,
                cwd=r.cwd,
                title=r.title,
                next_seq=r.next_seq,
                revision=self.token(r.incarnation, r.revision),
                parent=r.parent_session,
                tags=() if tags is None else tuple(decode_json(tags, strict=False)),
                metadata={} if metadata is None else decode_json(metadata, strict=False),
                open_todos=bool(r.open_todos),
            )
        except (ValueError, TypeError) as exc:
            raise CorruptSessionError(r.id, None, f"stored tags or metadata: {exc}") from None

    def skipped(self, session_id: str, skipped: list[str]) -> None:
        for reason in skipped:
            logger.warning(
                "session %r: %s; passed over (run `todo-sessions verify`)", session_id, reason
            )
