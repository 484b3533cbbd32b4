"""A store and a service shared by threads, each running its own event loop (``asyncio.run``
per thread).

No lock, future or queue of a store belongs to one loop: five threads that use a store at
once, before it is opened (they race to open it) or after, all get every call answered, and
every append is stored exactly once. On PostgreSQL each loop gets its own pool (asyncpg's
connections belong to their loop), closed as that loop ends. A `SessionService` likewise:
live sessions on several loops, and flushes of one session from several loops at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from factories import header, turn

from todo_sessions import SessionService, SessionStore

THREADS = 5
TURNS = 4


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/threads.db"
        return
    from conftest import scratch_database

    server = request.getfixturevalue("pg_server_url")
    with scratch_database(server, "todo_sessions_threads") as made:
        yield made


def in_threads(work: Callable[[int], Any]) -> list[Any]:
    """``asyncio.run(work(i))`` in thread ``i``, all started together; their results (an
    exception raised in a thread is its result)."""
    start = threading.Barrier(THREADS)
    results: list[Any] = [None] * THREADS

    def run(index: int) -> None:
        start.wait()
        try:
            results[index] = asyncio.run(work(index))
        except BaseException as exc:  # handed to the test
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread is still waiting"
    return results


def worker(store: SessionStore) -> Callable[[int], Any]:
    async def work(index: int) -> int:
        session_id = f"t{index}"
        await store.create(header(session_id))
        for number in range(1, TURNS + 1):
            await store.append(session_id, turn((number - 1) * 6, number))
            await store.count(session_id)  # reads in between, on this thread's loop
        assert session_id in [s.id for s in await store.list()]
        return await store.count(session_id)

    return work


async def stored(store: SessionStore) -> dict[str, list[int]]:
    result = {}
    for summary in await store.list():
        log = await store.read(summary.id)
        result[summary.id] = [event.seq for event in log.events]
    return result


def check(results: list[Any], found: dict[str, list[int]]) -> None:
    assert results == [6 * TURNS] * THREADS
    assert found == {f"t{i}": list(range(6 * TURNS)) for i in range(THREADS)}


def connections_left(url: str) -> int:
    """Connections still open to ``url``'s database once its store is closed (PostgreSQL;
    each closed connection leaves the server's list a moment after it closes: polled)."""
    if not url.startswith("postgresql"):
        return 0
    from conftest import _pg_admin
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    server = parsed.set(database="postgres").render_as_string(hide_password=False)
    query = f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{parsed.database}'"
    for _ in range(100):
        ((count,),) = _pg_admin(server, query, fetch=True)
        if count == 0:
            break
        time.sleep(0.1)
    return int(count)


async def test_a_store_first_used_from_five_loops_at_once(url: str) -> None:
    store = SessionStore(url)
    try:
        results = await asyncio.to_thread(in_threads, worker(store))
        check(results, await stored(store))
    finally:
        await store.aclose()
    assert connections_left(url) == 0  # each thread's pool closed as its loop ended


async def test_an_open_store_raced_from_five_loops(url: str) -> None:
    async with SessionStore(url) as store:
        await store.create(header("mine"))
        results = await asyncio.to_thread(in_threads, worker(store))
        await store.append("mine", turn(0))  # and on its own loop still
        found = await stored(store)
        assert found.pop("mine") == list(range(6))
        check(results, found)
    assert connections_left(url) == 0


def test_the_opening_loop_may_end_before_the_others(url: str) -> None:
    """The loop that opened the store is gone (``asyncio.run`` returned): the store works on
    every later loop, and closes from one of them."""
    store = SessionStore(url)

    async def first() -> None:
        await store.create(header("a"))
        await store.append("a", turn(0))

    async def then() -> int:
        await store.append("a", turn(6, 2))
        return await store.count("a")

    asyncio.run(first())
    assert asyncio.run(then()) == 12
    assert in_threads(lambda i: store.count("a")) == [12] * THREADS
    asyncio.run(store.aclose())
    assert connections_left(url) == 0


def test_a_service_shared_by_five_loops(url: str) -> None:
    """Each thread runs its own live session on one service; then all five flush one
    session at once (its flushes queue up across loops: every event stored once)."""
    store = SessionStore(url)
    service = SessionService(store, flush_interval=0.01, leases=True)

    async def work(index: int) -> int:
        session = await service.new(f"t{index}")
        for number in range(1, TURNS + 1):
            session.append("turn/start", {"turn": number})
            session.append("turn/end", {"turn": number, "reason": {"kind": "completed"}})
            await service.checkpoint(session.id, "turn-end")
        await service.close(session.id)
        return await store.count(session.id)

    assert in_threads(work) == [2 * TURNS] * THREADS

    async def shared() -> SessionService:
        session = await service.new("shared")
        for number in range(1, 51):
            session.append("turn/start", {"turn": number})
            session.append("turn/end", {"turn": number, "reason": {"kind": "completed"}})
        return service

    asyncio.run(shared())  # its loop is gone: the timer moves to the next loop that owns one
    assert in_threads(lambda i: service.flush("shared")) == [None] * THREADS

    async def count() -> int:
        async with SessionStore(url) as other:
            return await other.count("shared")

    asyncio.run(service.aclose())
    assert asyncio.run(count()) == 100


async def test_any_loop_lock_hands_over_in_order_and_survives_cancelled_waiters() -> None:
    from todo_sessions.store.loops import AnyLoopLock

    lock = AnyLoopLock()
    order: list[str] = []

    async def take(name: str) -> None:
        async with lock:
            order.append(name)

    async with lock:
        waiters = {name: asyncio.create_task(take(name)) for name in "bcd"}
        for _ in range(3):
            await asyncio.sleep(0)  # all three queue up
        waiters["c"].cancel()
    await asyncio.gather(*waiters.values(), return_exceptions=True)
    assert order == ["b", "d"] and waiters["c"].cancelled() and not lock.locked()

    held = threading.Event()
    release = threading.Event()

    async def hold_on_another_loop() -> None:
        async with lock:
            held.set()
            await asyncio.to_thread(release.wait)

    other = threading.Thread(target=asyncio.run, args=(hold_on_another_loop(),))
    other.start()
    await asyncio.to_thread(held.wait)
    waiting = asyncio.create_task(take("here"))
    await asyncio.sleep(0)
    assert lock.locked() and not waiting.done()
    release.set()
    await waiting  # woken on this loop by the other loop's release
    other.join()
    assert order[-1] == "here" and not lock.locked()
