"""An async `SessionStore` used from another event loop than the one that opened it.

PostgreSQL connections belong to the loop that made them: the store refuses another loop with
a `StoreError` that says so, at every entry point, never the driver's raw ``RuntimeError``.
SQLite stores hand each call to their own threads and settle the result on the caller's loop,
so they keep working from any loop (docs/design.md, "The blocking API").
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from factories import header, turn

from todo_sessions import SessionService, SessionStore, StoreError, SyncSessionStore

T = TypeVar("T")

MESSAGE = "opened on another event loop"


class LoopThread:
    """Loop A: an event loop running in a thread of its own for the whole test."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, make: Callable[[], Awaitable[T]]) -> T:
        async def wrapped() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


@pytest.fixture
def loop_a() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.stop()


@pytest.fixture
def pg_url(pg_server_url: str) -> Iterator[str]:
    from conftest import scratch_database

    with scratch_database(pg_server_url, "todo_sessions_xloop") as url:
        yield url


async def first_event(store: SessionStore, session_id: str) -> Any:
    async for event in store.follow(session_id):
        return event
    return None


ENTRY_POINTS: dict[str, Callable[[SessionStore], Awaitable[Any]]] = {
    "open": lambda s: s.open(),
    "append": lambda s: s.append("s", turn(6, 2)),
    "create": lambda s: s.create(header("other")),
    "read": lambda s: s.read("s"),
    "count": lambda s: s.count("s"),
    "list": lambda s: s.list(),
    "current_todos": lambda s: s.current_todos("s"),
    "load": lambda s: s.load("s"),
    "fork": lambda s: s.fork("s"),
    "delete": lambda s: s.delete("s"),
    "follow": lambda s: first_event(s, "s"),
    "acquire_lease": lambda s: s.acquire_lease("s", "me"),
}


async def test_postgres_refuses_another_loop_with_a_store_error(
    pg_url: str, loop_a: LoopThread
) -> None:
    store = SessionStore(pg_url)
    loop_a.run(store.open)
    loop_a.run(lambda: store.create(header("s")))
    loop_a.run(lambda: store.append("s", turn(0)))
    try:
        for name, call in ENTRY_POINTS.items():  # on this test's loop, B
            with pytest.raises(StoreError, match=MESSAGE) as caught:
                await call(store)
            assert "todo_sessions.sync" in str(caught.value), name
            assert not isinstance(caught.value.__cause__, RuntimeError), name
        # Nothing happened, and the store still works on its own loop.
        assert loop_a.run(lambda: store.count("s")) == 6
        assert [s.id for s in loop_a.run(store.list)] == ["s"]
    finally:
        loop_a.run(store.aclose)


async def test_a_service_on_postgres_from_another_loop_gets_the_store_error(
    pg_url: str, loop_a: LoopThread
) -> None:
    store = SessionStore(pg_url)
    loop_a.run(store.open)
    service = SessionService(store, flush_interval=None, leases=False)
    with pytest.raises(StoreError, match=MESSAGE):
        await service.new("n")
    loop_a.run(service.aclose)


def test_postgres_store_opened_by_one_asyncio_run_fails_clearly_in_the_next(pg_url: str) -> None:
    """The common mistake: a module-level store used from successive ``asyncio.run`` calls."""
    store = SessionStore(pg_url)

    async def first() -> None:
        await store.open()
        await store.create(header("r"))
        await store.append("r", turn(0))

    loop = asyncio.new_event_loop()  # like asyncio.run, but kept to close the store on
    try:
        loop.run_until_complete(first())
        with pytest.raises(StoreError, match=MESSAGE):
            asyncio.run(store.count("r"))
    finally:
        loop.run_until_complete(store.aclose())
        loop.close()


async def test_sqlite_stores_work_from_any_loop(tmp_path: Path, loop_a: LoopThread) -> None:
    store = SessionStore(f"sqlite:///{tmp_path}/x.db")
    loop_a.run(store.open)
    try:
        loop_a.run(lambda: store.create(header("s")))
        loop_a.run(lambda: store.append("s", turn(0)))
        await store.append("s", turn(6, 2))  # on loop B
        assert await store.count("s") == 12
        assert loop_a.run(lambda: store.count("s")) == 12
        assert (await first_event(store, "s")).seq == 0
    finally:
        loop_a.run(store.aclose)


def test_the_blocking_api_is_the_answer_for_several_loops(pg_url: str) -> None:
    with SyncSessionStore(pg_url) as store:
        store.create(header("y"))

        async def first() -> None:
            store.append("y", turn(0))  # runs on the store's own loop thread

        async def second() -> int:
            return store.count("y")

        asyncio.run(first())
        assert asyncio.run(second()) == 6  # another loop, the same store
