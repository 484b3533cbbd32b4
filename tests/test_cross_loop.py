"""An async `SessionStore` used from another event loop than the one that opened it.

PostgreSQL connections belong to the loop that made them: the store keeps a pool per loop,
made on that loop's first call and closed on it (as the loop ends, or by ``aclose``). SQLite
stores hand each call to their own threads and settle the result on the caller's loop. Both
work from any loop (docs/design.md, "The blocking API").
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from factories import header, turn

from todo_sessions import SessionService, SessionStore, SyncSessionStore

T = TypeVar("T")


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
        # as asyncio.run ends a loop: its async generators closed first, so a PostgreSQL
        # store's pool for this loop is closed on it (docs/design.md, "The blocking API")
        asyncio.run_coroutine_threadsafe(self.loop.shutdown_asyncgens(), self.loop).result()
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


async def test_postgres_serves_every_entry_point_from_another_loop(
    pg_url: str, loop_a: LoopThread
) -> None:
    store = SessionStore(pg_url)
    loop_a.run(store.open)
    loop_a.run(lambda: store.create(header("s")))
    loop_a.run(lambda: store.append("s", turn(0)))
    try:
        order = [name for name in ENTRY_POINTS if name != "delete"] + ["delete"]
        results = {name: await ENTRY_POINTS[name](store) for name in order}  # on loop B
        assert results["count"] == 12 and results["follow"].seq == 0
        # ... and the store still works on loop A, with its own connections.
        loop_a.run(lambda: store.append("other", turn(0)))  # created on loop B
        assert loop_a.run(lambda: store.count("other")) == 6
        ids = [s.id for s in loop_a.run(store.list)]
        assert "other" in ids and "s" not in ids  # deleted on loop B
    finally:
        await store.aclose()  # on loop B; loop A's pool is closed on loop A
    with pytest.raises(RuntimeError, match="closed"):
        await store.count("other")


async def test_a_service_on_postgres_from_another_loop(pg_url: str, loop_a: LoopThread) -> None:
    store = SessionStore(pg_url)
    loop_a.run(store.open)
    service = SessionService(store, flush_interval=None, leases=False)
    session = await service.new("n")
    session.append("turn/start", {"turn": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    await service.close("n")
    assert session.id == "n" and loop_a.run(lambda: store.count("n")) == 2
    await service.aclose()
    await store.aclose()


def test_postgres_store_opened_by_one_asyncio_run_works_in_the_next(pg_url: str) -> None:
    """The common pattern: a module-level store used from successive ``asyncio.run`` calls.
    Each run's pool is closed as that run ends."""
    store = SessionStore(pg_url)

    async def first() -> None:
        await store.open()
        await store.create(header("r"))
        await store.append("r", turn(0))

    asyncio.run(first())
    assert asyncio.run(store.count("r")) == 6
    assert asyncio.run(store.count("r")) == 6
    asyncio.run(store.aclose())


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
