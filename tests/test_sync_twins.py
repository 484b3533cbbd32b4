"""The blocking API is complete: every public member of `SessionStore` and `SessionService`
has a blocking twin with the same parameters, and the twins work."""

from __future__ import annotations

import inspect
import typing
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from factories import header, todo_write, turn

from todo_sessions import SessionLeasedError, SessionService, SessionStore
from todo_sessions.sync import SyncSessionService, SyncSessionStore, _twins

# Members the blocking classes leave out or rename on purpose.
NOT_TWINNED = {"open"}  # SyncSessionStore's constructor opens the store
RENAMED = {"aclose": "close"}
# Hand-written twins that take more than their async namesake (each async parameter still has
# its twin, of the same kind): name -> why.
WIDER = {
    (SyncSessionService, "close"): "without a session id it closes the service (aclose)",
    (SyncSessionService, "aclose"): "is close() without a session id",
}


def twin_problems(async_cls: type, sync_cls: type) -> list[str]:
    """What of ``async_cls``'s public methods, properties and parameters ``sync_cls`` lacks."""
    problems: list[str] = []
    for name, member in inspect.getmembers(async_cls):
        if name.startswith("_") or name in NOT_TWINNED:
            continue
        twin_name = RENAMED.get(name, name)
        twin = getattr(sync_cls, twin_name, None)
        if twin is None:
            problems.append(f"{sync_cls.__name__} has no {twin_name} ({async_cls.__name__}.{name})")
            continue
        if isinstance(inspect.getattr_static(async_cls, name), property):
            if not isinstance(inspect.getattr_static(sync_cls, twin_name), property):
                problems.append(f"{sync_cls.__name__}.{twin_name} is not a property")
            continue
        if not callable(member):
            continue
        want, have = inspect.signature(member), inspect.signature(twin)
        if (sync_cls, name) in WIDER:
            for param in want.parameters.values():
                got = have.parameters.get(param.name)
                if got is None or got.kind != param.kind:
                    problems.append(f"{sync_cls.__name__}.{twin_name} lacks {param.name}")
            continue
        if list(have.parameters.values()) != list(want.parameters.values()):
            problems.append(f"{sync_cls.__name__}.{twin_name}{have} differs from {name}{want}")
    return problems


@pytest.mark.parametrize(
    ("async_cls", "sync_cls"),
    [(SessionStore, SyncSessionStore), (SessionService, SyncSessionService)],
)
def test_every_public_async_member_and_parameter_has_a_blocking_twin(
    async_cls: type, sync_cls: type
) -> None:
    assert twin_problems(async_cls, sync_cls) == []


def test_the_check_reports_a_missing_method_and_a_dropped_parameter() -> None:
    class Async:
        async def append(self, session_id: str, *, lease: object = None) -> str: ...

        async def renew(self) -> None: ...

    class Sync:
        def append(self, session_id: str) -> str: ...

    assert twin_problems(Async, Sync) == [
        "Sync.append(self, session_id: 'str') -> 'str' differs from "
        "append(self, session_id: 'str', *, lease: 'object' = None) -> 'str'",
        "Sync has no renew (Async.renew)",
    ]


def test_a_method_added_to_the_async_class_gets_a_twin() -> None:
    class Async:
        async def added(self, x: int, *, y: str = "") -> list[int]:
            """Doc of added."""
            return [x]

        async def items(self, n: int) -> AsyncIterator[int]:
            for i in range(n):
                yield i

    @_twins(Async, "_async", not_here={})
    class Blocking:
        def __init__(self) -> None:
            from todo_sessions.sync import _LoopThread

            self._thread = _LoopThread()
            self._async = Async()

    assert inspect.signature(Blocking.added) == inspect.signature(Async.added)
    assert Blocking.added.__doc__ == "Doc of added."
    assert typing.get_type_hints(Blocking.items)["return"] == Iterator[int]
    blocking = Blocking()
    try:
        assert blocking.added(3) == [3]
        assert list(blocking.items(3)) == [0, 1, 2]
    finally:
        blocking._thread.stop()


@pytest.mark.parametrize("sync_cls", [SyncSessionStore, SyncSessionService])
def test_the_twins_keep_their_docs_and_resolvable_type_hints(sync_cls: type) -> None:
    for name, member in inspect.getmembers(sync_cls, inspect.isfunction):
        if name.startswith("_"):
            continue
        assert member.__doc__, name
        hints: dict[str, Any] = typing.get_type_hints(member)
        assert "return" in hints, name
    assert typing.get_type_hints(SyncSessionStore.stream)["return"].__origin__ is Iterator


def test_the_once_missing_twins_work(tmp_path: Path) -> None:
    with SyncSessionStore(tmp_path / "t.db") as store:
        store.create(header("s"))
        lease = store.acquire_lease("s", "me", ttl=30)
        with pytest.raises(SessionLeasedError):
            store.acquire_lease("s", "someone-else")
        store.append("s", turn(0), lease=lease)
        lease = store.renew_lease(lease, ttl=30)
        assert store.release_lease(lease) is True
        assert store.resume_state("s", repair=False).header.id == "s"
        assert store.seqs_past_end("s") == []
        assert store.checkpoint_texts("s") == []
        assert store.store_id and store.dialect == "sqlite"
        for n in range(3):
            store.create(header(f"p{n}"))
            store.append(f"p{n}", turn(0))
        assert list(store.session_ids(page_size=2)) == ["p0", "p1", "p2", "s"]
        follow = store.follow("s", 5, poll_interval=0.01, reconnect_timeout=1.0)
        assert next(follow).seq == 5
        store.append("s", [todo_write(6)])
        assert next(follow).seq == 6
        follow.close()

    with SyncSessionService(tmp_path / "t.db") as service:
        session = service.new("live")
        assert service.live_ids() == ["live"] and service.get("live") is session
        session.append("turn/start", {"turn": 1})
        assert service.pending("live") == 1
        service.flush("live")
        assert service.pending("live") == 0
        follow = service.follow("live", reconnect_timeout=1.0)
        assert next(follow).seq == 0
        follow.close()
