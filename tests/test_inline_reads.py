"""Short SQLite reads on the caller's thread (`current_todos`, `latest_event`), and the
writer's own waits for another process's write lock (`begin_write`).

An inline read runs on the event loop's thread only where it never waits: WAL (a reader takes
no lock a writer holds), busy timeout 0, anything busy handed to the reader threads. These
tests hold the locks that could block it, from another process, and watch a heartbeat task
on the loop: its gaps are bounded far below the time the locks are held, so a read that
blocked the loop would show. The bound is generous (the machine may be loaded); it is not a
measure of speed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from factories import T0, header, todo_write, turn

from todo_sessions import SessionEvent, SessionStore, StoreBusyError
from todo_sessions.store.sqlite import readers as sqlite_readers
from todo_sessions.store.sqlite.driver import begin_write

HOLD = 3.0
"""How long the other process holds its locks (seconds)."""
GAP = 1.0
"""The heartbeat's largest allowed gap: a third of the hold."""
WINDOW = 1.5
"""How long the loop keeps reading while the locks are held."""

LOCKER = """
import sqlite3, sys, threading, time
path, hold = sys.argv[1], float(sys.argv[2])
writer = sqlite3.connect(path, isolation_level=None, timeout=30)  # waits out the store's indexer
writer.execute("BEGIN IMMEDIATE")
writer.execute("UPDATE sessions SET updated_at = updated_at WHERE id = 's1'")
checkpointer = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
started = threading.Event()
def checkpoint():
    started.set()
    checkpointer.execute("PRAGMA wal_checkpoint(FULL)")  # waits for the writer's lock
thread = threading.Thread(target=checkpoint)
thread.start()
started.wait()
time.sleep(0.2)  # the checkpoint is inside its busy wait now
print("held", flush=True)
time.sleep(hold)
writer.execute("COMMIT")
thread.join()
print("released", flush=True)
"""


async def _seeded(path: Path, **options: Any) -> SessionStore:
    store = SessionStore(path, **options)
    await store.open()
    await store.create(header("s1"))
    await store.append("s1", [*turn(0), todo_write(6, ("ship", "pending"))])
    return store


async def _heartbeat(gaps: list[float], stop: asyncio.Event) -> None:
    last = time.monotonic()
    while not stop.is_set():
        await asyncio.sleep(0.005)
        now = time.monotonic()
        gaps.append(now - last)
        last = now


def _still_locked(path: Path) -> bool:
    probe = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        probe.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        return "locked" in str(exc)
    else:
        probe.execute("ROLLBACK")
        return False
    finally:
        probe.close()


async def test_current_todos_inline_beside_another_process_s_write_lock_and_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    store = await _seeded(path)
    hops: list[Any] = []
    run = sqlite_readers.Readers.run

    async def counted(self: Any, op: Any, *args: Any) -> Any:
        hops.append(op)
        return await run(self, op, *args)

    monkeypatch.setattr(sqlite_readers.Readers, "run", counted)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LOCKER, str(path), str(HOLD), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        assert (await asyncio.wait_for(child.stdout.readline(), 30)).strip() == b"held"
        gaps: list[float] = []
        stop = asyncio.Event()
        beat = asyncio.create_task(_heartbeat(gaps, stop))
        found: list[Any] = []
        deadline = time.monotonic() + WINDOW
        while time.monotonic() < deadline:
            found.append(await store.current_todos("s1"))
            latest = await store.latest_event("s1", "turn/start", "turn/end")
            assert latest is not None and latest.type == "turn/end"
            await asyncio.sleep(0.01)
        assert _still_locked(path)  # the other process held its lock all along
        stop.set()
        await beat
        assert found and all(
            [(t.content, t.status) for t in todos] == [("ship", "pending")]  # type: ignore[union-attr]
            for todos in found
        )
        assert hops == []  # every read ran inline, none waited for a reader thread
        assert max(gaps) < GAP, f"the loop stalled for {max(gaps):.3f} s"
        assert (await asyncio.wait_for(child.stdout.readline(), 30)).strip() == b"released"
    finally:
        if child.returncode is None:
            child.kill()
        await child.wait()
        await store.aclose()
    # the appends of the other process's time still land afterwards
    async with SessionStore(path) as again:
        await again.append("s1", [SessionEvent("request/context", 7, T0 + 7, {"by": "after"})])
        assert await again.count("s1") == 8


async def test_a_busy_inline_read_falls_back_to_a_reader_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite answers an inline read busy (a WAL recovery in another process): the same read
    runs on a reader thread at once and gives the same answer."""
    store = await _seeded(tmp_path / "s.db")
    try:
        expected = await store.current_todos("s1")
        real, threads = sqlite_readers.read_on, []

        def busy_inline(conn: sqlite3.Connection, reads: Any, op: Any, args: Any) -> Any:
            threads.append(threading.current_thread())
            if threading.current_thread() is threading.main_thread():
                raise sqlite3.OperationalError("database is locked")
            return real(conn, reads, op, args)

        monkeypatch.setattr(sqlite_readers, "read_on", busy_inline)
        assert await store.current_todos("s1") == expected
        assert await store.latest_event("s1", "todo/write") is not None
        assert threads[0] is threading.main_thread()
        assert threads[1] is not threading.main_thread()  # a reader thread answered
    finally:
        await store.aclose()


async def test_a_rollback_journal_file_reads_on_reader_threads_never_on_the_loop(
    tmp_path: Path,
) -> None:
    """Outside WAL a reader waits for a writer's lock: there no read runs inline, and a read
    that waits for another connection's exclusive lock leaves the loop running."""
    path = tmp_path / "s.db"
    store = await _seeded(path, journal_mode="DELETE")
    other = sqlite3.connect(path, isolation_level=None, timeout=0, check_same_thread=False)
    try:
        other.execute("BEGIN EXCLUSIVE")  # readers of a rollback-journal file must wait
        gaps: list[float] = []
        stop = asyncio.Event()
        beat = asyncio.create_task(_heartbeat(gaps, stop))
        read = asyncio.create_task(store.current_todos("s1"))
        await asyncio.sleep(HOLD / 2)
        assert not read.done()  # it is waiting, on a reader thread
        other.execute("ROLLBACK")
        todos = await asyncio.wait_for(read, 30)
        stop.set()
        await beat
        assert todos is not None and [t.content for t in todos] == ["ship"]
        assert max(gaps) < GAP, f"the loop stalled for {max(gaps):.3f} s"
    finally:
        other.close()
        await store.aclose()


async def test_no_inline_read_on_the_writer_s_thread(tmp_path: Path) -> None:
    """Never a read beside the writer's write transaction on its own thread."""
    store = await _seeded(tmp_path / "s.db")
    try:
        recorder = store._core.recorder
        readers, writer = recorder._readers, recorder._writer  # type: ignore[union-attr]

        def from_writer_thread(conn: sqlite3.Connection) -> Any:
            conn.execute("BEGIN IMMEDIATE")
            try:
                return readers.inline(sqlite_readers.reads.latest_todos, ("s1", None))
            finally:
                conn.execute("ROLLBACK")

        assert await writer.call(from_writer_thread) is sqlite_readers.WAIT
        inline = readers.inline(sqlite_readers.reads.latest_todos, ("s1", None))
        assert [t.content for t in inline] == ["ship"]
    finally:
        await store.aclose()


def test_begin_write_waits_for_another_connection_s_lock_then_takes_it(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(path, isolation_level=None, timeout=0)
    release = threading.Timer(0.3, holder.execute, ("COMMIT",))
    release.start()
    try:
        begin_write(waiter, 20.0)  # retries with short waits until the holder commits
        assert waiter.in_transaction
        waiter.execute("ROLLBACK")
    finally:
        release.join()
        holder.close()
        waiter.close()


def test_begin_write_gives_up_after_its_patience(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            begin_write(waiter, 0.2)
        assert time.monotonic() - started >= 0.2  # it did wait its patience out
        assert not waiter.in_transaction
    finally:
        holder.close()
        waiter.close()


async def test_the_store_s_writer_waits_itself_and_gives_a_typed_error(tmp_path: Path) -> None:
    """In WAL mode the writer's connection has busy timeout 0 (`begin_write` waits), the
    maintenance hatch still sees the configured one, and a lock held past the timeout is a
    `StoreBusyError` that writes nothing."""
    path = tmp_path / "s.db"
    async with SessionStore(path, busy_timeout_ms=200) as store:
        await store.create(header("s1"))
        await store.append("s1", turn(0))
        writer = store._core.recorder._writer  # type: ignore[union-attr]
        assert await writer.call(lambda c: c.execute("PRAGMA busy_timeout").fetchone()[0]) == 0
        holder = sqlite3.connect(path, isolation_level=None, timeout=0)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreBusyError, match="locked"):
                await store.append("s1", turn(6, 2))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert await store.count("s1") == 6
        await store.append("s1", turn(6, 2))
        assert await store.count("s1") == 12
