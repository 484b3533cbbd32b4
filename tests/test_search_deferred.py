"""The deferred search index (docs/design.md, "Search"): appends leave their events to a
catch-up after the commit, and a search still finds every event acknowledged before it, from
the same store, another store of the process and another process, while others append; a
writer killed anywhere (between a commit and its indexing among the places) loses nothing and
indexes nothing twice; `search_index=False` writes no index at all; revision 0011 upgrades and
downgrades with appends still left to the index."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conftest import _fresh
from factories import header, raw_sql, recorder_of, turn
from index_child import word_of
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from todo_sessions import SessionStore, migrate, verify_session
from todo_sessions.store.indexer import newest_pending
from todo_sessions.store.migrate import downgrade, run_locked
from todo_sessions.store.namespace import DEFAULT

CHILD = Path(__file__).resolve().parent / "index_child.py"


@pytest.fixture(params=["sqlite-file", "postgres"])
async def url(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> AsyncIterator[str]:
    async for found in _fresh(request.param, request, tmp_path):
        yield found


async def found_once(store: SessionStore, word: str, session_id: str, seq: int) -> bool:
    hits = await store.search(word)
    return [(h.session_id, h.seq) for h in hits] == [(session_id, seq)]


async def test_an_acknowledged_append_is_found_at_once_from_this_process(url: str) -> None:
    async with SessionStore(url) as one, SessionStore(url) as two:
        stop = asyncio.Event()

        async def appender(store: SessionStore, session_id: str) -> int:
            await store.create(header(session_id))
            n = 0
            while not stop.is_set():
                await store.append(session_id, turn(6 * n, n + 1, text=word_of(session_id, n)))
                n += 1
            return n

        others = [
            asyncio.create_task(appender(one, "busy-one")),
            asyncio.create_task(appender(two, "busy-two")),
        ]
        try:
            await one.create(header("ryw-one"))
            await two.create(header("ryw-two"))
            for i in range(15):
                await one.append("ryw-one", turn(6 * i, i + 1, text=word_of("ryw-one", i)))
                word = word_of("ryw-one", i)
                assert await found_once(one, word, "ryw-one", 6 * i + 1)  # the same store
                assert await found_once(two, word, "ryw-one", 6 * i + 1)  # another store
                await two.append("ryw-two", turn(6 * i, i + 1, text=word_of("ryw-two", i)))
                assert await found_once(one, word_of("ryw-two", i), "ryw-two", 6 * i + 1)
        finally:
            stop.set()
            counts = await asyncio.gather(*others)
        for session_id, count in zip(("busy-one", "busy-two"), counts, strict=True):
            assert count > 0
            for n in range(count):  # what the concurrent appenders wrote: each once
                assert await found_once(two, word_of(session_id, n), session_id, 6 * n + 1)
        assert await one.search_index_problems() == []
        assert await verify_session(one, "busy-one") == []


async def test_search_index_false_writes_no_index_and_search_still_catches_up(url: str) -> None:
    async with SessionStore(url, search_index=False) as off, SessionStore(url) as on:
        await off.create(header("off"))
        await off.append("off", turn(0, text=word_of("off", 0)))
        assert await (await recorder_of(off)).pending_index() is None
        assert await off.search(word_of("off", 0)) == []
        await on.create(header("on"))
        await on.append("on", turn(0, text=word_of("on", 0)))
        assert await found_once(off, word_of("on", 0), "on", 1)  # any store's search catches up


async def test_a_store_left_idle_catches_the_index_up_by_itself(url: str) -> None:
    async with SessionStore(url) as store:
        await store.create(header("idle"))
        await store.append("idle", turn(0, text=word_of("idle", 0)))
        recorder = await recorder_of(store)
        for _ in range(200):  # no search: the store indexes once its appends pause
            await asyncio.sleep(0.3)  # longer than the pause it waits for
            if await recorder.pending_index() is None:
                break
        else:
            raise AssertionError("the index was never caught up")
        rows = await recorder.index_rows("idle")
        assert [(r.seq, r.kind, r.body) for r in rows] == [
            (1, "user", word_of("idle", 0)),
            (2, "todo", "plan"),
        ]


async def test_the_appends_after_a_catch_up_still_commit_with_synchronous_full(
    tmp_path: Path,
) -> None:
    """SQLite, WAL: the index's catch-up commits with ``synchronous=NORMAL`` (its frames are
    made durable by the next append's fsync); the writer's appends keep FULL, after a
    search's catch-up and after an idle one."""

    async def synchronous(store: SessionStore) -> int:
        # on the writer thread's own connection, where the appends commit (a raw connection of
        # the test's would report its own setting)
        writer = (await recorder_of(store))._writer  # type: ignore[attr-defined]
        return int(await writer.call(lambda c: c.execute("PRAGMA synchronous").fetchone()[0]))

    async with SessionStore(tmp_path / "s.db", synchronous="FULL") as store:
        await store.create(header("full"))
        await store.append("full", turn(0, text=word_of("full", 0)))
        assert await found_once(store, word_of("full", 0), "full", 1)
        assert await synchronous(store) == 2  # FULL
        await store.append("full", turn(6, text=word_of("full", 6)))
        recorder = await recorder_of(store)
        for _ in range(100):
            await asyncio.sleep(0.3)
            if await recorder.pending_index() is None:
                break
        else:
            raise AssertionError("the index was never caught up")
        assert await synchronous(store) == 2
        assert await found_once(store, word_of("full", 6), "full", 7)


def spawn(url: str, session_id: str, count: int, search_every: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), url, session_id, str(count), str(search_every)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def acknowledged(line: str, proc: subprocess.Popen[str]) -> int:
    if not line.startswith("ACK "):
        proc.kill()
        raise AssertionError(f"child said {line!r}; stderr:\n{proc.communicate()[1]}")
    return int(line.split()[1])


async def test_an_append_acknowledged_in_another_process_is_found_at_once(url: str) -> None:
    proc = spawn(url, "elsewhere", 25, 0)
    try:
        assert proc.stdout is not None
        async with SessionStore(url) as store:
            for expected in range(25):
                line = await asyncio.to_thread(proc.stdout.readline)
                i = acknowledged(line, proc)
                assert i == expected
                # the child goes on appending while this searches
                assert await found_once(store, word_of("elsewhere", i), "elsewhere", 6 * i + 1)
    finally:
        proc.kill()
        proc.communicate()


@pytest.mark.slow
async def test_a_writer_killed_anywhere_loses_nothing_and_indexes_nothing_twice(url: str) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    for attempt in range(10):
        session_id = f"kill-{attempt}"
        # every other child also searches (a kill can land in its catch-up)
        proc = spawn(url, session_id, 400, 3 if attempt % 2 else 0)
        try:
            assert proc.stdout is not None
            acks = rng.randint(1, 12)
            seen = [
                acknowledged(await asyncio.to_thread(proc.stdout.readline), proc)
                for _ in range(acks)
            ]
            if attempt % 3:  # else at once: between the last commit and its indexing
                await asyncio.sleep(rng.uniform(0, 0.3))
            os.kill(proc.pid, signal.SIGKILL)
            rest = proc.stdout.read()  # what the pipe and its buffer still hold (to the end)
            proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        seen += [int(line.split()[1]) for line in rest.splitlines() if line.startswith("ACK ")]
        async with SessionStore(url) as store:
            events = await store.read_from(session_id)
            turns = len(events) // 6
            assert len(events) == 6 * turns and turns >= len(seen), (seed, attempt)
            assert seen == list(range(len(seen))), (seed, attempt)
            for i in range(turns):  # acknowledged or committed unacknowledged: found once
                found = await found_once(store, word_of(session_id, i), session_id, 6 * i + 1)
                assert found, (seed, attempt, i)
            assert await verify_session(store, session_id) == [], (seed, attempt)
            assert await store.search_index_problems() == [], (seed, attempt)


@pytest.fixture(params=["sqlite", "postgres"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/m.db"
    return str(request.getfixturevalue("fresh_pg_url"))


def index_state(conn: Connection) -> tuple[list[tuple[object, ...]], set[str]]:
    rows = conn.execute(text("SELECT session_id, seq, kind, body FROM search_text")).all()
    return sorted(tuple(r) for r in rows), set(inspect(conn).get_table_names())


async def test_revision_0011_upgrades_and_downgrades_with_appends_left_to_the_index(
    empty_url: str,
) -> None:
    async with SessionStore(empty_url) as store:
        for n, session_id in enumerate(("a", "b")):
            await store.create(header(session_id))
            await store.append(session_id, turn(0, text=word_of(session_id, n)))
            await store.append(session_id, turn(6, 2, text=word_of(session_id, n + 10)))
        assert await store.search_index_problems() == []
        whole = (await run_locked(empty_url, index_state))[0]

        def left_to_the_index(conn: Connection) -> None:  # committed, not indexed yet
            conn.execute(text("DELETE FROM search_text WHERE session_id = 'b'"))
            conn.execute(
                text(
                    "INSERT INTO search_pending (session_id, first_seq, end_seq) "
                    "VALUES ('b', 0, 6), ('b', 6, 12)"
                )
            )

        await raw_sql(empty_url, left_to_the_index)
    # the downgrade indexes what is pending (0010's appends expect a whole index), then drops
    await downgrade(empty_url, revision="0010")
    rows, names = await run_locked(empty_url, index_state)
    assert rows == whole and "search_pending" not in names
    await migrate(empty_url)  # existing databases start with nothing pending
    rows, names = await run_locked(empty_url, index_state)
    assert rows == whole and "search_pending" in names
    assert await run_locked(empty_url, lambda c: newest_pending(c, DEFAULT.tables)) is None
    async with SessionStore(empty_url) as store:
        for n, session_id in enumerate(("a", "b")):
            assert await found_once(store, word_of(session_id, n), session_id, 1)
            assert await found_once(store, word_of(session_id, n + 10), session_id, 7)
            assert await verify_session(store, session_id) == []
