"""A blocking API for code without an event loop: `SyncSessionStore`, `SyncSessionService`.

It is a thin layer over `SessionStore`, never a second implementation: the store lives on a
private event loop in a thread of its own, and each method hands the async method to that
loop and waits for its result. One store object, one loop, for the store's whole life, so a
PostgreSQL pool's connections always belong to the loop that made them (calling
``asyncio.run`` per call with one long-lived async store cannot do that).

::

    from todo_sessions.sync import SyncSessionStore

    with SyncSessionStore("sqlite:///sessions.db") as store:
        store.create(SessionHeader(id="s1", created_at=1_764_000_000_000))
        store.append("s1", events)
        print(store.current_todos("s1"))
        for event in store.stream("s1"):
            ...

Every method has the signature and errors of its async namesake. Iterators (`stream`,
`follow`) fetch events in batches, so iterating costs about one thread hop per batch.

`SyncSessionService` is `SessionService` the same way, on the loop thread of its store::

    with SyncSessionService("sqlite:///sessions.db") as service:
        session = service.new(cwd="/repo")
        session.append("turn/start", {"turn": 1})
        service.flush(session.id)

The `Session` objects it hands out are the service's live sessions: their methods run in the
calling thread, in memory. Append to one session from one thread at a time; the service's own
work on it (flushes, checkpoints, its ``flush_interval`` timer) runs on the loop thread and
only reads the events already appended.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Iterator
from types import TracebackType
from typing import Any, Concatenate, Literal, ParamSpec, Self, TypeVar

from sqlalchemy.engine import URL

from .core.envelope import SessionEvent
from .core.header import SessionHeader
from .core.messages import Message
from .core.todos import TodoItem
from .service import SessionService
from .session import Session
from .store.namespace import Namespace
from .store.results import SessionSummary, StoredLog
from .store.store import SessionStore

__all__ = ["SyncSessionService", "SyncSessionStore"]

T = TypeVar("T")
P = ParamSpec("P")

_BATCH = 500


class _LoopThread:
    """An event loop running in a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(started,), name="todo-sessions-sync", daemon=True
        )
        self.thread.start()
        started.wait()

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)  # this thread's own loop; no policy is changed
        self.loop.call_soon(started.set)
        self.loop.run_forever()

    def call(self, awaitable: Awaitable[T]) -> T:
        if threading.current_thread() is self.thread:
            raise RuntimeError("a SyncSessionStore method was called from its own loop thread")

        async def run() -> T:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


async def _take(events: AsyncIterator[SessionEvent], count: int) -> list[SessionEvent]:
    batch: list[SessionEvent] = []
    async for event in events:
        batch.append(event)
        if len(batch) >= count:
            break
    return batch


def _blocking_store(
    method: Callable[Concatenate[SessionStore, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[SyncSessionStore, P], T]:
    """A `SessionStore` coroutine method as a blocking `SyncSessionStore` method (same
    signature, docs and errors), run on the store's loop."""

    @functools.wraps(method)
    def call(self: SyncSessionStore, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._thread.call(method(self._store, *args, **kwargs))

    return call


class SyncSessionStore:
    """`SessionStore` for blocking code. Takes the same arguments; see the module docstring.

    Use it as a context manager, or call `close` when done. It is safe to call from several
    threads: calls run one after another on the store's loop, as concurrent tasks would.
    """

    def __init__(self, url: Any = None, **options: Any) -> None:
        self._thread = _LoopThread()
        try:
            self._store = self._thread.call(_make_store(url, options))
            self._thread.call(self._store.open())
        except BaseException:
            self._thread.stop()
            raise

    @property
    def store(self) -> SessionStore:
        """The async store underneath (use it only on the store's own loop)."""
        return self._store

    @property
    def url(self) -> str:
        return self._store.url

    @property
    def namespace(self) -> Namespace:
        """Where the store's tables are (``schema=`` / ``table_prefix=``, or the default)."""
        return self._store.namespace

    def close(self) -> None:
        """Close the store and stop its loop thread. Idempotent."""
        if self._thread.loop.is_closed():
            return
        try:
            self._thread.call(self._store.aclose())
        finally:
            self._thread.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, method: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        return self._thread.call(method(*args, **kwargs))

    # -- the store's methods, one for one --------------------------------------------------------

    def create(self, header: SessionHeader) -> None:
        self._call(self._store.create, header)

    def append(self, session_id: str, events: Iterable[Any]) -> str:
        return self._call(self._store.append, session_id, list(events))

    def delete(self, session_id: str) -> None:
        self._call(self._store.delete, session_id)

    def read(self, session_id: str) -> StoredLog:
        return self._call(self._store.read, session_id)

    def read_from(
        self, session_id: str, from_seq: int = 0, *, limit: int | None = None
    ) -> list[SessionEvent]:
        return self._call(self._store.read_from, session_id, from_seq, limit=limit)

    def header(self, session_id: str) -> SessionHeader:
        return self._call(self._store.header, session_id)

    def revision(self, session_id: str) -> str:
        return self._call(self._store.revision, session_id)

    def summary(self, session_id: str) -> SessionSummary:
        return self._call(self._store.summary, session_id)

    def count(self, session_id: str, *, type: str | None = None) -> int:
        return self._call(self._store.count, session_id, type=type)

    def current_todos(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> list[TodoItem] | None:
        return self._call(self._store.current_todos, session_id, upto_seq=upto_seq)

    def latest_event(
        self, session_id: str, *types: str, upto_seq: int | None = None
    ) -> SessionEvent | None:
        return self._call(self._store.latest_event, session_id, *types, upto_seq=upto_seq)

    def derive_messages(self, session_id: str, *, upto_seq: int | None = None) -> list[Message]:
        return self._call(self._store.derive_messages, session_id, upto_seq=upto_seq)

    def inspect(self, session_id: str) -> StoredLog:
        return self._call(self._store.inspect, session_id)

    def load(self, session_id: str) -> StoredLog:
        return self._call(self._store.load, session_id)

    def fork(
        self,
        source_id: str,
        boundary: int | None = None,
        child_id: str | None = None,
        *,
        title: str | None = None,
    ) -> StoredLog:
        return self._call(self._store.fork, source_id, boundary, child_id, title=title)

    def check_database(self) -> list[str]:
        return self._call(self._store.check_database)

    def stream(
        self, session_id: str, from_seq: int = 0, *, page_size: int | None = None
    ) -> Iterator[SessionEvent]:
        return self._iterate(self._store.stream(session_id, from_seq, page_size=page_size))

    def follow(
        self,
        session_id: str,
        from_seq: int = 0,
        *,
        poll_interval: float = 0.05,
        page_size: int | None = None,
    ) -> Iterator[SessionEvent]:
        """Like `SessionStore.follow`; each new event is handed over as soon as it is read."""
        events = self._store.follow(
            session_id, from_seq, poll_interval=poll_interval, page_size=page_size
        )
        return self._iterate(events, batch=1)

    def session_ids(self, *, source: Literal["sessions", "events"] = "sessions") -> Iterator[str]:
        ids: AsyncIterator[Any] = self._store.session_ids(source=source)
        return self._iterate(ids)

    list = _blocking_store(SessionStore.list)
    usage = _blocking_store(SessionStore.usage)
    update_meta = _blocking_store(SessionStore.update_meta)
    checkpoints = _blocking_store(SessionStore.checkpoints)
    delete_checkpoints = _blocking_store(SessionStore.delete_checkpoints)
    lease_holders = _blocking_store(SessionStore.lease_holders)

    def _iterate(self, events: AsyncIterator[Any], *, batch: int = _BATCH) -> Iterator[Any]:
        try:
            while True:
                got = self._thread.call(_take(events, batch))
                yield from got
                if len(got) < batch:  # the async iterator ended
                    return
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None and not self._thread.loop.is_closed():
                self._thread.call(aclose())


async def _make_store(url: Any, options: dict[str, Any]) -> SessionStore:
    return SessionStore(url, **options)  # made on the loop it will live on


async def _make_service(store: SessionStore, options: dict[str, Any]) -> SessionService:
    return SessionService(store, **options)  # made on the loop it will live on


async def _now(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    return fn(*args, **kwargs)


def _blocking(
    method: Callable[Concatenate[SessionService, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[SyncSessionService, P], T]:
    """A `SessionService` coroutine method as a blocking `SyncSessionService` method (same
    signature, docs and errors), run on the service's loop."""

    @functools.wraps(method)
    def call(self: SyncSessionService, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._thread.call(method(self._service, *args, **kwargs))

    return call


class SyncSessionService:
    """`SessionService` for blocking code, on the private loop thread of a `SyncSessionStore`.

    ``SyncSessionService(store, **options)``: ``store`` is a `SyncSessionStore` (its loop and
    store are used, and closing the service closes it, as `SessionService.aclose` closes its
    store) or a URL (None: the default database) for a new one with default store options but
    ``schema`` / ``table_prefix`` (its namespace; a URL's ``?schema=`` / ``?table_prefix=`` work
    too); ``options`` are `SessionService`'s (``strict``, ``leases``, ``flush_interval`` ...).

    The methods are `SessionService`'s, blocking: `new`, `resume`, `fork`, `get`, `flush`,
    `checkpoint`, `close` (one session; without an id the whole service, like
    `SessionService.aclose`), `discard`, `live_ids`, `pending`, `compact`,
    `prune_tool_results`, plus `follow` (a blocking iterator, as `SyncSessionStore.follow`).
    See the module docstring about threads.
    """

    def __init__(
        self,
        store: SyncSessionStore | str | URL | os.PathLike[str] | None = None,
        *,
        schema: str | None = None,
        table_prefix: str | None = None,
        **options: Any,
    ) -> None:
        made = not isinstance(store, SyncSessionStore)
        if isinstance(store, SyncSessionStore):
            if schema is not None or table_prefix is not None:
                raise TypeError(
                    "schema and table_prefix belong to the store: pass them to SyncSessionStore"
                )
            self._store = store
        else:
            self._store = SyncSessionStore(store, schema=schema, table_prefix=table_prefix)
        self._thread = self._store._thread
        try:
            self._service = self._thread.call(_make_service(self._store.store, options))
        except BaseException:
            if made:
                self._store.close()
            raise

    @property
    def service(self) -> SessionService:
        """The async service underneath (use it only on the store's own loop)."""
        return self._service

    @property
    def store(self) -> SyncSessionStore:
        """The blocking store the service writes to (the same loop thread)."""
        return self._store

    @property
    def last_flush_error(self) -> BaseException | None:
        return self._service.last_flush_error

    new = _blocking(SessionService.new)
    resume = _blocking(SessionService.resume)
    fork = _blocking(SessionService.fork)
    flush = _blocking(SessionService.flush)
    checkpoint = _blocking(SessionService.checkpoint)
    discard = _blocking(SessionService.discard)
    compact = _blocking(SessionService.compact)
    prune_tool_results = _blocking(SessionService.prune_tool_results)

    def get(self, session_id: str) -> Session:
        """The live session ``session_id`` (`SessionNotFoundError` if it is not live here)."""
        return self._thread.call(_now(self._service.get, session_id))

    def live_ids(self) -> list[str]:
        return self._thread.call(_now(self._service.live_ids))

    def pending(self, session_id: str) -> int:
        """How many events of a live session are not stored yet."""
        return self._thread.call(_now(self._service.pending, session_id))

    def checkpoint_for(self, session_id: str) -> Callable[[str], None]:
        """A blocking checkpoint callback for one live session."""
        return functools.partial(self.checkpoint, session_id)

    def follow(
        self,
        session_id: str,
        from_seq: int = 0,
        *,
        poll_interval: float = 0.05,
        page_size: int | None = None,
    ) -> Iterator[SessionEvent]:
        """The stored events of ``session_id`` from ``from_seq``, then each new one as it is
        stored (by this service's flushes or any other writer); see `SessionStore.follow`."""
        return self._store.follow(
            session_id, from_seq, poll_interval=poll_interval, page_size=page_size
        )

    def close(self, session_id: str | None = None) -> None:
        """With a ``session_id``: flush that live session and stop owning it
        (`SessionService.close`). Without: store every live session, close the store and stop
        the loop thread (`SessionService.aclose`, with its errors). Idempotent."""
        if session_id is not None:
            self._thread.call(self._service.close(session_id))
            return
        if self._thread.loop.is_closed():
            return
        try:
            self._thread.call(self._service.aclose())
        finally:
            self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
