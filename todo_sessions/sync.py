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
docstring and errors: the twins are generated from the async class (`_twins`), so a method or
parameter added there is here too. Async iterators (`stream`, `follow`, `session_ids`) become
blocking iterators that fetch in batches, so iterating costs about one thread hop per batch
(`follow` hands each event over as soon as it is read). `open` has no twin (the constructor
opens the store) and `aclose` is `close`.

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
import inspect
import os
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, Self, TypeVar

from sqlalchemy.engine import URL

from .service import SessionService
from .store.namespace import Namespace
from .store.store import SessionStore

__all__ = ["SyncSessionService", "SyncSessionStore"]

T = TypeVar("T")
P = ParamSpec("P")
C = TypeVar("C", bound=type)

_BATCH = 500

# Async iterators that wait for what comes next: their twins hand each item over as soon as it
# is read instead of filling a batch first.
_LIVE_ITERATORS = frozenset({"follow"})


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

    def iterate(self, items: AsyncIterator[T], batch: int) -> Iterator[T]:
        """``items`` as a blocking iterator, ``batch`` items per thread hop; closing it (or
        leaving a ``for`` loop early) closes ``items`` on the loop."""
        try:
            while True:
                got = self.call(_take(items, batch))
                yield from got
                if len(got) < batch:  # the async iterator ended
                    return
        finally:
            aclose = getattr(items, "aclose", None)
            if aclose is not None and not self.loop.is_closed():
                self.call(aclose())

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


async def _take(items: AsyncIterator[T], count: int) -> list[T]:
    batch: list[T] = []
    async for item in items:
        batch.append(item)
        if len(batch) >= count:
            break
    return batch


async def _now(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    return fn(*args, **kwargs)


# -- the twins: generated from the async classes ------------------------------------------------


def _public_members(cls: type) -> dict[str, Any]:
    """The public methods (plain, coroutine, async generator) and properties of ``cls`` and
    its bases, as defined (not bound)."""
    found: dict[str, Any] = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        member = inspect.getattr_static(cls, name)
        if isinstance(member, property) or inspect.isfunction(member):
            found[name] = member
    return found


_ASYNC_ITERATOR = re.compile(r"(?:typing\.|collections\.abc\.)?Async(?:Iterator|Generator)\[(.*)\]")


def _iterator_annotation(annotation: Any, namespace: dict[str, Any]) -> tuple[Any, Any]:
    """An async iterator's return annotation as the blocking iterator's: for the signature
    (a string, as written) and for `typing.get_type_hints` (resolved where it can be)."""
    if not isinstance(annotation, str):
        return annotation, annotation
    match = _ASYNC_ITERATOR.fullmatch(annotation)
    if match is None:
        return annotation, annotation
    item = match.group(1).split(",")[0].strip()  # AsyncGenerator[X, None] yields X too
    written = f"Iterator[{item}]"
    try:
        resolved = eval(item, namespace)
    except Exception:  # a name only imported for type checkers: leave it a string
        return written, written
    return written, Iterator[resolved]  # type: ignore[valid-type]


def _twin(name: str, member: Any, owner: str, cls_name: str) -> Any:
    """The blocking twin of one public member of an async class, for a sync class whose
    attribute ``owner`` holds the async object and ``_thread`` its `_LoopThread`.

    Coroutine methods run on the loop; async generators become blocking iterators; plain
    methods run on the loop too (they read state the loop's tasks change); properties read
    through. The twin keeps the name, docstring, parameters and annotations."""
    if isinstance(member, property):

        def read(self: Any) -> Any:
            return getattr(getattr(self, owner), name)

        return property(read, doc=member.__doc__)

    signature = inspect.signature(member)
    annotations = dict(member.__annotations__)
    if inspect.iscoroutinefunction(member):

        def call(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            return self._thread.call(getattr(getattr(self, owner), name)(*args, **kwargs))

    elif inspect.isasyncgenfunction(member):
        batch = 1 if name in _LIVE_ITERATORS else _BATCH

        def call(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            items = getattr(getattr(self, owner), name)(*args, **kwargs)
            return self._thread.iterate(items, batch)

        written, resolved = _iterator_annotation(signature.return_annotation, member.__globals__)
        signature = signature.replace(return_annotation=written)
        annotations["return"] = resolved
    else:

        def call(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            return self._thread.call(_now(getattr(getattr(self, owner), name), *args, **kwargs))

    call.__name__ = name
    call.__qualname__ = f"{cls_name}.{name}"
    call.__doc__ = member.__doc__ or f"`{member.__qualname__}`, blocking."
    call.__module__ = __name__
    call.__annotations__ = annotations
    call.__signature__ = signature  # type: ignore[attr-defined]
    call.__wrapped__ = member  # type: ignore[attr-defined]  # its module resolves the hints
    return call


def _twins(
    async_cls: type,
    owner: str,
    *,
    not_here: dict[str, str],
    also: dict[str, tuple[type, str]] | None = None,
) -> Callable[[C], C]:
    """A class decorator giving the sync class a twin of every public member of ``async_cls``
    it does not define itself. ``not_here`` names members left out on purpose (with why);
    ``also`` adds twins of other classes' members: name → (class, owner attribute)."""

    def decorate(cls: C) -> C:
        wanted = [(n, m, owner) for n, m in _public_members(async_cls).items() if n not in not_here]
        for name, (other, via) in (also or {}).items():
            wanted.append((name, _public_members(other)[name], via))
        for name, member, via in wanted:
            if name not in cls.__dict__:
                setattr(cls, name, _twin(name, member, via, cls.__name__))
        return cls

    return decorate


# -- the classes ----------------------------------------------------------------------------------


@_twins(
    SessionStore,
    "_store",
    not_here={"open": "the constructor opens the store", "aclose": "`close`"},
)
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

    if TYPE_CHECKING:  # the generated twins, for type checkers: SessionStore's, blocking

        def __getattr__(self, name: str) -> Any: ...


async def _make_store(url: Any, options: dict[str, Any]) -> SessionStore:
    return SessionStore(url, **options)  # made on the loop it will live on


async def _make_service(store: SessionStore, options: dict[str, Any]) -> SessionService:
    return SessionService(store, **options)  # made on the loop it will live on


@_twins(
    SessionService,
    "_service",
    not_here={"aclose": "`close` without a session id"},
    also={"follow": (SessionStore, "_async_store")},
)
class SyncSessionService:
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
    def _async_store(self) -> SessionStore:
        return self._service.store

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

    if TYPE_CHECKING:  # the generated twins, for type checkers: SessionService's, blocking

        def __getattr__(self, name: str) -> Any: ...
