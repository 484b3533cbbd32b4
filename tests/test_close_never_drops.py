"""`SessionService.aclose` never drops events: it retries until ``close_timeout``, then writes
what it could not store to a recovery file that ``todo-sessions recover`` appends later."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from factories import header

from todo_sessions import (
    EventsNotStoredError,
    InvalidEventError,
    SeqConflictError,
    SessionEvent,
    SessionService,
    SessionStore,
    StoreBusyError,
    StoreUnavailableError,
    recover,
)
from todo_sessions.cli import main as cli


class Lock:
    """Another connection holding the SQLite write lock until `release`."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


async def live_session(
    url: str, *, close_timeout: float
) -> tuple[SessionService, list[SessionEvent]]:
    store = SessionStore(url, busy_timeout_ms=50)
    service = SessionService(
        store, close_timeout=close_timeout, flush_interval=None, retain_events=True
    )
    session = await service.new("s")
    session.append("turn/start", {"turn": 1})
    await service.flush("s")
    session.append("request/context", {"model": "m", "n": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return service, list(session.events)


async def test_a_busy_database_stays_a_busy_error_and_the_store_stays_usable(
    tmp_path: Path,
) -> None:
    async with SessionStore(f"sqlite:///{tmp_path}/s.db", busy_timeout_ms=50) as store:
        await store.create(header("s"))
        await store.append("s", [SessionEvent("request/context", 0, 1, {})])
        lock = Lock(tmp_path / "s.db")
        with pytest.raises(StoreBusyError, match="locked past the busy timeout"):
            await store.append("s", [SessionEvent("request/context", 1, 1, {})])
        lock.release()
        await store.append("s", [SessionEvent("request/context", 1, 1, {})])
        assert await store.count("s") == 2


async def test_lock_released_before_close_timeout_stores_everything(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    service, events = await live_session(url, close_timeout=10)
    lock = Lock(tmp_path / "s.db")
    threading.Timer(0.5, lock.release).start()  # held well past the 50 ms busy timeout
    await service.aclose()
    async with SessionStore(url) as store:
        assert [e.to_json() for e in await store.read_from("s")] == [e.to_json() for e in events]


async def close_under_lock(
    tmp_path: Path, close_timeout: float
) -> tuple[str, list[SessionEvent], EventsNotStoredError]:
    """A live session closed while another connection holds the write lock throughout."""
    url = f"sqlite:///{tmp_path}/s.db"
    service, events = await live_session(url, close_timeout=close_timeout)
    lock = Lock(tmp_path / "s.db")
    try:
        with pytest.raises(ExceptionGroup) as info:
            await service.aclose()
    finally:
        lock.release()
    [error] = info.value.exceptions
    assert isinstance(error, EventsNotStoredError)
    return url, events, error


async def test_lock_held_past_close_timeout_goes_to_a_recovery_file(tmp_path: Path) -> None:
    url, events, error = await close_under_lock(tmp_path, 0.3)
    assert isinstance(error.reason, StoreBusyError)
    assert (error.session_id, error.count) == ("s", 2)
    lines = (await asyncio.to_thread(Path(error.path).read_text)).splitlines()
    assert json.loads(lines[0])["header"]["id"] == "s"
    assert lines[1:] == [e.to_json() for e in events[1:]]  # exactly the unstored ones

    result = await asyncio.to_thread(CliRunner().invoke, cli, ["--db", url, "recover", error.path])
    assert result.exit_code == 0, result.output
    assert "recovered 2 events (seq 1-2) of session s" in result.output
    async with SessionStore(url) as store:
        assert [e.to_json() for e in await store.read_from("s")] == [e.to_json() for e in events]


async def test_recover_refuses_when_the_log_moved_on(tmp_path: Path) -> None:
    url, _, error = await close_under_lock(tmp_path, 0.1)
    async with SessionStore(url) as store:
        await store.append("s", [SessionEvent("request/context", 1, 1, {"other": True})])
        with pytest.raises(SeqConflictError, match="no longer ends where the recovery file"):
            await recover(store, error.path)
        assert await store.count("s") == 2  # nothing written
    result = await asyncio.to_thread(CliRunner().invoke, cli, ["--db", url, "recover", error.path])
    assert result.exit_code == 1
    assert "nothing was written" in result.stderr


async def test_a_session_never_stored_is_recovered_whole(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    store = SessionStore(url, busy_timeout_ms=50)
    service = SessionService(store, close_timeout=0.1, flush_interval=None)
    session = await service.new("fresh")
    session.append("turn/start", {"turn": 1})
    await store.open()
    lock = Lock(tmp_path / "s.db")
    try:
        with pytest.raises(ExceptionGroup) as info:
            await service.aclose()
    finally:
        lock.release()
    path = info.value.exceptions[0].path  # type: ignore[attr-defined]
    async with SessionStore(url) as fresh:
        result = await recover(fresh, path)
        assert (result.session_id, result.first_seq, result.events) == ("fresh", 0, 1)
        assert (await fresh.header("fresh")).id == "fresh"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda lines: [*lines, lines[1]], "line 4: event has seq 1, expected 3"),
        (lambda lines: [*lines[:2], "{not json", *lines[2:]], "line 3: "),
        (lambda lines: lines[:1], "holds no events: nothing to recover"),
        (lambda lines: [], "line 1: empty file, expected a header line"),
    ],
)
async def test_a_damaged_recovery_file_is_refused_naming_the_line(
    tmp_path: Path, damage: Any, message: str
) -> None:
    url, _, error = await close_under_lock(tmp_path, 0.1)
    path = Path(error.path)
    lines = (await asyncio.to_thread(path.read_text)).splitlines()
    assert len(lines) == 3  # the header and two events, seq 1 and 2
    damaged = damage(lines)
    await asyncio.to_thread(path.write_text, "".join(line + "\n" for line in damaged))
    async with SessionStore(url) as store:
        with pytest.raises(InvalidEventError) as info:
            await recover(store, path)
        assert str(info.value).startswith(str(path)) and message in str(info.value)
        assert await store.count("s") == 1  # nothing written


async def test_close_retries_an_unreachable_postgres_until_it_is_back(pg_database_url: str) -> None:
    from conftest import _empty_pg
    from pg_chaos import TcpProxy

    await _empty_pg(pg_database_url)
    proxy = TcpProxy(pg_database_url)
    await proxy.start()
    try:
        service, events = await live_session(proxy.url(), close_timeout=20)
        await proxy.stop()

        async def back_soon() -> None:
            await asyncio.sleep(0.7)
            await proxy.start()

        returning = asyncio.create_task(back_soon())
        await service.aclose()
        await returning
    finally:
        await proxy.stop()
    async with SessionStore(pg_database_url) as store:
        assert [e.to_json() for e in await store.read_from("s")] == [e.to_json() for e in events]


async def test_a_flush_whose_answer_was_lost_is_not_a_conflict(tmp_path: Path) -> None:
    """The store could not tell whether an append committed (it raised); the events are
    in fact stored. The next flush meets its own events, not another writer's."""
    store = SessionStore(f"sqlite:///{tmp_path}/s.db")
    real_append = store.append
    lose = {"next": False}

    async def append(session_id: str, events: Any, **kw: Any) -> str:
        token = await real_append(session_id, events, **kw)
        if lose["next"]:
            lose["next"] = False
            raise StoreUnavailableError("connection lost before the commit was confirmed")
        return token

    store.append = append  # type: ignore[method-assign]
    async with SessionService(store, flush_interval=None) as service:
        session = await service.new("s")
        session.append("turn/start", {"turn": 1})
        lose["next"] = True
        with pytest.raises(StoreUnavailableError):
            await service.flush("s")
        assert service.pending("s") == 1
        session.append("request/context", {"n": 1})
        await service.flush("s")  # the first event is found stored: only the new one is sent
        assert service.pending("s") == 0
        assert [e.type for e in await store.read_from("s")] == ["turn/start", "request/context"]
        other = SessionStore(f"sqlite:///{tmp_path}/s.db")
        async with other:  # a real conflict is still one
            await other.append("s", [SessionEvent("request/context", 2, 1, {"other": 1})])
        session.append("request/context", {"n": 2})
        with pytest.raises(SeqConflictError):
            await service.flush("s")
        await service.discard("s")
