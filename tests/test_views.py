"""Store projections, crash repair, corruption and fork, on every backend.

See docs/design.md, "Projections" and "Crash repair".
"""

from __future__ import annotations

import pytest
from factories import call_ids, header, in_namespace, raw_sql, tamper
from logs import LogBuilder, text_of
from sqlalchemy import text
from sqlalchemy.engine import Connection

from todo_sessions import (
    CorruptSessionError,
    FormatUnsupportedError,
    SessionEvent,
    SessionNotFoundError,
    SessionStore,
    StructureError,
)
from todo_sessions.core.structure import check_structure
from todo_sessions.core.surface import derive_messages
from todo_sessions.core.todos import current_todos


def mixed_log() -> LogBuilder:
    b = LogBuilder()
    b.turn_start()
    b.todo(("read", "in_progress"), ("fix", "pending"))
    b.user("fix the bug")
    b.tool_step("c1")
    b.todo(("read", "completed"), ("fix", "in_progress"))
    b.text_step("fixed")
    b.turn_end()
    b.turn_start()
    b.user("now tests")
    b.compact(b.surface[0], b.surface[2], "summary of turn 1")
    b.todo()
    b.text_step("tests added")
    b.turn_end()
    return b


async def stored(store: SessionStore, b: LogBuilder, session_id: str = "s1") -> None:
    await store.create(header(session_id))
    await store.append(session_id, b.events)


async def test_store_projections_equal_the_pure_ones_at_every_seq(store: SessionStore) -> None:
    b = mixed_log()
    await stored(store, b)
    assert await store.derive_messages("s1") == derive_messages(b.events)
    assert await store.current_todos("s1") == []
    for seq in range(len(b.events)):
        prefix = b.events[: seq + 1]
        assert await store.current_todos("s1", upto_seq=seq) == current_todos(prefix)
        assert await store.derive_messages("s1", upto_seq=seq) == derive_messages(prefix)
    assert await store.current_todos("s1", upto_seq=0) is None
    for past in (len(b.events), 2**63 - 2, 2**63 - 1, 2**70):  # any seq past the end: the end
        assert await store.current_todos("s1", upto_seq=past) == current_todos(b.events)
    with pytest.raises(ValueError):
        await store.current_todos("s1", upto_seq=-1)
    with pytest.raises(SessionNotFoundError):
        await store.derive_messages("missing")


async def test_the_latest_event_of_some_types_at_every_seq(store: SessionStore) -> None:
    b = mixed_log()
    await stored(store, b)

    def latest(types: tuple[str, ...], seq: int) -> SessionEvent | None:
        return next((e for e in reversed(b.events[: seq + 1]) if e.type in types), None)

    for types in [("todo/write",), ("turn/start", "turn/end"), ("turn/end", "turn/start")]:
        for seq in range(len(b.events)):
            assert await store.latest_event("s1", *types, upto_seq=seq) == latest(types, seq)
        assert await store.latest_event("s1", *types) == latest(types, len(b.events))
    assert await store.latest_event("s1", "todo/write", upto_seq=10**6) == latest(
        ("todo/write",), len(b.events)
    )
    assert await store.latest_event("s1", "no/such-type") is None
    for bad in [(), (5,), ("todo/write", None)]:
        with pytest.raises(ValueError, match="one or more event types"):
            await store.latest_event("s1", *bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="upto_seq"):
        await store.latest_event("s1", "todo/write", upto_seq=-1)
    with pytest.raises(SessionNotFoundError):
        await store.latest_event("missing", "todo/write")


async def test_todo_write_never_changes_derived_messages(store: SessionStore) -> None:
    b = LogBuilder()
    b.exchange("hi", "c1")
    await stored(store, b)
    before = await store.derive_messages("s1")
    b.turn_start()
    b.todo(("x", "pending"))
    await store.append("s1", b.events[-2:])
    assert await store.derive_messages("s1") == before


def interrupted() -> LogBuilder:
    """Turn 2 dies mid-step: call c1 ran (tool/call, no result), c2 never started."""
    b = LogBuilder()
    b.exchange("first", "c0")
    b.turn_start()
    b.user("second")
    b.todo(("edit", "in_progress"))
    b.step_start()
    b.assistant("let me", calls=["c1", "c2"])
    b.tool_call("c1", "bash")
    return b


async def test_inspect_shows_closers_without_writing(store: SessionStore) -> None:
    b = interrupted()
    await stored(store, b)
    token = await store.revision("s1")
    log = await store.inspect("s1")
    assert await store.revision("s1") == token
    assert log.revision == token
    assert len(await store.read_from("s1")) == len(b.events)
    kinds = [e.type for e in log.closers]
    assert kinds == ["tool/result", "tool/result", "step/end", "turn/end"]
    unknown, not_started, _, end = log.closers
    assert unknown.data["error"] == {
        "name": "ToolOutcomeUnknownError",
        "code": "TOOL_OUTCOME_UNKNOWN",
    }
    assert "retry only if the operation is read-only or idempotent" in str(unknown.data)
    assert unknown.source_event_seqs == (b.tool_calls["c1"],)
    assert not_started.data["error"]["code"] == "TOOL_NOT_STARTED"
    assert not_started.source_event_seqs is None
    assert end.data["reason"] == {"kind": "interrupted"}
    assert all(e.time == b.events[-1].time for e in log.closers)


async def test_load_appends_closers_once_and_history_is_valid(store: SessionStore) -> None:
    b = interrupted()
    await stored(store, b)
    token = await store.revision("s1")
    inspected = await store.inspect("s1")
    loaded = await store.load("s1")
    assert loaded.closers == inspected.closers
    assert loaded.revision != token and loaded.revision.endswith(":2")
    events = await store.read_from("s1")
    assert tuple(events) == loaded.events
    check_structure(events)
    again = await store.load("s1")
    assert again.closers == () and again.revision == loaded.revision
    calls, answered = call_ids(await store.derive_messages("s1"))
    assert calls == answered == ["c0", "c1", "c2"]
    assert await store.current_todos("s1") == current_todos(b.events)
    nxt = len(events)
    await store.append("s1", [SessionEvent("turn/start", nxt, 0, {"turn": 3})])
    assert len(await store.read_from("s1")) == nxt + 1


async def test_load_of_a_closed_log_writes_nothing(store: SessionStore) -> None:
    b = mixed_log()
    await stored(store, b)
    token = await store.revision("s1")
    log = await store.load("s1")
    assert log.revision == token and log.closers == ()


async def raw(store: SessionStore, statement: str) -> None:
    statement = in_namespace(store, statement)

    def run(conn: Connection) -> None:
        conn.execute(text(statement))

    await raw_sql(store, run)


async def test_broken_json_row_is_reported_with_session_and_seq(store: SessionStore) -> None:
    b = LogBuilder()
    b.exchange("hi")
    await stored(store, b, "broken")
    await tamper(store, "UPDATE session_events SET data = '{\"turn\": 1' WHERE seq = 2")
    with pytest.raises(CorruptSessionError, match=r"'broken' is corrupt at seq 2") as info:
        await store.read_from("broken")
    assert info.value.seq == 2
    with pytest.raises(CorruptSessionError):
        await store.load("broken")
    assert len(await store.read_from("broken", 3)) == len(b.events) - 3


async def test_seq_gap_is_reported(store: SessionStore) -> None:
    b = LogBuilder()
    b.exchange("hi")
    await stored(store, b, "gappy")
    await tamper(store, "DELETE FROM session_events WHERE session_id = 'gappy' AND seq = 3")
    with pytest.raises(CorruptSessionError, match="seq 3 is missing") as info:
        await store.read_from("gappy")
    assert info.value.seq == 3
    with pytest.raises(CorruptSessionError, match="seq 3"):
        _ = [e async for e in store.stream("gappy", page_size=2)]


async def test_unknown_types_ignorable_kept_else_refused(store: SessionStore) -> None:
    b = LogBuilder()
    b.turn_start()
    b.add("vendor/telemetry", {"tokens": 3}, ignorable=True)
    b.turn_end()
    await stored(store, b, "u")
    back = await store.read_from("u")
    assert back[1].to_json() == b.events[1].to_json()
    await tamper(
        store,
        "UPDATE session_events SET type = 'vendor/strict', ignorable = "
        + ("false" if store.dialect == "postgresql" else "0")
        + " WHERE seq = 1",
    )
    with pytest.raises(
        FormatUnsupportedError, match=r'"vendor/strict" \(seq 1\)|\'vendor/strict\' \(seq 1\)'
    ):
        await store.read_from("u")


async def test_newer_format_version_is_refused(store: SessionStore) -> None:
    b = LogBuilder()
    b.exchange("hi")
    await stored(store, b, "future")
    await raw(store, "UPDATE sessions SET format_version = 99 WHERE id = 'future'")
    with pytest.raises(FormatUnsupportedError, match="written by a newer version"):
        await store.read_from("future")
    with pytest.raises(FormatUnsupportedError):
        await store.current_todos("future")
    # listing and counting need no decoding: a newer session never breaks them
    assert [x.id for x in await store.list()] == ["future"]
    assert await store.count("future") == len(b.events)


async def test_fork_round_trip_and_refusals(store: SessionStore) -> None:
    b = mixed_log()
    await stored(store, b)
    first_turn_end = next(e.seq for e in b.events if e.type == "turn/end")
    child = await store.fork("s1", first_turn_end, "child")
    assert child.header.parent_session == "s1"
    assert child.header.seed_length == first_turn_end + 1
    events = await store.read_from("child")
    assert events[:-1] == b.events[: first_turn_end + 1]
    assert events[-1].type == "session/end-seed" and events[-1].seq == first_turn_end + 1
    assert await store.derive_messages("child") == derive_messages(b.events[: first_turn_end + 1])
    whole = await store.fork("s1")
    assert whole.header.seed_length == len(b.events)
    assert whole.header.id != "s1" and whole.header.id.startswith("s1-fork-")
    with pytest.raises(StructureError, match="still open"):
        await store.fork("s1", 3, "bad")
    with pytest.raises(ValueError):
        await store.fork("s1", len(b.events), "bad")
    from todo_sessions import SessionExistsError

    with pytest.raises(SessionExistsError):
        await store.fork("s1", None, "child")
    with pytest.raises(SessionNotFoundError):
        await store.fork("nope")


async def test_strict_store_vetoes_structure_breaks(shared_db_url: str) -> None:
    async with SessionStore(shared_db_url, strict=True) as store:
        b = LogBuilder()
        b.exchange("hi", "c1")
        await store.create(header("s"))
        token = await store.append("s", b.events)
        bad = SessionEvent("todo/write", len(b.events), 0, {"todos": []})
        with pytest.raises(StructureError, match="outside any open turn"):
            await store.append("s", [bad])
        assert await store.revision("s") == token
        async with SessionStore(shared_db_url, strict=True) as other:  # cold cache: reads once
            with pytest.raises(StructureError):
                await other.append("s", [bad])
        ok = SessionEvent("turn/start", len(b.events), 0, {"turn": 2})
        await store.append("s", [ok, bad.replace(seq=len(b.events) + 1)])


def test_text_of_helper_sanity() -> None:
    b = LogBuilder()
    b.exchange("hello")
    assert [text_of(m) for m in derive_messages(b.events)] == ["hello", "done"]
