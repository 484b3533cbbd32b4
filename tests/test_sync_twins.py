"""The blocking API is complete: every public member of `SessionStore` and `SessionService`
has a blocking twin with the same parameters, and the twins work."""

from __future__ import annotations

import importlib
import inspect
import re
import shutil
import typing
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from factories import header, todo_write, turn

import todo_sessions
from todo_sessions import SessionLeasedError, SessionService, SessionStore
from todo_sessions._gen_sync import Spec, render, specs
from todo_sessions._gen_sync import main as gen_main
from todo_sessions._sync_service import _SyncSessionServiceMethods
from todo_sessions._sync_store import _SyncSessionStoreMethods
from todo_sessions._sync_thread import _LoopThread
from todo_sessions.sync import SyncSessionService, SyncSessionStore

PACKAGE = Path(todo_sessions.__file__).parent

# Members the blocking classes leave out or rename on purpose.
NOT_TWINNED = {"open"}  # SyncSessionStore's constructor opens the store
RENAMED = {"aclose": "close"}
# Hand-written twins that take more than their async namesake (each async parameter still has
# its twin, of the same kind): name -> why.
WIDER = {
    (SyncSessionService, "close"): "without a session id it closes the service (aclose)",
    (SyncSessionService, "aclose"): "is close() without a session id",
}


# Hand-written twins whose return type is not the async one's: name -> why.
OWN_RETURN = {(SyncSessionService, "checkpoint_for"): "a blocking callback"}


def twin_problems(async_cls: type, sync_cls: type) -> list[str]:
    """What of ``async_cls``'s public methods, properties, parameters and return types
    ``sync_cls`` lacks."""
    problems: list[str] = []
    for name, member in inspect.getmembers(async_cls):
        if name.startswith("_") or name in NOT_TWINNED:
            continue
        twin_name = RENAMED.get(name, name)
        if getattr(sync_cls, twin_name, None) is None:
            problems.append(f"{sync_cls.__name__} has no {twin_name} ({async_cls.__name__}.{name})")
        elif isinstance(inspect.getattr_static(async_cls, name), property):
            problems += property_problems(async_cls, sync_cls, name)
        elif callable(member):
            problems += method_problems(member, sync_cls, twin_name)
    return problems


def property_problems(async_cls: type, sync_cls: type, name: str) -> list[str]:
    twin = inspect.getattr_static(sync_cls, name)
    if not isinstance(twin, property):
        return [f"{sync_cls.__name__}.{name} is not a property"]
    want = inspect.getattr_static(async_cls, name).fget.__annotations__["return"]
    have = twin.fget.__annotations__.get("return")
    return [] if have == want else [f"{sync_cls.__name__}.{name} is {have!r}, not {want!r}"]


def method_problems(member: Any, sync_cls: type, twin_name: str) -> list[str]:
    want, have = inspect.signature(member), inspect.signature(getattr(sync_cls, twin_name))
    where = f"{sync_cls.__name__}.{twin_name}"
    problems: list[str] = []
    if (sync_cls, member.__name__) in WIDER:
        for param in want.parameters.values():
            got = have.parameters.get(param.name)
            if got is None or got.kind != param.kind:
                problems.append(f"{where} lacks {param.name}")
        return problems
    if list(have.parameters.values()) != list(want.parameters.values()):
        problems.append(f"{where}{have} differs from {member.__name__}{want}")
    returns = want.return_annotation
    if inspect.isasyncgenfunction(member):  # the blocking twin is an iterator of the same items
        returns = re.sub(r"^Async(Iterator|Generator)\[(.*?)(, None)?\]$", r"Iterator[\2]", returns)
    if (sync_cls, twin_name) not in OWN_RETURN and have.return_annotation != returns:
        problems.append(f"{where} returns {have.return_annotation!r}, not {returns!r}")
    return problems


@pytest.mark.parametrize(
    ("async_cls", "sync_cls"),
    [(SessionStore, SyncSessionStore), (SessionService, SyncSessionService)],
)
def test_every_public_async_member_and_parameter_has_a_blocking_twin(
    async_cls: type, sync_cls: type
) -> None:
    assert twin_problems(async_cls, sync_cls) == []


def test_the_check_reports_a_missing_method_a_dropped_parameter_and_a_lost_type() -> None:
    class Async:
        async def append(self, session_id: str, *, lease: object = None) -> str: ...

        async def renew(self) -> None: ...

        async def count(self, session_id: str) -> int: ...

        async def ids(self) -> AsyncIterator[str]:
            yield ""

        @property
        def url(self) -> str: ...

    class Sync:
        def append(self, session_id: str) -> str: ...

        def count(self, session_id: str) -> Any: ...

        def ids(self) -> Iterator[str]: ...

        def url(self) -> str: ...

    assert twin_problems(Async, Sync) == [
        "Sync.append(self, session_id: 'str') -> 'str' differs from "
        "append(self, session_id: 'str', *, lease: 'object' = None) -> 'str'",
        "Sync.count returns 'Any', not 'int'",
        "Sync has no renew (Async.renew)",
        "Sync.url is not a property",
    ]


TOY = '''
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Toy:
    def __init__(self) -> None:
        self.log: list[str] = []

    @property
    def name(self) -> str:
        """The toy's name."""
        return "toy"

    async def added(self, x: int, /, *rest: int, y: str = "", z: tuple[str, ...] = ()) -> list[int]:
        """Doc of added."""
        return [x, *rest]

    async def items(self, n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    @asynccontextmanager
    async def opened(self, label: str) -> AsyncIterator[str]:
        self.log.append("enter " + label)
        try:
            yield label
        except KeyError:
            self.log.append("suppressed")
        finally:
            self.log.append("exit " + label)

    def plain(self, *, k: Literal["a", "b"] = "a") -> str:
        return k


from typing import Literal  # noqa: E402 (a name bound after the class, as modules may)
'''


def test_the_generator_writes_a_working_twin_of_each_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "toy_async.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    toy_async = importlib.import_module("toy_async")
    source = render(Spec(toy_async.Toy, "_ToyMethods", "_toy", "unused.py"))
    assert "from toy_async import Toy" in source and "from typing import Literal" in source
    namespace: dict[str, Any] = {"__name__": "todo_sessions._toy", "__package__": "todo_sessions"}
    exec(compile(source, "<toy twins>", "exec"), namespace)

    class Blocking(namespace["_ToyMethods"]):  # type: ignore[misc]
        def __init__(self) -> None:
            self._thread = _LoopThread()
            self._toy = toy_async.Toy()

    toy = toy_async.Toy
    for name in ("added", "items", "opened", "plain"):
        want = inspect.signature(getattr(toy, name))
        have = inspect.signature(getattr(Blocking, name))
        assert list(have.parameters.values()) == list(want.parameters.values()), name
    assert Blocking.added.__doc__ == "Doc of added." and Blocking.name.__doc__ == "The toy's name."
    assert typing.get_type_hints(Blocking.added)["return"] == list[int]
    assert typing.get_type_hints(Blocking.items)["return"] == Iterator[int]
    assert typing.get_type_hints(Blocking.opened)["return"] == AbstractContextManager[str]
    blocking = Blocking()
    try:
        assert blocking.name == "toy"
        assert blocking.added(3, 4, y="y") == [3, 4]
        assert list(blocking.items(3)) == [0, 1, 2]
        assert blocking.plain(k="b") == "b"
        with blocking.opened("one") as label:
            assert label == "one" and blocking._toy.log == ["enter one"]
        with blocking.opened("two"):
            raise KeyError("the async manager suppresses this")
        with pytest.raises(ValueError), blocking.opened("three"):
            raise ValueError("and not this")
        assert blocking._toy.log[1:] == [
            *["exit one", "enter two", "suppressed", "exit two"],
            *["enter three", "exit three"],
        ]
    finally:
        blocking._thread.stop()


def test_the_generated_modules_are_current() -> None:
    """Regenerated from today's async classes, each module is byte for byte the committed one:
    run ``python -m todo_sessions._gen_sync`` after changing a public async member."""
    for spec in specs():
        committed = (PACKAGE / spec.file).read_text(encoding="utf-8")
        assert render(spec) == committed, f"{spec.file} is stale: python -m todo_sessions._gen_sync"


def test_the_generator_reports_and_rewrites_a_stale_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for spec in specs():
        shutil.copy(PACKAGE / spec.file, tmp_path / spec.file)
    assert gen_main(["--check", "--dir", str(tmp_path)]) == 0
    stale = tmp_path / "_sync_store.py"
    stale.write_text(stale.read_text().replace("-> str:", "-> object:", 1))
    assert gen_main(["--check", "--dir", str(tmp_path)]) == 1
    assert "-> object:" in stale.read_text()  # --check writes nothing
    assert gen_main(["--dir", str(tmp_path)]) == 0
    assert stale.read_text() == (PACKAGE / "_sync_store.py").read_text()
    assert capsys.readouterr().out.splitlines() == [
        "_sync_store.py: not current",
        "_sync_store.py: written",
    ]


@pytest.mark.parametrize("sync_cls", [SyncSessionStore, SyncSessionService])
def test_the_twins_are_real_methods(sync_cls: type) -> None:
    """Defined in a class body (a type checker sees them), not made up by ``__getattr__``."""
    assert not hasattr(sync_cls, "__getattr__")
    assert "append" in _SyncSessionStoreMethods.__dict__
    assert "new" in _SyncSessionServiceMethods.__dict__
    for name, _ in inspect.getmembers(sync_cls, inspect.isfunction):
        if not name.startswith("_"):
            owner = next(c for c in sync_cls.__mro__ if name in c.__dict__)
            assert owner in (sync_cls, _SyncSessionStoreMethods, _SyncSessionServiceMethods), name


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
