"""``import`` and ``verify`` accept exactly the same logs (one rule: `core.verify.LogChecker`).

Generated valid logs are damaged the ways a hand edit or a fuzzer does it (an event dropped,
repeated, moved, retyped as an ignorable note, the log cut anywhere), the seqs renumbered so
that each damage reaches the rules behind the seq check. For every one: the JSONL import
accepts the file exactly when `verify_events` finds no error, and a file it accepts verifies
clean once stored (`verify_session`: an open last turn is a warning, `load` closes it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from factories import header
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logs import LogBuilder, build_plan, log_plans

from todo_sessions import (
    InvalidEventError,
    SessionEvent,
    SessionStore,
    export_lines,
    import_lines,
    parse_lines,
    verify_session,
)
from todo_sessions._jsonl import header_line
from todo_sessions.core.verify import errors_of, verify_events

HEADER = header_line(header("x", cwd="/repo", title="t"))


def renumbered(events: list[SessionEvent]) -> list[SessionEvent]:
    return [SessionEvent.from_dict(e.to_dict() | {"seq": i}) for i, e in enumerate(events)]


def as_note(event: SessionEvent) -> SessionEvent:
    """``event`` turned into an ignorable vendor note (a tool result lost that way leaves its
    call unanswered)."""
    wire = event.to_dict() | {"type": "vendor/note", "ignorable": True}
    wire.pop("surfaceOp", None)
    wire.pop("sourceEventSeqs", None)
    return SessionEvent.from_dict(wire)


@st.composite
def damaged_logs(draw: st.DrawFn) -> list[SessionEvent]:
    events, _ = build_plan(draw(log_plans(max_turns=3)), todo_slots=range(0, 1000, 4))
    for _ in range(draw(st.integers(0, 2))):
        if not events:
            break
        at = draw(st.integers(0, len(events) - 1))
        kind = draw(st.sampled_from(["drop", "repeat", "move", "note", "cut", "none"]))
        if kind == "drop":
            events = events[:at] + events[at + 1 :]
        elif kind == "repeat":
            events = events[: at + 1] + events[at:]
        elif kind == "move":
            to = draw(st.integers(0, len(events) - 1))
            moved = events.pop(at)
            events.insert(to, moved)
        elif kind == "note":
            events = [*events[:at], as_note(events[at]), *events[at + 1 :]]
        elif kind == "cut":
            events = events[: at + 1]
    return renumbered(events)


def lines_of(events: list[SessionEvent]) -> list[str]:
    return [HEADER, *(e.to_json() for e in events)]


def imports(events: list[SessionEvent]) -> bool:
    try:
        parse_lines(lines_of(events))
    except InvalidEventError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(damaged_logs())
def test_import_accepts_exactly_what_verify_accepts(events: list[SessionEvent]) -> None:
    errors = errors_of(verify_events(events))
    assert imports(events) == (not errors), errors


@pytest.fixture
def store_loop(tmp_path: Path) -> Iterator[tuple[asyncio.AbstractEventLoop, SessionStore]]:
    loop = asyncio.new_event_loop()
    store = SessionStore(f"sqlite:///{tmp_path}/iv.db", strict=False)
    loop.run_until_complete(store.open())
    try:
        yield loop, store
    finally:
        loop.run_until_complete(store.aclose())
        loop.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(damaged_logs())
def test_an_imported_log_verifies_clean_once_stored(
    store_loop: tuple[asyncio.AbstractEventLoop, SessionStore], events: list[SessionEvent]
) -> None:
    loop, store = store_loop
    if not events or not imports(events):
        return

    async def check() -> list[Any]:
        count = len([s async for s in store.session_ids()])
        result = await import_lines(store, lines_of(events), as_id=f"i{count}")
        return await verify_session(store, result.session_id)

    problems = loop.run_until_complete(check())
    assert errors_of(problems) == [], problems


def unanswered_log() -> list[SessionEvent]:
    """A closed turn whose tool call never got its result."""
    b = LogBuilder()
    b.turn_start()
    b.user("go")
    b.step_start()
    b.assistant(calls=["c1"])
    b.tool_call("c1")
    b.step_end()
    b.turn_end()
    return b.events


async def test_a_stored_log_verify_rejects_is_refused_by_import(tmp_path: Path) -> None:
    """The case found by fuzzing: the library's import took a closed turn with an unanswered
    tool call, which verify then reported."""
    async with SessionStore(f"sqlite:///{tmp_path}/src.db") as source:
        await source.create(header("u"))
        await source.append("u", unanswered_log())  # not strict: stored as given
        (problem,) = errors_of(await verify_session(source, "u"))
        assert (problem.kind, problem.seq) == ("unanswered", 6)
        exported = [line async for line in export_lines(source, "u")]
    async with SessionStore(f"sqlite:///{tmp_path}/target.db") as target:
        with pytest.raises(InvalidEventError) as refused:
            await import_lines(target, exported)
        assert str(refused.value) == "line 8: turn 1 closed with tool call 'c1' unanswered"
        assert [s async for s in target.session_ids()] == []


async def test_an_interrupted_log_imports_and_verifies_with_a_warning(tmp_path: Path) -> None:
    events = unanswered_log()[:-2]  # the turn still open, its call unanswered
    async with SessionStore(f"sqlite:///{tmp_path}/x.db") as store:
        result = await import_lines(store, lines_of(events))
        problems = await verify_session(store, result.session_id)
        assert [(p.kind, p.seq, p.warning) for p in problems] == [("interrupted", 4, True)]
