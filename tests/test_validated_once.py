"""An event is checked against the catalog once: the store does not repeat what a live session
or the JSONL import already checked (docs/design.md, "Appending")."""

from __future__ import annotations

from typing import Any

import pytest
from factories import T0, header
from pydantic import BaseModel, ConfigDict, model_validator

from todo_sessions import InvalidEventError, SessionEvent, SessionStore
from todo_sessions.core.catalog import register_event_type, validate_event

CHECKED: list[Any] = []


class Counted(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    n: int

    @model_validator(mode="after")
    def _count(self) -> Counted:
        CHECKED.append(self.n)
        return self


@pytest.fixture(autouse=True)
def _counted_type() -> Any:
    """Registered for these tests only: the catalog is process-wide, and other tests pin the
    built-in one."""
    from todo_sessions.core import catalog

    register_event_type("test/counted", Counted)
    yield
    catalog._REGISTRY.pop("test/counted", None)
    catalog._CHECKS.pop("test/counted", None)


def counted(seq: int) -> SessionEvent:
    return SessionEvent("test/counted", seq, T0, {"n": seq})


async def test_the_store_does_not_check_an_event_twice(tmp_path: Any) -> None:
    CHECKED.clear()
    async with SessionStore(tmp_path / "v.db") as store:
        await store.create(header("s"))
        first = counted(0)
        validate_event(first)
        assert CHECKED == [0]
        await store.append("s", [first])
        assert CHECKED == [0]  # not again
        await store.append("s", [counted(1)])
        assert CHECKED == [0, 1]  # a new event is checked once, by the store
        stored = await store.read_from("s")
        await store.fork("s", child_id="child")
        assert CHECKED == [0, 1, 0, 1]  # events read back are checked again before a fork
        assert stored == (await store.read_from("child"))[:2]


def test_a_failed_check_is_not_remembered() -> None:
    bad = SessionEvent("turn/start", 0, T0, {"turn": 0})
    for _ in range(2):
        with pytest.raises(InvalidEventError):
            validate_event(bad)


def test_the_mark_is_per_event_not_per_payload() -> None:
    CHECKED.clear()
    a, b = counted(5), counted(5)
    validate_event(a)
    validate_event(b)
    validate_event(a)
    assert CHECKED == [5, 5]
