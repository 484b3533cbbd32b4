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
from todo_sessions.store.indexer import catch_up, pending_events
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
        assert await (await recorder_of(off)).pending_index() == 0
        assert await off.search(word_of("off", 0)) == []
        await on.create(header("on"))
        await on.append("on", turn(0, text=word_of("on", 0)))
        assert await found_once(off, word_of("on", 0), "on", 1)  # any store's search catches up


@pytest.fixture
def no_idle_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """No catch-up in the background (SQLite's writer thread, PostgreSQL's `IdleIndexer`):
    the marks stay as the appends leave them until the test catches up."""
    from todo_sessions.store import idle_index
    from todo_sessions.store.sqlite import writer

    for module in (writer, idle_index):
        monkeypatch.setattr(module, "INDEX_IDLE", 1e9)
        monkeypatch.setattr(module, "INDEX_BACKLOG", 1 << 62)


async def test_the_mark_is_set_once_and_moved_by_the_catch_up(
    url: str, no_idle_index: None
) -> None:
    """The first indexed append marks the session at its first seq, the next ones leave the
    mark (it covers them); a catch-up up to a seq below the next seq (as when an append
    commits while it runs) moves the mark there, not to NULL; the next clears it."""
    async with SessionStore(url) as store:
        await store.create(header("m"))
        await store.create(header("n"))
        await store.append("m", turn(0, text=word_of("m", 0)))
        assert await raw_sql(url, marks) == {"m": 0}  # "n": no row before its first append
        await store.append("m", turn(6, 2, text=word_of("m", 1)))
        await store.append("n", turn(0, text=word_of("n", 0)))
        assert await raw_sql(url, marks) == {"m": 0, "n": 0}
        recorder = await recorder_of(store)
        assert await recorder.pending_index() == 18
        tables = store.namespace.tables
        done = await raw_sql(url, lambda c: catch_up(c, tables, {"m": 6}))
        assert (done.sessions, done.rows, done.more, done.done) == (1, 2, False, {"m"})
        assert await raw_sql(url, marks) == {"m": 6, "n": 0}
        assert [r.seq for r in await recorder.index_rows("m")] == [1, 2]
        assert await recorder.pending_index() == 12
        assert await found_once(store, word_of("m", 1), "m", 7)  # the search catches up
        assert await raw_sql(url, marks) == {"m": None, "n": None}
        assert await recorder.pending_index() == 0
        assert await recorder.catch_up_index() == 0


async def test_a_catch_up_takes_big_backlogs_in_parts(
    url: str, no_idle_index: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Transactions of at most two sessions and about five events: a session with more is
    taken a part at a time, and a search still finds every event, once."""
    from todo_sessions.store import indexer

    monkeypatch.setattr(indexer, "CATCH_UP_SESSIONS", 2)
    monkeypatch.setattr(indexer, "CATCH_UP_EVENTS", 5)
    async with SessionStore(url) as store:
        for session_id in ("p1", "p2", "p3"):
            await store.create(header(session_id))
            for n in range(3):
                await store.append(session_id, turn(6 * n, n + 1, text=word_of(session_id, n)))
        tables = store.namespace.tables
        first = await raw_sql(url, lambda c: indexer.catch_up(c, tables))
        assert (first.sessions, first.more) == (1, True)  # 5 of one session's 18 events
        # which: one of a lot of two read through the partial index (in no set order)
        assert sorted((await raw_sql(url, marks)).values()) == [0, 0, 5]
        for session_id in ("p1", "p2", "p3"):
            for n in range(3):
                assert await found_once(store, word_of(session_id, n), session_id, 6 * n + 1)
        assert await raw_sql(url, marks) == {"p1": None, "p2": None, "p3": None}
        assert await store.search_index_problems() == []


async def test_a_store_left_idle_catches_the_index_up_by_itself(url: str) -> None:
    async with SessionStore(url) as store:
        await store.create(header("idle"))
        await store.append("idle", turn(0, text=word_of("idle", 0)))
        recorder = await recorder_of(store)
        for _ in range(200):  # no search: the store indexes once its appends pause
            await asyncio.sleep(0.3)  # longer than the pause it waits for
            if await recorder.pending_index() == 0:
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
            if await recorder.pending_index() == 0:
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
            conn.execute(text("UPDATE sessions SET index_from = 0 WHERE id = 'b'"))

        await raw_sql(empty_url, left_to_the_index)
    # 0013's downgrade turns the mark into a pending row, then 0011's indexes what is pending
    # (0010's appends expect a whole index) and drops the table
    await downgrade(empty_url, revision="0010")
    rows, names = await run_locked(empty_url, index_state)
    assert rows == whole and "search_pending" not in names
    await migrate(empty_url)  # existing databases start with nothing pending
    rows, names = await run_locked(empty_url, index_state)
    assert rows == whole and "search_pending" not in names
    assert await run_locked(empty_url, lambda c: pending_events(c, DEFAULT.tables)) == 0
    async with SessionStore(empty_url) as store:
        for n, session_id in enumerate(("a", "b")):
            assert await found_once(store, word_of(session_id, n), session_id, 1)
            assert await found_once(store, word_of(session_id, n + 10), session_id, 7)
            assert await verify_session(store, session_id) == []


def marks(conn: Connection) -> dict[str, int | None]:
    return dict(conn.execute(text("SELECT id, index_from FROM sessions")).all())  # type: ignore[arg-type]


async def test_revision_0013_moves_pending_rows_onto_the_session_rows_and_back(
    empty_url: str,
) -> None:
    """Revision 0012's pending rows (several a session, one of a session deleted since)
    become each session's mark, the search finds what they stood for; the downgrade writes
    one pending row per marked session back."""
    async with SessionStore(empty_url) as store:
        for n, session_id in enumerate(("a", "b", "c")):
            await store.create(header(session_id))
            await store.append(session_id, turn(0, text=word_of(session_id, n)))
            await store.append(session_id, turn(6, 2, text=word_of(session_id, n + 10)))
        assert await store.search_index_problems() == []
        whole = (await run_locked(empty_url, index_state))[0]
    await downgrade(empty_url, revision="0012")

    def left_to_the_index(conn: Connection) -> None:  # as 0012's appends leave them
        conn.execute(text("DELETE FROM search_text WHERE session_id IN ('a', 'b')"))
        conn.execute(
            text(
                "INSERT INTO search_pending (session_id, first_seq, end_seq) VALUES "
                "('b', 6, 12), ('a', 0, 6), ('gone', 0, 3), ('a', 6, 12), ('b', 0, 6)"
            )
        )

    await raw_sql(empty_url, left_to_the_index)
    await migrate(empty_url)
    assert await run_locked(empty_url, marks) == {"a": 0, "b": 0, "c": None}
    assert await run_locked(empty_url, lambda c: pending_events(c, DEFAULT.tables)) == 24
    rows, names = await run_locked(empty_url, index_state)
    assert "search_pending" not in names and rows != whole
    async with SessionStore(empty_url) as store:
        for n, session_id in enumerate(("a", "b", "c")):
            assert await found_once(store, word_of(session_id, n), session_id, 1)
            assert await found_once(store, word_of(session_id, n + 10), session_id, 7)
    assert (await run_locked(empty_url, index_state))[0] == whole
    assert await run_locked(empty_url, marks) == {"a": None, "b": None, "c": None}

    def mark_b(conn: Connection) -> None:
        conn.execute(text("DELETE FROM search_text WHERE session_id = 'b' AND seq >= 6"))
        conn.execute(text("UPDATE sessions SET index_from = 6 WHERE id = 'b'"))

    await raw_sql(empty_url, mark_b)
    await downgrade(empty_url, revision="0012")

    def pending(conn: Connection) -> list[tuple[object, ...]]:
        query = "SELECT session_id, first_seq, end_seq FROM search_pending"
        return [tuple(r) for r in conn.execute(text(query)).all()]

    assert await run_locked(empty_url, pending) == [("b", 6, 12)]
    await migrate(empty_url)
    assert await run_locked(empty_url, marks) == {"a": None, "b": 6, "c": None}
    async with SessionStore(empty_url) as store:
        assert await found_once(store, word_of("b", 11), "b", 7)
        assert await verify_session(store, "b") == []
    assert await run_locked(empty_url, marks) == {"a": None, "b": None, "c": None}
