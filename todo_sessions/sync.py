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

Every public method of `SessionStore` has a blocking twin here with the same name, parameters,
annotations, docstring and errors: real methods, written from the async class by
``python -m todo_sessions._gen_sync`` (a test fails when they are not current), so a type
checker sees ``store.append(...)`` return a ``str``. Async iterators (`stream`, `follow`,
`session_ids`) become blocking iterators that fetch in batches, so iterating costs about one
thread hop per batch (`follow` hands each event over as soon as it is read). `open` has no
twin (the constructor opens the store) and `aclose` is `close`.

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

import functools
import os
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from sqlalchemy.engine import URL

from ._service import SessionService
from ._sync_service import _SyncSessionServiceMethods
from ._sync_store import _SyncSessionStoreMethods
from ._sync_thread import _LoopThread
from .store.namespace import Namespace
from .store.store import SessionStore

__all__ = ["SyncSessionService", "SyncSessionStore"]


class SyncSessionStore(_SyncSessionStoreMethods):
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
    def namespace(self) -> Namespace:
        """Where the store's tables are (``schema=`` / ``table_prefix=``, or the default)."""
        return self._store.namespace

    def close(self) -> None:
        """Close the store and stop its loop thread (`SessionStore.aclose`). Idempotent."""
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


async def _make_store(url: Any, options: dict[str, Any]) -> SessionStore:
    return SessionStore(url, **options)  # made on the loop it will live on


async def _make_service(store: SessionStore, options: dict[str, Any]) -> SessionService:
    return SessionService(store, **options)  # made on the loop it will live on


class SyncSessionService(_SyncSessionServiceMethods):
    """`SessionService` for blocking code, on the private loop thread of a `SyncSessionStore`.

    ``SyncSessionService(store, **options)``: ``store`` is a `SyncSessionStore` (its loop and
    store are used, and closing the service closes it, as `SessionService.aclose` closes its
    store) or a URL (None: the default database) for a new one with default store options but
    ``schema`` / ``table_prefix`` (its namespace; a URL's ``?schema=`` / ``?table_prefix=`` work
    too); ``options`` are `SessionService`'s (``strict``, ``leases``, ``flush_interval`` ...).

    Every public method of `SessionService` is here, blocking and generated from it as
    `SyncSessionStore`'s are (`new`, `resume`, `fork`, `get`, `flush`, `checkpoint`,
    `discard`, `live_ids`, `pending`, `compact`, `prune_tool_results` ...), with two
    differences: `close` without a session id closes the whole service
    (`SessionService.aclose`), and `checkpoint_for` gives a blocking callback. `follow` is
    `SessionStore.follow` as a blocking iterator, on the service's store.
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

    def checkpoint_for(self, session_id: str) -> Callable[[str], None]:
        """A blocking checkpoint callback for one live session."""
        return functools.partial(self.checkpoint, session_id)

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
