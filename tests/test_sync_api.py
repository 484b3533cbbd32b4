"""The blocking API: the async store on a private loop thread, for code without a loop."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from factories import header, todo_write, turn

from todo_sessions import SeqConflictError, SessionNotFoundError
from todo_sessions.sync import SyncSessionStore


@pytest.fixture(params=["sqlite-file", "sqlite-memory", "postgres"])
def sync_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite-file":
        yield f"sqlite:///{tmp_path}/sync.db"
    elif request.param == "sqlite-memory":
        yield "sqlite://"
    else:
        from conftest import scratch_database

        with scratch_database(
            request.getfixturevalue("pg_server_url"), "todo_sessions_sync"
        ) as url:
            yield url


def test_the_whole_store_api_blocks_and_returns_values(sync_url: str) -> None:
    with SyncSessionStore(sync_url) as store:
        store.create(header("s"))
        token = store.append("s", turn(0))
        assert store.revision("s") == token
        assert [e.seq for e in store.read_from("s")] == list(range(6))
        assert store.read("s").events == tuple(store.read_from("s"))
        assert store.current_todos("s") is not None
        assert len(store.derive_messages("s")) == 1
        assert [e.seq for e in store.stream("s", 2, page_size=2)] == [2, 3, 4, 5]
        assert store.count("s", type="todo/write") == 1
        assert [s.id for s in store.list()] == ["s"]
        with pytest.raises(SeqConflictError):  # errors arrive as the async store raises them
            store.append("s", turn(0))
        child = store.fork("s", child_id="child")
        assert child.header.parent_session == "s"
        assert list(store.session_ids()) == ["child", "s"]
        store.delete("child")
        with pytest.raises(SessionNotFoundError):
            store.header("child")


def test_many_calls_and_threads_share_one_loop(sync_url: str) -> None:
    """One long-lived store used from several threads at once, PostgreSQL included."""
    with SyncSessionStore(sync_url) as store:
        errors: list[BaseException] = []

        def worker(n: int) -> None:
            try:
                store.create(header(f"w{n}"))
                for t in range(5):
                    store.append(f"w{n}", turn(6 * t, t + 1))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert all(store.count(f"w{n}") == 30 for n in range(4))


def test_follow_hands_over_events_as_they_come(tmp_path: Path) -> None:
    with SyncSessionStore(tmp_path / "f.db") as store:
        store.create(header("f"))
        store.append("f", turn(0))
        seen: list[int] = []
        for event in store.follow("f", 4, poll_interval=0.01):
            seen.append(event.seq)
            if event.seq == 5:
                threading.Thread(target=store.append, args=("f", [todo_write(6)])).start()
            if event.seq == 6:
                break
        assert seen == [4, 5, 6]


def test_close_stops_the_loop_thread(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    store = SyncSessionStore(tmp_path / "c.db")
    store.create(header("c"))
    store.append("c", turn(0))
    store.close()
    store.close()  # idempotent
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive()]


def test_a_bad_url_fails_at_construction_and_leaves_no_thread(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    with pytest.raises(ValueError):
        SyncSessionStore("mysql://nope/db")
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive()]


def test_the_blocking_store_has_the_newer_store_methods(tmp_path: Path) -> None:
    with SyncSessionStore(tmp_path / "n.db") as store:
        store.create(header("a", cwd="/repo"))
        store.append("a", turn(0))
        store.create(header("b", cwd="/elsewhere"))
        store.append("b", turn(0))
        store.update_meta("a", add_tags=["bug"], title="Fix it")
        assert [s.id for s in store.list(cwd="/repo")] == ["a"]
        assert [s.id for s in store.list(tag="bug")] == ["a"]
        assert [s.id for s in store.list(text="FIX")] == ["a"]
        assert store.usage("a").total == {}
        assert store.read_from("a", 2, limit=2) == store.read_from("a")[2:4]
        assert store.checkpoints("a") == [] and store.delete_checkpoints("a") == 0
        assert store.latest_event("a", "todo/write") == turn(0)[2]
        assert store.latest_event("a", "turn/start", "turn/end", upto_seq=3) == turn(0)[0]
        assert store.lease_holders(["a", "b"]) == {}
