"""The integrations shared by threads that each run their own event loop.

The OpenAI Agents SDK's own ``test_sqlite_session_concurrent_access`` (tests/memory of
openai-agents-python: five threads, each with a new event loop, add one item each to one
session object; every item must be there) run on `TodoSessionsSession`, first with a URL the
session opens itself (the threads race to open it) and then with a store already open. The
Claude adapter the same way: five threads append batches to one transcript and load it.
PostgreSQL runs them with ``asyncio.run`` in each thread: a loop that ends so closes its pool
(a loop closed by hand, as the SDK's test does, leaves its connections to the garbage
collector).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from todo_sessions import SessionStore
from todo_sessions.integrations.claude_agent_sdk import TodoSessionsStore
from todo_sessions.integrations.openai_agents import TodoSessionsSession

THREADS = 5


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/shared.db"
        return
    from conftest import scratch_database

    server = request.getfixturevalue("pg_server_url")
    with scratch_database(server, "todo_sessions_shared") as made:
        yield made


def run_in_new_loop(url: str, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """The SDK test's way on SQLite (a new loop, run, closed); ``asyncio.run`` on PostgreSQL,
    so that the loop's pool is closed with it."""
    if url.startswith("postgresql"):
        return asyncio.run(make())
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(make())
    finally:
        loop.close()


def on_threads(jobs: list[Callable[[], Any]]) -> list[Any]:
    """Each job on a pool of five threads, started together as far as the pool allows."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=THREADS) as executor:
        futures = [executor.submit(job) for job in jobs]
        return [future.result(timeout=120) for future in futures]


async def test_agents_session_concurrent_access_from_a_url(url: str) -> None:
    """The SDK's test as it is: the session opens its store from its URL on first use."""
    session = TodoSessionsSession("concurrent_test", url)
    items = [{"role": "user", "content": f"Message {i}"} for i in range(10)]

    def add_item(item: dict[str, Any]) -> None:
        run_in_new_loop(url, lambda: session.add_items([item]))

    await asyncio.to_thread(on_threads, [lambda item=item: add_item(item) for item in items])
    retrieved = await session.get_items()
    contents = [item.get("content") for item in retrieved]
    assert sorted(contents) == sorted(f"Message {i}" for i in range(10))  # each exactly once
    await session.close()


async def test_agents_session_concurrent_access_on_an_open_store(url: str) -> None:
    async with SessionStore(url) as store:
        session = TodoSessionsSession("concurrent_test", store)
        await session.add_items([{"role": "user", "content": "first"}])

        def work(n: int) -> list[Any]:
            async def run() -> list[Any]:
                await session.add_items([{"role": "user", "content": f"m{n}"}])
                await session.add_items([{"role": "assistant", "content": f"a{n}"}])
                return await session.get_items()

            return run_in_new_loop(url, run)

        seen = await asyncio.to_thread(on_threads, [lambda n=n: work(n) for n in range(THREADS)])
        contents = [item["content"] for item in await session.get_items()]
        assert contents[0] == "first" and len(contents) == 1 + 2 * THREADS
        assert sorted(contents[1:]) == sorted(
            [f"m{n}" for n in range(THREADS)] + [f"a{n}" for n in range(THREADS)]
        )
        for n, items in enumerate(seen):  # each thread saw its own items, in its order
            mine = [item["content"] for item in items if item["content"][1:] == str(n)]
            assert mine == [f"m{n}", f"a{n}"]


def prompt(thread: int, n: int) -> dict[str, Any]:
    uuid = f"u{thread}.{n}"
    return {"type": "user", "uuid": uuid, "message": {"role": "user", "content": uuid}}


async def test_claude_store_appends_and_loads_from_five_loops(url: str) -> None:
    key = {"project_key": "p", "session_id": "s"}
    adapter = TodoSessionsStore(url)
    barrier = threading.Barrier(THREADS)

    def work(thread: int) -> int:
        async def run() -> int:
            own = {"project_key": "p", "session_id": f"own{thread}"}
            for n in range(4):
                batch = [prompt(thread, n)]
                await adapter.append(key, batch)
                await adapter.append(own, batch)
                await adapter.append(key, batch)  # the SDK retries batches: skipped
            loaded = await adapter.load(key)
            assert loaded is not None
            return len(await adapter.load(own) or [])

        barrier.wait()
        return int(run_in_new_loop(url, run))

    sizes = await asyncio.to_thread(on_threads, [lambda t=t: work(t) for t in range(THREADS)])
    assert sizes == [4] * THREADS
    loaded = await adapter.load(key)
    assert loaded is not None
    uuids = [entry["uuid"] for entry in loaded]
    assert sorted(uuids) == sorted(f"u{t}.{n}" for t in range(THREADS) for n in range(4))
    for thread in range(THREADS):  # each thread's lines in the order it appended them
        assert [u for u in uuids if u.startswith(f"u{thread}.")] == [
            f"u{thread}.{n}" for n in range(4)
        ]
    listed = await adapter.list_sessions("p")
    assert sorted(s["session_id"] for s in listed) == sorted(
        ["s", *(f"own{t}" for t in range(THREADS))]
    )
    await adapter.aclose()
