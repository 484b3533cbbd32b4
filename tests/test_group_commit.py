"""SQLite group commit: appends that wait for the writer are committed together, each on its own.

See docs/design.md, "Backends". The writer thread is held busy (a call on it that waits on an
event) while appends queue up behind it; released, they form one group: one BEGIN
IMMEDIATE, one savepoint per append, one COMMIT.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from factories import T0, chunks, header, recorder_of, turn

from todo_sessions import (
    InvalidEventError,
    SeqConflictError,
    SessionEvent,
    SessionNotFoundError,
    SessionStore,
    StoreError,
)
from todo_sessions.store.sqlite.readers import THREADS

WORKER = Path(__file__).resolve().parent / "workers.py"


class HeldWriter:
    """Holds the store's writer thread inside a call until `release`; records its statements."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.statements: list[str] = []
        self._gate = threading.Event()
        self._task: asyncio.Task[Any] | None = None

    async def hold(self) -> None:
        def trace_and_wait(conn: sqlite3.Connection) -> None:  # the writer's own connection
            conn.set_trace_callback(self.statements.append)
            self._gate.wait(30)

        writer = (await recorder_of(self.store))._writer  # type: ignore[attr-defined]
        self._task = asyncio.create_task(writer.call(trace_and_wait))
        await asyncio.sleep(0.05)

    async def release(self) -> None:
        self._gate.set()
        assert self._task is not None
        await self._task

    def after_hold(self, prefix: str) -> int:
        """How many statements starting with ``prefix`` ran from the first write on."""
        first = self.statements.index("BEGIN IMMEDIATE")
        return sum(1 for s in self.statements[first:] if s.startswith(prefix))


async def queued(store: SessionStore, count: int) -> None:
    """Wait until ``count`` jobs wait for the writer thread."""
    jobs = store._core.recorder._writer._jobs  # type: ignore[union-attr]
    for _ in range(500):
        if jobs.qsize() >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"only {jobs.qsize()} of {count} appends reached the writer")


async def outcome(call: Awaitable[str]) -> str | BaseException:
    try:
        return await call
    except Exception as exc:
        return exc


async def test_sixteen_appends_share_one_commit_and_fail_alone(tmp_path: Path) -> None:
    async with SessionStore(tmp_path / "g.db") as store:
        for i in range(16):
            await store.create(header(f"s{i}"))
        await store.append("s3", turn(0))  # s3 now expects seq 6
        await store.create(header("ghost"))
        await store.delete("ghost")  # forgotten: an append to it is not found
        held = HeldWriter(store)
        await held.hold()

        calls: dict[str, Callable[[], Awaitable[str]]] = {}
        for i in range(16):
            sid = f"s{i}"
            if i == 3:
                calls[sid] = lambda sid=sid: store.append(sid, turn(0))  # conflict: seq 6 stored
            elif i == 7:
                bad = SessionEvent("turn/start", 0, T0, {"turn": 0})  # turn must be >= 1
                calls[sid] = lambda sid=sid, bad=bad: store.append(sid, [bad])
            else:
                calls[sid] = lambda sid=sid: store.append(sid, turn(0))
        calls["s5-twice"] = lambda: store.append("s5", turn(0))  # same seq as s5's own append
        calls["ghost"] = lambda: store.append("ghost", turn(0))
        tasks = {name: asyncio.create_task(outcome(call())) for name, call in calls.items()}
        await queued(store, 17)  # all but the invalid one reach the writer
        await held.release()
        results = {name: await task for name, task in tasks.items()}

        assert held.after_hold("BEGIN IMMEDIATE") == 1  # one group ...
        assert held.after_hold("COMMIT") == 1  # ... one commit, one fsync
        assert held.after_hold("SAVEPOINT") == 17  # each append on its own
        assert held.after_hold("ROLLBACK TO") == 3  # s3, the second s5, ghost

        assert isinstance(results["s3"], SeqConflictError)
        assert isinstance(results["s7"], InvalidEventError) and results["s7"].field == "data.turn"
        assert isinstance(results["ghost"], SessionNotFoundError)
        s5 = sorted([results.pop("s5"), results.pop("s5-twice")], key=lambda r: type(r).__name__)
        assert isinstance(s5[0], SeqConflictError) and isinstance(s5[1], str)
        results["s5"] = s5[1]
        for i in set(range(16)) - {3, 7}:
            token = results[f"s{i}"]
            assert isinstance(token, str), token
            assert await store.read_from(f"s{i}") == turn(0)  # stored exactly once
            assert await store.revision(f"s{i}") == token
        assert await store.read_from("s3") == turn(0)  # the earlier append, untouched
        with pytest.raises(SessionNotFoundError):
            await store.read_from("s7")  # never materialised
        with pytest.raises(SessionNotFoundError):
            await store.read_from("ghost")


async def test_a_lone_append_takes_no_savepoint(tmp_path: Path) -> None:
    async with SessionStore(tmp_path / "g.db") as store:
        await store.create(header("s"))
        held = HeldWriter(store)
        await held.hold()
        task = asyncio.create_task(store.append("s", turn(0)))
        await queued(store, 1)
        await held.release()
        await task
        assert held.after_hold("SAVEPOINT") == 0
        assert held.after_hold("COMMIT") == 1


async def test_a_failed_commit_acknowledges_nothing_of_the_group(tmp_path: Path) -> None:
    """When the group's COMMIT itself fails, every append of the group gets the error and
    nothing is stored (here: the busy timeout runs out while another connection reads)."""
    path = tmp_path / "g.db"
    async with SessionStore(path, busy_timeout_ms=100, journal_mode="DELETE") as store:
        for i in range(4):
            await store.create(header(f"s{i}"))
        await store.append("s0", turn(0))
        import sqlite3

        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM session_events").fetchone()  # a SHARED lock
        try:
            held = HeldWriter(store)
            await held.hold()
            appends = [store.append("s0", turn(6, 2))]
            appends += [store.append(f"s{i}", turn(0)) for i in range(1, 4)]
            tasks = [asyncio.create_task(outcome(a)) for a in appends]
            await queued(store, 4)
            await held.release()
            results = [await t for t in tasks]
        finally:
            reader.execute("ROLLBACK")
            reader.close()
        assert all(type(r).__name__ == "StoreBusyError" for r in results), results
        assert len(await store.read_from("s0")) == 6
        for i in range(1, 4):
            with pytest.raises(SessionNotFoundError):
                await store.read_from(f"s{i}")


async def test_concurrent_tasks_on_a_shared_session_get_each_seq_once(tmp_path: Path) -> None:
    async with SessionStore(tmp_path / "g.db") as store:
        await store.create(header("shared"))
        await store.append("shared", chunks(0, 1))

        async def writer(name: str) -> list[int]:
            won = []
            for _ in range(30):
                seq = await store.count("shared")
                try:
                    await store.append(
                        "shared", [SessionEvent("request/context", seq, T0, {"by": name})]
                    )
                except SeqConflictError:
                    continue
                won.append(seq)
            return won

        wins = await asyncio.gather(*(writer(f"w{i}") for i in range(8)))
        every = sorted(s for w in wins for s in w)
        assert len(every) == len(set(every))  # no seq given twice
        stored = await store.read_from("shared")
        assert [e.seq for e in stored] == list(range(len(stored)))
        assert every == list(range(1, len(stored)))


async def test_a_store_runs_at_most_three_threads(tmp_path: Path) -> None:
    """One writer and two readers (`THREADS`), whatever the load; all gone after close."""
    assert THREADS == 3
    before = set(threading.enumerate())
    async with SessionStore(tmp_path / "t.db") as store:
        for i in range(16):
            await store.create(header(f"s{i}"))
        await asyncio.gather(*(store.append(f"s{i}", turn(0)) for i in range(16)))
        await asyncio.gather(*(store.read_from(f"s{i % 16}") for i in range(64)))
        await asyncio.gather(*(store.current_todos(f"s{i}") for i in range(16)))
        mine = set(threading.enumerate()) - before
        assert 1 <= len(mine) <= THREADS, sorted(t.name for t in mine)
    await asyncio.sleep(0)
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive()]


async def test_an_in_memory_store_runs_one_thread(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    async with SessionStore("sqlite://") as store:
        await store.create(header("m"))
        await asyncio.gather(store.append("m", turn(0)), store.read_from("m"))
        assert len(set(threading.enumerate()) - before) == 1


@pytest.mark.slow
def test_sigkill_in_the_middle_of_groups_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """A child appends from 16 tasks and prints every acknowledgement; it is killed mid-flight.
    Every acknowledged event is stored, and each session is a gap-free prefix."""
    url = f"sqlite:///{tmp_path}/crash.db"
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "acks", url, "child", str(tmp_path / "go"), "16"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    (tmp_path / "go").touch()
    acked: dict[str, int] = {}
    try:
        assert proc.stdout is not None
        while sum(acked.values()) < 400:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"child ended early: {proc.communicate()[1]}")
            ack = json.loads(line)
            acked[ack["session"]] = max(acked.get(ack["session"], 0), ack["next_seq"])
        os.kill(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    for line in rest.splitlines():  # acknowledgements printed before the kill landed
        if line.strip():
            ack = json.loads(line)
            acked[ack["session"]] = max(acked.get(ack["session"], 0), ack["next_seq"])
    assert proc.returncode == -signal.SIGKILL

    async def check() -> None:
        async with SessionStore(url) as store:
            for sid, next_seq in acked.items():
                stored = await store.read_from(sid)
                assert [e.seq for e in stored] == list(range(len(stored)))
                assert len(stored) >= next_seq, (
                    f"{sid}: acknowledged {next_seq}, stored {len(stored)}"
                )

    asyncio.run(check())


# -- a close that races appends from another event loop ------------------------------------------


async def test_an_append_behind_a_close_is_refused_and_opens_nothing(tmp_path: Path) -> None:
    """An SQLite store works from any loop, so one loop may close it while another appends.
    An append that reaches the writer after the close's first step gets a `StoreError` and
    never reopens a connection behind the close."""
    from todo_sessions.store.sqlite.writer import close_writer

    async with SessionStore(tmp_path / "s.db") as store:
        await store.create(header("s"))
        await store.append("s", turn(0))
        writer = store._core.recorder._writer  # type: ignore[union-attr]
        await writer.call(close_writer, writer)  # the racing close got this far
        with pytest.raises(StoreError, match="closed before this could run"):
            await store.append("s", turn(6, 2))
        assert writer.conn is None
    async with SessionStore(tmp_path / "s.db") as store:
        assert len(await store.read_from("s")) == 6


async def test_jobs_queued_behind_the_stop_are_refused_not_left_waiting(tmp_path: Path) -> None:
    from todo_sessions.store.sqlite.handoff import CallJob
    from todo_sessions.store.sqlite.writer import Writer, noop

    async with SessionStore(tmp_path / "s.db") as store:
        recorder: Any = store._core.recorder
        writer = Writer(recorder._target, recorder._options, recorder._sql.append)
        await writer.call(noop)
        late: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        writer._jobs.put(None)  # a stop got there first ...
        writer._jobs.put(CallJob(noop, (), late))  # ... and this job came right behind it
        await asyncio.to_thread(writer._thread.join, 10)
        assert not writer._thread.is_alive()
        writer.fail_leftovers()
        with pytest.raises(StoreError, match="closed before this could run"):
            await asyncio.wait_for(late, 10)
        writer.close_connection()
