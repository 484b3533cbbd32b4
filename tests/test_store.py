"""The store contract, run against every backend (see conftest.py).

See docs/design.md, "The store contract".
"""

from __future__ import annotations

import asyncio
import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from factories import T0, chunks, header, in_namespace, raw_sql, todo_write, turn, user_message
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from todo_sessions import (
    InvalidEventError,
    SeqConflictError,
    SessionEvent,
    SessionExistsError,
    SessionNotFoundError,
    SessionStore,
    StoreError,
)


async def stored_count(store: SessionStore, session_id: str) -> int:
    def count(conn: Connection) -> int:
        result = conn.execute(
            text(in_namespace(store, "SELECT COUNT(*) FROM session_events WHERE session_id = :s")),
            {"s": session_id},
        )
        return int(result.scalar_one())

    return int(await raw_sql(store, count))


async def test_round_trip_events_and_header(store: SessionStore) -> None:
    h = header("s1", cwd="/work/repo", title="Fix the build", origin="cli", delegation_depth=1)
    await store.create(h)
    events = [*turn(0), *chunks(6, 3)]
    events.append(SessionEvent("vendor/telemetry", 9, T0, {"x": [1, 2.5, None]}, ignorable=True))
    await store.append("s1", events)
    back = await store.read_from("s1")
    assert back == events
    assert [e.to_json() for e in back] == [e.to_json() for e in events]
    log = await store.read("s1")
    assert log.header == h
    assert log.events == tuple(events)
    assert await store.header("s1") == h


async def test_unicode_and_large_numbers_round_trip_byte_exact(store: SessionStore) -> None:
    await store.create(header("u"))
    data = {"text": 'héllo ✓ 𝄞 \u0000 "quoted" \\', "big": 2**62, "f": 1e-300, "neg": -1.5}
    event = SessionEvent("request/context", 0, -5, data)
    await store.append("u", [event])
    (back,) = await store.read_from("u")
    assert back.to_json() == event.to_json()
    assert back.data == data


async def test_first_append_materialises_and_list_hides_empty_sessions(
    store: SessionStore,
) -> None:
    await store.create(header("empty"))
    await store.create(header("full"))
    assert await store.list() == []
    with pytest.raises(SessionNotFoundError):
        await store.read_from("empty")
    await store.append("empty", [])  # empty batch: still nothing written
    assert await store.list() == []
    await store.append("full", turn(0))
    assert [s.id for s in await store.list()] == ["full"]
    summary = (await store.list())[0]
    assert summary.next_seq == 6 and summary.created_at == T0


async def test_append_to_unknown_id_without_create_is_refused(store: SessionStore) -> None:
    with pytest.raises(SessionNotFoundError, match="nope"):
        await store.append("nope", turn(0))
    with pytest.raises(SessionNotFoundError):
        await store.read_from("nope")
    with pytest.raises(SessionNotFoundError):
        await store.delete("nope")


async def test_create_of_stored_id_is_refused(store: SessionStore) -> None:
    await store.create(header("s1"))
    with pytest.raises(SessionExistsError):
        await store.create(header("s1"))
    await store.append("s1", turn(0))
    with pytest.raises(SessionExistsError):
        await store.create(header("s1"))


async def test_revision_tokens(store: SessionStore) -> None:
    await store.create(header("s1"))
    token1 = await store.append("s1", turn(0))
    assert await store.revision("s1") == token1
    assert (await store.read("s1")).revision == token1
    assert (await store.list())[0].revision == token1
    assert await store.append("s1", []) == token1
    token2 = await store.append("s1", turn(6, 2))
    assert token2 != token1
    assert token2.rsplit(":", 1)[1] == "2"
    assert token1.split(":")[0] == store.store_id


@pytest.mark.parametrize("start", [0, 1, 5, 7])
async def test_append_must_start_at_stored_next_seq(store: SessionStore, start: int) -> None:
    await store.create(header("s1"))
    token = await store.append("s1", turn(0))
    batch = [SessionEvent("turn/start", start + i, T0, {"turn": 2}) for i in range(2)]
    with pytest.raises(SeqConflictError) as info:
        await store.append("s1", batch)
    assert f"starts at seq {start}, stored next seq is 6" in str(info.value)
    assert await store.revision("s1") == token
    assert await stored_count(store, "s1") == 6


async def test_replayed_batch_is_a_conflict_and_writes_nothing(store: SessionStore) -> None:
    await store.create(header("s1"))
    batch = turn(0)
    token = await store.append("s1", batch)
    with pytest.raises(SeqConflictError):
        await store.append("s1", batch)
    assert await store.read_from("s1") == batch
    assert await store.revision("s1") == token


async def test_gap_inside_batch_writes_nothing(store: SessionStore) -> None:
    await store.create(header("s1"))
    token = await store.append("s1", turn(0))
    gappy = [user_message(6), user_message(8)]
    with pytest.raises(SeqConflictError, match="not contiguous: seq 8 follows seq 6"):
        await store.append("s1", gappy)
    assert await stored_count(store, "s1") == 6
    assert await store.revision("s1") == token


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (b"x", "bytes"),
        ({1, 2}, "set"),
        (float("nan"), "nan"),
        (datetime.datetime(2026, 1, 1), "datetime"),
        (object(), "object"),
    ],
)
async def test_non_json_data_is_refused_naming_the_event(
    store: SessionStore, bad: Any, why: str
) -> None:
    await store.create(header("s1"))
    token = await store.append("s1", turn(0))
    wire = [
        user_message(6).to_dict(),
        {"type": "request/context", "seq": 7, "time": T0, "data": {"v": bad}},
    ]
    with pytest.raises(InvalidEventError) as info:
        await store.append("s1", wire)
    assert "'request/context'" in str(info.value) and "seq 7" in str(info.value)
    assert why in str(info.value)
    assert await stored_count(store, "s1") == 6
    assert await store.revision("s1") == token


async def test_invalid_payload_in_a_batch_writes_nothing(store: SessionStore) -> None:
    await store.create(header("s1"))
    batch = [*turn(0), SessionEvent("todo/write", 6, T0, {"todos": [{"content": ""}]})]
    with pytest.raises(InvalidEventError, match=r"'todo/write' \(seq 6\)"):
        await store.append("s1", batch)
    assert await store.list() == []
    await store.append("s1", batch[:6])  # the pending create survived the refusal
    assert await stored_count(store, "s1") == 6


async def test_unknown_type_not_ignorable_is_refused(store: SessionStore) -> None:
    await store.create(header("s1"))
    with pytest.raises(InvalidEventError, match="not marked ignorable"):
        await store.append("s1", [SessionEvent("vendor/x", 0, T0, {})])


async def test_read_from_edges(store: SessionStore) -> None:
    await store.create(header("s1"))
    events = turn(0)
    await store.append("s1", events)
    assert await store.read_from("s1", 4) == events[4:]
    assert await store.read_from("s1", 6) == []
    assert await store.read_from("s1", 1000) == []
    with pytest.raises(ValueError):
        await store.read_from("s1", -1)


@pytest.mark.parametrize("page_size", [1, 4, 6, 100])
async def test_stream_reads_in_pages(store: SessionStore, page_size: int) -> None:
    await store.create(header("s1"))
    events = [*turn(0), *turn(6, 2), *turn(12, 3)]
    await store.append("s1", events)
    got = [e async for e in store.stream("s1", page_size=page_size)]
    assert got == events
    got = [e async for e in store.stream("s1", 7, page_size=page_size)]
    assert got == events[7:]
    with pytest.raises(SessionNotFoundError):
        async for _ in store.stream("missing"):
            pass


async def test_list_is_newest_first_with_keyset_pages(store: SessionStore) -> None:
    for i in range(7):
        await store.create(header(f"s{i}"))
        await store.append(f"s{i}", turn(0))
        await asyncio.sleep(0.002)
    await store.append("s2", turn(6, 2))  # most recent activity
    first = await store.list(limit=3)
    assert [s.id for s in first] == ["s2", "s6", "s5"]
    second = await store.list(limit=3, before=first[-1])
    assert [s.id for s in second] == ["s4", "s3", "s1"]
    third = await store.list(limit=3, before=second[-1])
    assert [s.id for s in third] == ["s0"]
    assert await store.list(limit=3, before=third[-1]) == []
    with pytest.raises(ValueError):
        await store.list(limit=0)


async def test_delete_removes_session_and_rows_and_recreate_gets_new_incarnation(
    store: SessionStore,
) -> None:
    await store.create(header("s1"))
    token = await store.append("s1", turn(0))
    await store.delete("s1")
    assert await store.list() == []
    assert await stored_count(store, "s1") == 0
    with pytest.raises(SessionNotFoundError):
        await store.read_from("s1")
    await store.create(header("s1"))
    again = await store.append("s1", turn(0))
    assert again != token and again.endswith(":1")


async def test_mutating_inputs_after_append_never_changes_the_log(store: SessionStore) -> None:
    await store.create(header("s1"))
    wire = user_message(0).to_dict()
    await store.append("s1", [wire])
    wire["data"]["content"][0]["text"] = "tampered"
    (stored,) = await store.read_from("s1")
    assert stored.data["content"][0]["text"] == "hello"


async def test_event_rows_cannot_be_updated_or_deleted_with_raw_sql(store: SessionStore) -> None:
    await store.create(header("s1"))
    await store.append("s1", turn(0))
    replace = (
        "INSERT OR REPLACE INTO session_events (session_id, seq, type, time, data) "
        "VALUES ('s1', 0, 'turn/start', 0, '[]')"
        if store.dialect == "sqlite"
        else "INSERT INTO session_events (session_id, seq, type, time, data) "
        "VALUES ('s1', 0, 'turn/start', 0, '[]') "
        "ON CONFLICT (session_id, seq) DO UPDATE SET data = excluded.data"
    )
    statements = [
        replace,
        "UPDATE session_events SET data = '{}' WHERE session_id = 's1' AND seq = 0",
        "UPDATE session_events SET seq = seq + 100 WHERE session_id = 's1'",
        "DELETE FROM session_events WHERE session_id = 's1' AND seq = 5",
    ]
    for statement in statements:
        with pytest.raises(DBAPIError, match="append-only"):
            sql = in_namespace(store, statement)
            await raw_sql(store, lambda conn, s=sql: conn.execute(text(s)))
    assert await stored_count(store, "s1") == 6
    assert (await store.read_from("s1"))[0].data == {"turn": 1}


async def test_other_store_instance_appends_without_create(shared_db_url: str) -> None:
    async with SessionStore(shared_db_url) as a, SessionStore(shared_db_url) as b:
        await a.create(header("s1"))
        await a.append("s1", turn(0))
        await b.append("s1", turn(6, 2))
        assert len(await a.read_from("s1")) == 12
        with pytest.raises(SessionExistsError):
            await b.create(header("s1"))


async def test_two_stores_racing_exactly_one_wins_each_seq(shared_db_url: str) -> None:
    async with SessionStore(shared_db_url) as a, SessionStore(shared_db_url) as b:
        await a.create(header("race"))
        await a.append("race", turn(0))

        async def writer(store: SessionStore, tag: str) -> list[int]:
            won: list[int] = []
            for _ in range(40):
                seq = len(await store.read_from("race"))
                event = SessionEvent("request/context", seq, T0, {"writer": tag})
                try:
                    await store.append("race", [event])
                    won.append(seq)
                except SeqConflictError:
                    pass
            return won

        won_a, won_b = await asyncio.gather(writer(a, "a"), writer(b, "b"))
        assert not set(won_a) & set(won_b)
        events = await a.read_from("race")
        assert [e.seq for e in events] == list(range(len(events)))
        by_seq = {e.seq: e.data.get("writer") for e in events[6:]}
        assert sorted(by_seq) == sorted(won_a + won_b)
        assert all(by_seq[s] == "a" for s in won_a)
        assert all(by_seq[s] == "b" for s in won_b)


async def test_json_columns_hold_the_wire_text(store: SessionStore) -> None:
    await store.create(header("s1"))
    event = SessionEvent(
        "tool/result",
        0,
        T0,
        {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "r",
                "role": "user",
                "source": {"kind": "tool", "callId": "c"},
                "content": [{"type": "tool-result", "toolCallId": "c", "content": []}],
            },
        },
        surface_op={"op": "replace", "start": 0, "end": 0},
        source_event_seqs=[],
    )
    with pytest.raises(InvalidEventError):  # a tool result must cite something
        await store.append("s1", [event])
    ok = event.replace(seq=1, source_event_seqs=[0])
    await store.append("s1", [todo_write(0), ok])

    def raw(conn: Connection) -> Any:
        query = "SELECT data, surface_op, source_event_seqs FROM session_events WHERE seq = 1"
        return conn.execute(text(in_namespace(store, query))).one()

    data, op, seqs = await raw_sql(store, raw)
    assert data == ok.data_json
    assert json.loads(op) == {"op": "replace", "start": 0, "end": 0}
    assert json.loads(seqs) == [0]


async def test_follow_yields_stored_then_new_events_and_releases_on_close(
    store: SessionStore,
) -> None:
    await store.create(header("f"))
    await store.append("f", turn(0))
    tail = store.follow("f", 2, poll_interval=0.01)
    assert [(await anext(tail)).seq for _ in range(4)] == [2, 3, 4, 5]
    pending = asyncio.create_task(anext(tail))
    await asyncio.sleep(0.05)
    assert not pending.done()
    await store.append("f", turn(6, 2))
    assert (await asyncio.wait_for(pending, 5)).seq == 6
    assert (await anext(tail)).seq == 7
    await tail.aclose()
    engine = getattr(store._core.recorder, "_engine", None)  # PostgreSQL: the pooled engine
    if engine is not None:
        assert engine.pool.checkedout() == 0
    with pytest.raises(SessionNotFoundError):
        await anext(store.follow("missing"))


async def test_many_followers_do_not_starve_the_store(store: SessionStore) -> None:
    await store.create(header("busy"))
    await store.append("busy", turn(0))
    seen: dict[int, list[int]] = {i: [] for i in range(3 * 5 + 5)}  # more than the pool holds

    async def follow(i: int) -> None:
        async for event in store.follow("busy", 4, poll_interval=0.01):
            seen[i].append(event.seq)
            if event.seq == 11:
                return

    followers = [asyncio.create_task(follow(i)) for i in seen]
    await asyncio.sleep(0.1)
    await asyncio.wait_for(store.append("busy", turn(6, 2)), 10)
    await asyncio.wait_for(asyncio.gather(*followers), 20)
    assert all(seqs == list(range(4, 12)) for seqs in seen.values())


@pytest.mark.parametrize(
    ("query", "args"),
    [
        ("sslmode=require", {"ssl": "require"}),
        ("connect_timeout=2.5", {"timeout": 2.5}),
        ("application_name=harness", {"server_settings": {"application_name": "harness"}}),
    ],
)
def test_libpq_url_parameters_become_asyncpg_arguments(query: str, args: dict[str, Any]) -> None:
    from todo_sessions.store.engine import parse_url

    target = parse_url(f"postgresql://u@h/db?{query}")
    assert dict(target.connect_args) == args
    assert not target.url.query
    assert target.url.drivername == "postgresql+asyncpg"


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("sqlite:///{dir}/s.db", "sqlite:///{dir}/s.db"),  # no driver name added
        ("{dir}/s.db", "{dir}/s.db"),
        ("postgresql://u:secret@h/db", "postgresql://u:***@h/db"),
        (
            "postgresql://u@h/db?password=secret&sslmode=require",
            "postgresql://u@h/db?password=***&sslmode=require",
        ),
        (
            "postgresql://u@h/db?sslmode=require&PASSWORD=secret",
            "postgresql://u@h/db?sslmode=require&PASSWORD=***",
        ),
    ],
)
def test_the_url_is_shown_as_given_with_its_password_masked(
    given: str, shown: str, tmp_path: Path
) -> None:
    assert SessionStore(given.format(dir=tmp_path)).url == shown.format(dir=tmp_path)


async def test_an_error_names_the_url_as_given(tmp_path: Path) -> None:
    (tmp_path / "a.db").mkdir()  # a directory where the file should be
    url = f"sqlite:///{tmp_path}/a.db"
    with pytest.raises(StoreError) as caught:
        async with SessionStore(url):
            pass
    assert f"opening {url}:" in str(caught.value)
    assert "aiosqlite" not in str(caught.value)


async def test_an_append_through_the_store_wakes_its_followers_at_once(store: SessionStore) -> None:
    """No waiting for the next poll (SQLite) or notification round trip to be slow: a follower
    of the same store sees a new event long before its poll interval would have passed."""
    await store.create(header("w"))
    await store.append("w", turn(0))
    tail = store.follow("w", 6, poll_interval=60)
    pending = asyncio.create_task(anext(tail))
    await asyncio.sleep(0.05)
    assert not pending.done()
    await store.append("w", turn(6, 2))
    assert (await asyncio.wait_for(pending, 10)).seq == 6
    await tail.aclose()
