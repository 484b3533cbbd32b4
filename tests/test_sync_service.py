"""`SyncSessionService`: the write-behind service for code without an event loop.

It runs `SessionService` on the private loop thread of a `SyncSessionStore`; these tests use
it from plain threads on every backend.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from todo_sessions import (
    Session,
    SessionExistsError,
    SessionLeasedError,
    SessionNotFoundError,
    SyncSessionService,
    SyncSessionStore,
)

NO_TIMER: dict[str, Any] = {"flush_interval": None}


@pytest.fixture(params=["sqlite-file", "sqlite-memory", "postgres"])
def sync_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite-file":
        yield f"sqlite:///{tmp_path}/svc.db"
    elif request.param == "sqlite-memory":
        yield "sqlite://"
    else:
        from conftest import scratch_database

        with scratch_database(request.getfixturevalue("pg_server_url"), "todo_sessions_ssvc") as u:
            yield u


@pytest.fixture(params=["sqlite-file", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database two services can share."""
    if request.param == "sqlite-file":
        yield f"sqlite:///{tmp_path}/shared.db"
    else:
        from conftest import scratch_database

        with scratch_database(request.getfixturevalue("pg_server_url"), "todo_sessions_ssvc") as u:
            yield u


def live_turn(session: Session, number: int = 1, task: str = "plan") -> None:
    """A complete turn appended to a live session: 4 events."""
    session.append("turn/start", {"turn": number})
    session.append(
        "user/message",
        {
            "id": f"u{number}",
            "role": "user",
            "content": [{"type": "text", "text": "hello"}],
            "source": {"kind": "user"},
        },
        surface_op="append",
    )
    session.append("todo/write", {"todos": [{"content": task, "status": "in_progress"}]})
    session.append("turn/end", {"turn": number, "reason": {"kind": "completed"}})


def test_the_service_api_blocks_and_returns_live_sessions(sync_url: str) -> None:
    with SyncSessionService(sync_url, strict=True, **NO_TIMER) as service:
        session = service.new("a", cwd="/repo")
        assert isinstance(session, Session)
        assert service.get("a") is session
        assert service.live_ids() == ["a"]
        live_turn(session)
        assert service.pending("a") == 4
        with pytest.raises(SessionNotFoundError):  # written behind: not stored yet
            service.store.count("a")
        service.checkpoint("a", "turn-end")
        assert service.pending("a") == 0
        assert service.last_flush_error is None
        assert service.store.count("a") == 4

        child = service.fork("a", child_id="b")
        assert child.header.parent_session == "a"
        assert sorted(service.live_ids()) == ["a", "b"]
        live_turn(child, 2, "child task")
        service.flush()  # every live session
        assert service.store.current_todos("b") == child.todos

        service.close("a")  # one session: flushed, lease given back
        assert service.live_ids() == ["b"]
        with pytest.raises(SessionNotFoundError):
            service.get("a")
        resumed = service.resume("a")
        assert resumed.next_seq == 4
        assert resumed.todos == session.todos
        with pytest.raises(SessionExistsError):  # the async errors, as they are
            service.new("a")
        with pytest.raises(SessionNotFoundError):
            service.resume("nobody")
        assert service.discard("a") is None  # nothing was queued
        checkpoint = service.checkpoint_for("b")
        live_turn(child, 3)
        checkpoint("turn-end")
        assert service.pending("b") == 0


def test_the_service_shares_the_loop_of_a_store_it_is_given(sync_url: str) -> None:
    before = set(threading.enumerate())
    store = SyncSessionStore(sync_url)
    service = SyncSessionService(store, **NO_TIMER)
    assert service.store is store
    assert service.service.store is store.store
    session = service.new("s")
    live_turn(session)
    service.flush("s")
    assert [e.seq for e in store.stream("s")] == [0, 1, 2, 3]  # the same database and loop
    service.close()  # closes the store too, as SessionService.aclose does
    service.close()  # idempotent
    store.close()
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive()]


def test_closing_the_service_stores_every_live_session(shared_url: str) -> None:
    service = SyncSessionService(shared_url, **NO_TIMER)
    live_turn(service.new("kept"))
    service.close()
    with SyncSessionStore(shared_url) as store:
        assert store.count("kept") == 4


def test_follow_sees_what_the_service_flushes(sync_url: str) -> None:
    with SyncSessionService(sync_url, **NO_TIMER) as service:
        session = service.new("f")
        live_turn(session)
        service.flush("f")

        def next_turn() -> None:
            live_turn(session, 2)
            service.flush("f")

        seen: list[int] = []
        for event in service.follow("f", 2, poll_interval=0.01):
            seen.append(event.seq)
            if event.seq == 3:
                threading.Thread(target=next_turn).start()
            if event.seq == 7:
                break
        assert seen == [2, 3, 4, 5, 6, 7]


def test_the_flush_timer_runs_on_the_loop_thread(sync_url: str) -> None:
    """With the default flush interval, appended events reach the store with no flush call."""
    with SyncSessionService(sync_url, flush_interval=0.01) as service:
        session = service.new("t")
        live_turn(session)
        service.flush("t")  # stored: followable
        live_turn(session, 2)  # no flush call for these
        seqs = []
        for event in service.follow("t", 2, poll_interval=0.01):
            seqs.append(event.seq)
            if event.seq == 7:
                break
        assert seqs == [2, 3, 4, 5, 6, 7]


def test_leases_hold_across_two_blocking_services(shared_url: str) -> None:
    with (
        SyncSessionService(shared_url, **NO_TIMER) as first,
        SyncSessionService(shared_url, **NO_TIMER) as second,
    ):
        live_turn(first.new("x"))
        first.flush("x")
        with pytest.raises(SessionLeasedError):
            second.resume("x")
        taken = second.resume("x", steal=True)
        assert taken.next_seq == 4


def test_several_threads_drive_their_own_sessions(sync_url: str) -> None:
    with SyncSessionService(sync_url, **NO_TIMER) as service:
        errors: list[BaseException] = []

        def worker(n: int) -> None:
            try:
                session = service.new(f"w{n}")
                for t in range(3):
                    live_turn(session, t + 1)
                    service.checkpoint(session.id, "turn-end")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert all(service.store.count(f"w{n}") == 12 for n in range(4))


def test_bad_service_options_leave_no_thread(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    with pytest.raises(ValueError, match="lease_ttl"):
        SyncSessionService(tmp_path / "bad.db", lease_ttl=0)
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive()]
