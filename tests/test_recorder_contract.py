"""The recorder contract (`todo_sessions.store.recorder.Recorder`), operation by operation, on
every backend: SQLite file and in memory, PostgreSQL, PgBouncer, and the namespaced
``sqlite-prefix`` / ``postgres-schema`` (`conftest.NAMESPACED_MODULES`).

Each test drives a backend's recorder directly (no `SessionStore` in between), with the plain
values the contract names: `AppendBatch`, rows as dicts, `Lease`, `CheckpointWrite`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from factories import T0, header, todo_write, turn, user_message

from todo_sessions import (
    LeaseLostError,
    SeqConflictError,
    SessionEvent,
    SessionLeasedError,
    SessionNotFoundError,
)
from todo_sessions.core.checkpoint import LiveState
from todo_sessions.core.meta import batch_change
from todo_sessions.core.search import DEFAULT_KINDS, parse_query
from todo_sessions.store.backends import BackendRecorder, open_recorder
from todo_sessions.store.batch import AppendBatch, projection_of
from todo_sessions.store.checkpoints import CheckpointWrite
from todo_sessions.store.codec import event_row, header_row
from todo_sessions.store.engine import SQLiteOptions, parse_url
from todo_sessions.store.index_ops import IndexRow, SearchRow, index_rows_of
from todo_sessions.store.leases import Lease
from todo_sessions.store.migrate import head_revision, namespace_of
from todo_sessions.store.queries import SUMMARY_COLUMNS
from todo_sessions.store.reads import ListFilters
from todo_sessions.store.recorder import Recorder
from todo_sessions.store.records import SessionRow, SummaryRow, UsagePayload
from todo_sessions.store.search import SearchFilters, expected_rows

NOW = T0 + 1_000


@pytest.fixture
async def recorder(db_url: str) -> AsyncIterator[BackendRecorder]:
    target = parse_url(db_url)
    opened = open_recorder(target, sqlite=SQLiteOptions(), namespace=namespace_of(target))
    await opened.open()
    await opened.migrate("head")
    try:
        yield opened
    finally:
        await opened.close()


def batch(
    session_id: str,
    events: Sequence[SessionEvent],
    *,
    new: bool = False,
    lease: Lease | None = None,
    now: int = NOW,
    index: bool = False,
    **fields: Any,
) -> AppendBatch:
    """The batch `SessionStore.append` would prepare (``new``: the session's first append;
    ``index``: for the search index)."""
    change = batch_change(list(events), inherited_below=None)
    return AppendBatch(
        session_id,
        [event_row(session_id, e) for e in events],
        header_row(header(session_id, **fields)) if new else None,
        now,
        lease,
        None if change is None else projection_of(session_id, change),
        index,
    )


def assistant(seq: int, usage: dict[str, int]) -> SessionEvent:
    message = {
        "id": f"a{seq}",
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    data = {"turn": 1, "step": 1, "message": message, "usage": usage}
    return SessionEvent("assistant/message", seq, T0 + seq, data, surface_op="append")


def test_every_backend_implements_every_operation() -> None:
    operations = {
        name
        for name in dir(Recorder)
        if not name.startswith("_") and callable(getattr(Recorder, name, None))
    }
    assert len(operations) >= 30
    from todo_sessions.store.postgres import PostgresRecorder
    from todo_sessions.store.sqlite import SQLiteRecorder

    for backend in (SQLiteRecorder, PostgresRecorder):
        missing = {name for name in operations if not callable(getattr(backend, name, None))}
        assert not missing, f"{backend.__name__} lacks {sorted(missing)}"


async def test_schema_operations(recorder: BackendRecorder) -> None:
    assert await recorder.schema_revision() == head_revision()
    assert await recorder.migrate("head") == head_revision()  # nothing left to do
    store_id = await recorder.store_id()
    assert isinstance(store_id, str) and store_id
    assert await recorder.check_integrity() == []
    await recorder.close()
    await recorder.close()  # idempotent (and once more by the fixture)


async def test_append_under_the_seq_check_and_the_reads_by_range(
    recorder: BackendRecorder,
) -> None:
    with pytest.raises(SessionNotFoundError):  # neither stored nor given a header
        await recorder.append(batch("s", turn(0)))
    incarnation, revision, next_seq = await recorder.append(
        batch("s", turn(0), new=True, cwd="/repo")
    )
    assert (revision, next_seq) == (1, 6) and incarnation
    assert await recorder.append(batch("s", turn(6, 2))) == (incarnation, 2, 12)
    with pytest.raises(SeqConflictError):  # does not start at the stored next seq
        await recorder.append(batch("s", turn(6, 2)))

    row = await recorder.find_session("s")
    assert row is not None
    assert (row.next_seq, row.revision, row.cwd) == (12, 2, "/repo")
    assert await recorder.find_session("nobody") is None
    assert (await recorder.read_session("s")).incarnation == incarnation
    with pytest.raises(SessionNotFoundError):
        await recorder.read_session("nobody")

    row, events = await recorder.read_events("s", 0)
    assert events == [*turn(0), *turn(6, 2)] and row.next_seq == 12
    assert (await recorder.read_events("s", 4, 3))[1] == [*turn(0)[4:], *turn(6, 2)[:1]]
    assert (await recorder.read_events("s", 12))[1] == []

    assert await recorder.count_events("s", None) == 12
    assert await recorder.count_events("s", "turn/start") == 2
    latest = await recorder.latest_event("s", ("turn/start", "turn/end"), 7)
    assert latest is not None and (latest.type, latest.seq) == ("turn/start", 6)
    todos = await recorder.latest_todos("s", None)
    assert todos is not None and [t.content for t in todos] == ["plan"]
    assert await recorder.latest_todos("s", 1) is None

    summary = await recorder.read_summary("s")
    assert isinstance(summary, SummaryRow) and SummaryRow._fields == SUMMARY_COLUMNS
    assert isinstance(row, SessionRow)
    assert (summary.id, summary.next_seq, summary.open_todos) == ("s", 12, True)
    assert await recorder.seqs_past_end("s", 10) == []


async def test_surface_state_live_state_and_checkpoints(recorder: BackendRecorder) -> None:
    events = [*turn(0), user_message(6, "more"), *turn(7, 2)]
    await recorder.append(batch("s", events, new=True))
    plain = await recorder.read_surface_state("s", None)
    assert plain.from_checkpoint is None
    messages = plain.state.surface.messages()
    assert len(messages) == 3

    with pytest.raises(SessionNotFoundError):
        await recorder.write_checkpoint(CheckpointWrite("nobody", 1, "{}", NOW, 4))
    for upto in (3, 7, 10):
        live = LiveState.empty()
        live.apply_all(events[:upto])
        text = live.encode()
        assert await recorder.write_checkpoint(CheckpointWrite("s", upto, text, NOW + upto, 2))
    assert not await recorder.write_checkpoint(CheckpointWrite("s", 99, text, NOW, 2))  # past end
    listed = await recorder.read_checkpoints("s")
    assert [(seq, created) for seq, _format, created, _size in listed] == [
        (7, NOW + 7),
        (10, NOW + 10),
    ]  # the newest two kept
    assert [seq for seq, _text in await recorder.read_checkpoint_texts("s")] == [7, 10]
    assert (await recorder.read_checkpoint_texts("s"))[1][1] == text

    from_checkpoint = await recorder.read_surface_state("s", None)
    assert from_checkpoint.from_checkpoint == 10
    assert from_checkpoint.state.surface.messages() == messages
    as_of = await recorder.read_surface_state("s", 8)
    assert as_of.from_checkpoint == 7
    resumed = await recorder.read_live_state("s")
    assert resumed.from_checkpoint == 10 and resumed.skipped == []
    assert resumed.state.next_seq == len(events)

    assert await recorder.delete_checkpoints("s") == 2
    assert await recorder.read_checkpoints("s") == []
    assert (await recorder.read_live_state("s")).from_checkpoint is None


async def test_list_sessions_with_filters_ids_and_usage(recorder: BackendRecorder) -> None:
    await recorder.append(batch("a", turn(0), new=True, cwd="/one", now=NOW))
    await recorder.append(batch("b", [user_message(0)], new=True, cwd="/two", now=NOW + 1))
    await recorder.append(
        batch("c", [assistant(0, {"input_tokens": 3}), todo_write(1)], new=True, now=NOW + 2)
    )
    page = await recorder.list_sessions(10, None, None)
    assert [r.id for r in page] == ["c", "b", "a"]  # newest activity first
    assert [r.id for r in await recorder.list_sessions(1, (NOW + 2, "c"), None)] == ["b"]
    assert [r.id for r in await recorder.list_sessions(10, None, ListFilters(cwd="/one"))] == ["a"]
    open_todos = ListFilters(has_open_todos=True)
    assert [r.id for r in await recorder.list_sessions(10, None, open_todos)] == ["a"]
    assert await recorder.session_ids("sessions", "", 10) == ["a", "b", "c"]
    assert await recorder.session_ids("sessions", "a", 1) == ["b"]
    assert await recorder.session_ids("events", "", 10) == ["a", "b", "c"]
    usage = await recorder.usage_payloads("c")
    assert [(u.seq, u.data["usage"]) for u in usage] == [(0, {"input_tokens": 3})]
    assert all(isinstance(u, UsagePayload) for u in usage)


async def test_leases_acquire_renew_release_and_fence_appends(recorder: BackendRecorder) -> None:
    await recorder.append(batch("s", turn(0), new=True))
    first = await recorder.acquire_lease("s", "one", NOW, 30_000, steal=False)
    assert (first.owner, first.epoch, first.expires_at) == ("one", 1, NOW + 30_000)
    with pytest.raises(SessionLeasedError):
        await recorder.acquire_lease("s", "two", NOW + 1, 30_000, steal=False)
    second = await recorder.acquire_lease("s", "two", NOW + 2, 30_000, steal=True)
    assert second.epoch == 2
    holders = await recorder.lease_holders(("s", "nobody"))
    assert list(holders) == ["s"] and holders["s"].owner == "two"
    assert holders["s"].epoch == 2 and holders["s"].expires_at == NOW + 30_002

    with pytest.raises(LeaseLostError):
        await recorder.renew_lease(first, NOW + 3, 30_000)
    with pytest.raises(LeaseLostError):  # fenced: nothing written
        await recorder.append(batch("s", turn(6, 2), lease=first, now=NOW + 3))
    renewed = await recorder.renew_lease(second, NOW + 4, 60_000)
    assert renewed.expires_at == NOW + 60_004
    assert (await recorder.append(batch("s", turn(6, 2), lease=renewed, now=NOW + 5)))[2] == 12

    assert not await recorder.release_lease(first)
    assert await recorder.release_lease(renewed)
    assert await recorder.lease_holders(("s",)) == {}
    again = await recorder.acquire_lease("s", "one", NOW + 6, 30_000, steal=False)
    assert again.epoch == 1  # a released lease starts over


async def test_delete_removes_the_session_its_events_and_its_lease(
    recorder: BackendRecorder,
) -> None:
    await recorder.append(batch("s", turn(0), new=True))
    await recorder.acquire_lease("s", "one", NOW, 30_000, steal=False)
    assert await recorder.delete("s")
    assert await recorder.find_session("s") is None
    assert await recorder.lease_holders(("s",)) == {}
    assert await recorder.session_ids("events", "", 10) == []
    assert not await recorder.delete("s")


async def test_catch_up_index_takes_every_committed_append_once(
    recorder: BackendRecorder,
) -> None:
    first = [*turn(0), user_message(6, "findme first")]
    await recorder.append(batch("s", first, new=True, index=True))
    second = [user_message(7, "findme second"), *turn(8)]
    await recorder.append(batch("s", second, index=True))
    await recorder.append(batch("off", turn(0), new=True))  # the index off: nothing pending
    logged = [*first, *second]
    expected = index_rows_of(
        expected_rows("s", ((e.seq, e.type, json.loads(e.data_json)) for e in logged))
    )
    assert expected
    # the writer may have caught up while idle (SQLite): the rows are there once either way
    written = await recorder.catch_up_index()
    assert written in (0, len(expected))
    assert await recorder.index_rows("s") == expected
    assert await recorder.pending_index() == 0
    assert await recorder.catch_up_index() == 0  # nothing pending: nothing written twice
    assert await recorder.index_rows("s") == expected
    assert await recorder.index_rows("off") == []

    # a session deleted before its pending append was indexed: nothing indexed, nothing left
    await recorder.append(batch("gone", [user_message(0, "findme gone")], new=True, index=True))
    assert await recorder.delete("gone")
    assert await recorder.catch_up_index() == 0
    assert await recorder.index_rows("gone") == []
    assert await recorder.pending_index() == 0


async def test_search_finds_indexed_events_newest_first_in_typed_rows(
    recorder: BackendRecorder,
) -> None:
    await recorder.append(batch("s", [user_message(0, "findme one")], new=True, index=True))
    await recorder.append(batch("s", [user_message(1, "findme two")], index=True))
    await recorder.append(batch("t", [user_message(0, "other words")], new=True, index=True))
    await recorder.catch_up_index()
    query = parse_query("findme")
    page = await recorder.search(query, DEFAULT_KINDS, SearchFilters(), 10, None)
    assert [(r.session_id, r.seq) for r in page.rows] == [("s", 1), ("s", 0)]
    assert all(isinstance(r, SearchRow) for r in page.rows)
    assert page.rows[0].type == "user/message" and "findme two" in page.rows[0].body
    assert page.replacing == frozenset()  # nothing in "s" replaced anything
    older = await recorder.search(query, DEFAULT_KINDS, SearchFilters(), 10, page.rows[0].id)
    assert [(r.session_id, r.seq) for r in older.rows] == [("s", 0)]
    only_t = await recorder.search(
        parse_query("words"), DEFAULT_KINDS, SearchFilters(cwd="/nowhere"), 10, None
    )
    assert only_t.rows == []


async def test_reindex_rebuilds_the_index_from_the_logs(recorder: BackendRecorder) -> None:
    await recorder.append(batch("s", [user_message(0, "findme")], new=True, index=True))
    await recorder.append(batch("off", [user_message(0, "unindexed")], new=True))
    assert await recorder.index_rows("off") == []
    assert await recorder.reindex() == 2  # both logs, one row each
    assert await recorder.pending_index() == 1  # the mark stays: "s"'s event, indexed now
    assert await recorder.catch_up_index() == 0  # found indexed: nothing written twice
    assert await recorder.pending_index() == 0
    assert await recorder.index_rows("off") == [IndexRow("off", 0, "user", "unindexed")]
    assert await recorder.index_problems() == []


async def test_search_config_is_postgresql_s(recorder: BackendRecorder) -> None:
    if recorder.dialect == "sqlite":
        assert await recorder.search_config() is None
        return
    assert await recorder.search_config() == "simple"
    with pytest.raises(ValueError, match="not a text search configuration"):
        await recorder.reindex(search_config="no_such_config")
    assert await recorder.search_config() == "simple"  # nothing changed
    await recorder.reindex(search_config="english")
    assert await recorder.search_config() == "english"
    await recorder.reindex(search_config="simple")


async def test_thin_checkpoints_keeps_the_newest(recorder: BackendRecorder) -> None:
    await recorder.append(batch("s", turn(0), new=True))
    text = LiveState.empty().encode()
    for seq in (1, 2, 3):
        assert await recorder.write_checkpoint(CheckpointWrite("s", seq, text, NOW, 10))
    assert await recorder.thin_checkpoints("s", 5) == 0
    assert await recorder.thin_checkpoints("s", 2) == 1
    assert [c[0] for c in await recorder.read_checkpoints("s")] == [2, 3]
    assert await recorder.thin_checkpoints("s", 0) == 2
    assert await recorder.read_checkpoints("s") == []


async def test_wait_for_append_returns_when_the_session_grows(recorder: BackendRecorder) -> None:
    await recorder.append(batch("s", turn(0), new=True))
    async with recorder.wait_for_append("s") as wait:
        waiting = asyncio.create_task(wait(60.0))
        await asyncio.sleep(0)
        await recorder.append(batch("s", turn(6, 2)))
        await asyncio.wait_for(waiting, 30)  # long before the 60 s poll
