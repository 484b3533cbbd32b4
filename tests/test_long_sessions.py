"""Long sessions: projection checkpoints, live sessions that do not hold their log, timed flushes.

Checkpoints are derived data: for any log and any checkpoints, resuming and the projections
as of any seq equal the plain fold of the log, and deleting every checkpoint changes nothing
but speed. A checkpoint that cannot be used is passed over (with a warning) and reported by
`verify`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import pytest
from factories import T0, header, raw_sql, turn
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from logs import build_plan, log_plans, rewritten_checkpoint

from todo_sessions import (
    CheckpointError,
    SessionEvent,
    SessionService,
    SessionStore,
    SurfaceReplace,
    verify_session,
)
from todo_sessions.core.checkpoint import CHECKPOINT_FORMAT, fold
from todo_sessions.core.repair import interrupted_turn_closers
from todo_sessions.core.surface import derive_messages
from todo_sessions.core.todos import current_todos

HERE = Path(__file__).resolve().parent


def turn_ends(events: list[SessionEvent]) -> list[int]:
    """The seqs just after each ``turn/end``: where the service writes checkpoints."""
    return [e.seq + 1 for e in events if e.type == "turn/end"]


async def store_log(store: SessionStore, session_id: str, events: list[SessionEvent]) -> None:
    await store.create(header(session_id))
    if events:
        await store.append(session_id, events)


async def assert_projections_equal_the_fold(
    store: SessionStore, session_id: str, events: list[SessionEvent]
) -> None:
    for n in range(len(events)):
        upto = events[: n + 1]
        assert await store.derive_messages(session_id, upto_seq=n) == derive_messages(upto), n
        assert await store.current_todos(session_id, upto_seq=n) == current_todos(upto), n


# -- the property -------------------------------------------------------------------------------


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=log_plans(max_turns=4), todo_slots=st.sets(st.integers(0, 40)), data=st.data())
def test_checkpoints_never_change_what_is_read(
    tmp_path_factory: pytest.TempPathFactory, plan: Any, todo_slots: set[int], data: Any
) -> None:
    events, _ = build_plan(plan, todo_slots)
    assume(events)  # a session is stored with its first event
    ends = turn_ends(events)
    chosen = data.draw(st.sets(st.sampled_from(ends)) if ends else st.just(set()))
    if "url" not in _PROPERTY_DB:  # one database for every example (migrating costs 100 ms)
        _PROPERTY_DB["url"] = f"sqlite:///{tmp_path_factory.mktemp('cp')}/s.db"
    sid = uuid.uuid4().hex

    async def run() -> None:
        async with SessionStore(_PROPERTY_DB["url"]) as store:
            await store_log(store, sid, events)
            for seq in sorted(chosen):
                assert await store.write_checkpoint(sid, fold(events[:seq]), keep=100)
            assert [c.seq for c in await store.checkpoints(sid)] == sorted(chosen)
            await assert_projections_equal_the_fold(store, sid, events)
            resumed = await store.resume_state(sid)
            closers = interrupted_turn_closers(events, session_id=sid)
            assert resumed.closers == tuple(closers)
            assert resumed.state.encode() == fold(events + closers).encode()
            assert resumed.from_checkpoint == max(chosen, default=None)
            assert await verify_session(store, sid) == []

    asyncio.run(run())


_PROPERTY_DB: dict[str, str] = {}


# -- through the service ------------------------------------------------------------------------


def scripted_turn(
    session: Any, number: int, text: str, n_chunks: int, *, cite: bool = True
) -> None:
    session.append("turn/start", {"turn": number})
    session.append(
        "user/message",
        {
            "id": f"u{number}",
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        },
        surface_op="append",
    )
    session.append("step/start", {"turn": number, "step": 1})
    first = session.next_seq
    for i in range(n_chunks):
        chunk = {"type": "text-delta", "index": 0, "text": f"w{i} "}
        session.append("assistant/chunk", {"turn": number, "step": 1, "chunk": chunk})
    session.append(
        "assistant/message",
        {
            "turn": number,
            "step": 1,
            "message": {
                "id": f"a{number}",
                "role": "assistant",
                "content": [{"type": "text", "text": f"answer {number}"}],
                "source": {"kind": "model", "provider": "test", "model": "scripted"},
            },
        },
        surface_op="append",
        source_event_seqs=(list(range(first, session.next_seq)) or None) if cite else None,
    )
    session.append(
        "todo/write", {"todos": [{"content": f"task {number}", "status": "in_progress"}]}
    )
    session.append("step/end", {"turn": number, "step": 1})
    session.append("turn/end", {"turn": number, "reason": {"kind": "completed"}})


async def test_the_service_checkpoints_turn_ends_and_resumes_from_them(db_url: str) -> None:
    async with SessionService(SessionStore(db_url), flush_interval=None) as service:
        session = await service.new("long")
        for number in range(1, 4):
            scripted_turn(session, number, f"prompt {number}", 5)
            await service.checkpoint("long", "turn-end")
        assert [c.seq for c in await service.store.checkpoints("long")] == [12, 24, 36]
        assert list(session.events) == []  # all stored: the live session let go of them
        await service.close("long")
        resumed = await service.resume("long")
        assert resumed.next_seq == 36 and resumed.last_turn == 3
        stored = await service.store.read_from("long")
        assert resumed.derive_messages() == derive_messages(stored)
        assert resumed.todos == current_todos(stored)
        scripted_turn(resumed, 4, "more", 2)  # numbering goes on from the state
        await service.checkpoint("long", "turn-end")
        stored = await service.store.read_from("long")
        assert [e.data["turn"] for e in stored if e.type == "turn/start"] == [1, 2, 3, 4]


async def test_a_long_turn_is_checkpointed_every_n_events(tmp_path: Path) -> None:
    store = SessionStore(f"sqlite:///{tmp_path}/s.db")
    async with SessionService(store, flush_interval=None, checkpoint_every=50) as service:
        session = await service.new("s")
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        for i in range(120):
            chunk = {"type": "text-delta", "index": 0, "text": "x"}
            session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
            if i % 10 == 9:
                await service.checkpoint("s", "before-model")
        assert [c.seq for c in await store.checkpoints("s")] == [52, 102]


async def test_deleting_every_checkpoint_changes_nothing_but_speed(db_url: str) -> None:
    events = turn(0) + turn(6, 2) + turn(12, 3)
    async with SessionStore(db_url) as store:
        await store_log(store, "s", events)
        for seq in turn_ends(events):
            await store.write_checkpoint("s", fold(events[:seq]))
        with_checkpoints = await store.resume_state("s")
        assert with_checkpoints.from_checkpoint == 18
        assert await store.delete_checkpoints("s") == 3
        without = await store.resume_state("s")
        assert without.from_checkpoint is None
        assert without.state.encode() == with_checkpoints.state.encode()
        await assert_projections_equal_the_fold(store, "s", events)


async def test_only_the_newest_checkpoints_are_kept(tmp_path: Path) -> None:
    events = turn(0) + turn(6, 2) + turn(12, 3) + turn(18, 4)
    async with SessionStore(f"sqlite:///{tmp_path}/s.db") as store:
        await store_log(store, "s", events)
        for seq in turn_ends(events):
            await store.write_checkpoint("s", fold(events[:seq]), keep=2)
        assert [c.seq for c in await store.checkpoints("s")] == [18, 24]
        # a checkpoint past the stored end is refused: its events are not all stored
        assert not await store.write_checkpoint("s", fold(events + turn(24, 5)))


# -- damaged checkpoints --------------------------------------------------------------------------


async def _put_checkpoint(store: SessionStore, session_id: str, seq: int, text: str) -> None:
    session_checkpoints = store.namespace.tables.session_checkpoints

    def put(conn: Any) -> None:
        conn.execute(
            session_checkpoints.delete().where(
                session_checkpoints.c.session_id == session_id,
                session_checkpoints.c.seq == seq,
            )
        )
        conn.execute(
            session_checkpoints.insert().values(
                session_id=session_id,
                seq=seq,
                format_version=CHECKPOINT_FORMAT,
                state=text,
                created_at=0,
            )
        )

    await raw_sql(store, put)


@pytest.mark.parametrize(
    "damage",
    ["not json", "unknown format", "another seq", "stale", "truncated", "nodes edited"],
)
async def test_a_checkpoint_that_cannot_be_used_is_passed_over_and_reported(
    db_url: str, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    events = turn(0) + turn(6, 2) + turn(12, 3)
    good = fold(events[:12]).encode()
    assert '"text":"hi"' in good.split("\n")[1]
    bad = {
        "not json": "{not json",
        "unknown format": rewritten_checkpoint(good, format=99),
        "another seq": fold(events[:6]).encode(),
        # the state of another log of the same length (its turn 2 was numbered 3)
        "stale": fold(turn(0) + turn(6, 3)).encode(),
        "truncated": good[: len(good) // 2],
        # an edit of the nodes that leaves their digest as it was
        "nodes edited": good.replace('"text":"hi"', '"text":"HI"'),
    }[damage]
    async with SessionStore(db_url) as store:
        await store_log(store, "s", events)
        await store.write_checkpoint("s", fold(events[:6]))
        await _put_checkpoint(store, "s", 12, bad)
        with caplog.at_level(logging.WARNING, logger="todo_sessions.store"):
            resumed = await store.resume_state("s")
        assert resumed.state.encode() == fold(events).encode()
        assert resumed.from_checkpoint == 6
        assert any("checkpoint at seq 12" in r.getMessage() for r in caplog.records)
        await assert_projections_equal_the_fold(store, "s", events)
        problems = await verify_session(store, "s")
        assert [(p.seq, p.kind) for p in problems] == [(12, "checkpoint")], problems


async def test_a_checkpoint_of_an_older_format_is_passed_over_quietly(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Format 1 (one JSON document) is what the previous version wrote: after an upgrade it
    is obsolete derived data, not damage. Reads fold past it without a warning, `verify` does
    not fail on it, and the session's next checkpoint takes over."""
    events = turn(0) + turn(6, 2)
    head, nodes = fold(events).encode().split("\n")
    wire = json.loads(head)
    wire.update(format=1, surface={"nodes": json.loads(nodes), "replacements": []})
    del wire["nodes"]
    async with SessionStore(db_url) as store:
        await store_log(store, "s", events)
        await _put_checkpoint(store, "s", 12, json.dumps(wire))
        with caplog.at_level(logging.WARNING, logger="todo_sessions.store"):
            resumed = await store.resume_state("s")
            assert await store.derive_messages("s") == derive_messages(events)
        assert resumed.from_checkpoint is None
        assert resumed.state.encode() == fold(events).encode()
        assert not [r for r in caplog.records if "checkpoint" in r.getMessage()]
        assert await verify_session(store, "s") == []
        assert await store.write_checkpoint("s", resumed.state)
        assert (await store.resume_state("s")).from_checkpoint == 12
        for future in (3, 99):  # a format from a newer version is still reported
            wire["format"] = future
            await _put_checkpoint(store, "s", 12, json.dumps(wire))
            [problem] = await verify_session(store, "s")
            assert f"has format {future}" in problem.message


@pytest.mark.parametrize("part", ["nodes", "todos"])
async def test_a_tampered_checkpoint_is_reported_by_verify(db_url: str, part: str) -> None:
    """A checkpoint edited in place with care (its state changed, the event it names kept,
    the digest of its nodes made to match) cannot be told from a good one without folding the
    log: reading uses it, `verify` reports it."""
    events = turn(0) + turn(6, 2)
    good = fold(events).encode()
    edit: dict[str, Any] = {
        "nodes": {"nodes": good.split("\n")[1].replace('"text":"hi"', '"text":"HI"')},
        "todos": {"todos": [{"content": "made up", "status": "pending"}]},
    }[part]
    tampered = rewritten_checkpoint(good, **edit)
    assert tampered != good
    async with SessionStore(db_url) as store:
        await store_log(store, "s", events)
        await _put_checkpoint(store, "s", 12, tampered)
        problems = await verify_session(store, "s")
        assert [(p.seq, p.kind) for p in problems] == [(12, "checkpoint")]
        assert "differs from the fold of the log" in problems[0].message


async def test_nodes_rewritten_with_their_digest_are_found_when_decoded(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Resuming reads a checkpoint's head and checks its nodes' digest, not the nodes
    themselves. Nodes rewritten together with their digest are found when decoded: reads that
    need the messages pass over the checkpoint, a session resumed from it raises
    `CheckpointError` when it first needs them, and `verify` reports it."""
    events = turn(0) + turn(6, 2)
    good = fold(events).encode()
    broken = rewritten_checkpoint(good, nodes=good.split("\n")[1].replace('"seq":1,', '"seq":2,'))
    async with SessionStore(db_url) as store:
        await store_log(store, "s", events)
        await store.write_checkpoint("s", fold(events[:6]))
        await _put_checkpoint(store, "s", 12, broken)
        with caplog.at_level(logging.WARNING, logger="todo_sessions.store"):
            assert await store.derive_messages("s") == derive_messages(events)
        assert any("checkpoint at seq 12" in r.getMessage() for r in caplog.records)
        resumed = await store.resume_state("s")
        assert resumed.from_checkpoint == 12 and resumed.state.todos == current_todos(events)
        with pytest.raises(CheckpointError, match="checkpoint surface node 1 is damaged"):
            resumed.state.surface.snapshot()
        problems = await verify_session(store, "s")
        assert [(p.seq, p.kind) for p in problems] == [(12, "checkpoint")]


async def test_a_checkpoint_that_the_log_does_not_continue_is_passed_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint whose surface lacks the node a later replace names: the events after it
    cannot be applied to it, so the read falls back to the fold (and `verify` reports it)."""
    summary = SessionEvent(
        "user/message",
        6,
        T0 + 6,
        {
            "id": "s6",
            "role": "user",
            "content": [{"type": "text", "text": "summary"}],
            "source": {"kind": "user"},
        },
        surface_op=SurfaceReplace(1, 1),
        source_event_seqs=[1],
    )
    events = [*turn(0), summary]
    async with SessionStore(f"sqlite:///{tmp_path}/s.db") as store:
        await store_log(store, "s", events)
        # node 1 is gone from this checkpoint
        broken = rewritten_checkpoint(
            fold(events[:6]).encode(), nodes="[]", surface={"order": [], "replacements": []}
        )
        await _put_checkpoint(store, "s", 6, broken)
        with caplog.at_level(logging.WARNING, logger="todo_sessions.store"):
            assert await store.derive_messages("s") == derive_messages(events)
            resumed = await store.resume_state("s")
        assert resumed.from_checkpoint is None
        assert resumed.state.encode() == fold(events).encode()
        assert any("does not continue with the log" in r.getMessage() for r in caplog.records)
        assert [p.kind for p in await verify_session(store, "s")] == ["checkpoint"]


# -- crashes ------------------------------------------------------------------------------------


async def test_a_checkpoint_is_stored_at_the_seq_its_text_was_taken_at(db_url: str) -> None:
    """The state given to `write_checkpoint` may grow while the write waits for the database
    (a live session appending on another thread): the text and its seq are taken together."""
    events = turn(0) + turn(6, 2)
    state = fold(events[:6])
    armed: list[SessionEvent] = []

    def clock() -> int:  # called after the text is taken, before the write: an append lands
        while armed:
            state.apply(armed.pop())
        return T0

    async with SessionStore(db_url, clock=clock) as store:
        await store_log(store, "s", events)
        armed.append(events[6])
        assert await store.write_checkpoint("s", state)
        assert state.next_seq == 7
        [info] = await store.checkpoints("s")
        assert info.seq == 6
        resumed = await store.resume_state("s")
        assert resumed.from_checkpoint == 6
        assert resumed.state.encode() == fold(events).encode()


async def test_a_crash_between_an_append_and_its_checkpoint_loses_nothing(db_url: str) -> None:
    events = turn(0) + turn(6, 2)
    async with SessionStore(db_url) as store:
        await store_log(store, "s", events[:6])
        await store.write_checkpoint("s", fold(events[:6]))
        await store.append("s", events[6:])  # then the process died: no checkpoint at 12
        resumed = await store.resume_state("s")
        assert resumed.from_checkpoint == 6
        assert resumed.state.encode() == fold(events).encode()


def test_a_crash_in_the_middle_of_writing_checkpoints_leaves_a_good_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    script = (
        "import asyncio, sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from factories import T0, header, turn\n"
        "from todo_sessions import SessionStore\n"
        "from todo_sessions.core.checkpoint import fold\n"
        "async def main():\n"
        "    events = turn(0) + turn(6, 2)\n"
        "    async with SessionStore(sys.argv[1]) as store:\n"
        "        await store.create(header('s'))\n"
        "        await store.append('s', events)\n"
        "        print('READY', flush=True)\n"
        "        while True:\n"
        "            for seq in (6, 12):\n"
        "                await store.write_checkpoint('s', fold(events[:seq]), keep=1)\n"
        "asyncio.run(main())\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, url, str(HERE)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "READY"
        asyncio.run(asyncio.sleep(0.3))  # many checkpoint transactions under way
        child.kill()
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
        if child.stdout is not None:
            child.stdout.close()

    async def check() -> None:
        async with SessionStore(url) as store:
            stored = await store.read_from("s")
            resumed = await store.resume_state("s")
            assert resumed.state.encode() == fold(stored).encode()
            assert await verify_session(store, "s") == []
            assert len(await store.checkpoints("s")) == 1  # a whole transaction, or none

    asyncio.run(check())


# -- memory -------------------------------------------------------------------------------------


async def test_a_resumed_session_does_not_hold_its_log(tmp_path: Path) -> None:
    """20 turns of 1,000 streamed chunks: the resumed live session holds the projections, not
    the 20,000 events, and appending keeps it flat (bench/long_sessions_bench.py measures
    100k and 1M). The new turns' messages cite no chunks here: citations are part of the
    surface (a message citing 1,000 chunks keeps their seqs) and would grow with the messages,
    not with the log."""
    url = f"sqlite:///{tmp_path}/s.db"
    async with SessionService(SessionStore(url), flush_interval=None) as service:
        session = await service.new("big")
        for number in range(1, 21):
            scripted_turn(session, number, "go on", 1000)
            await service.checkpoint("big", "turn-end")
        total = session.next_seq
    async with SessionService(SessionStore(url), flush_interval=None) as service:
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            resumed = await service.resume("big")
            after = tracemalloc.take_snapshot()
            held = sum(s.size_diff for s in after.compare_to(before, "filename"))
            scripted_turn(resumed, 21, "warm up", 1000, cite=False)  # first-use caches
            await service.checkpoint("big", "turn-end")
            after = tracemalloc.take_snapshot()
            for number in range(22, 27):
                scripted_turn(resumed, number, "more", 1000, cite=False)
                await service.checkpoint("big", "turn-end")
            later = tracemalloc.take_snapshot()
            grown = sum(s.size_diff for s in later.compare_to(after, "filename"))
        finally:
            tracemalloc.stop()
        assert resumed.next_seq == total + 6 * (total // 20)
        assert held < 2_000_000, held  # the 20,000 stored events alone are ~20 MB
        assert grown < 500_000, grown  # 5,060 more events (~6 MB held), flushed and let go


# -- timed flushes: a follower sees chunks as they stream ---------------------------------------


async def test_a_follower_in_another_process_sees_chunks_while_they_stream(
    shared_db_url: str, tmp_path: Path
) -> None:
    follower_script = (
        "import asyncio, json, sys, time\n"
        "from todo_sessions import SessionStore\n"
        "async def main():\n"
        "    async with SessionStore(sys.argv[1]) as store:\n"
        "        print('READY', flush=True)\n"
        "        async for e in store.follow('live', poll_interval=0.02):\n"
        "            print(json.dumps([e.seq, e.type, time.time()]), flush=True)\n"
        "            if e.type == 'turn/end':\n"
        "                return\n"
        "asyncio.run(main())\n"
    )
    async with SessionService(SessionStore(shared_db_url), flush_interval=0.05) as service:
        session = await service.new("live")
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        await service.flush("live")
        follower = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            follower_script,
            shared_db_url,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ},
        )
        assert follower.stdout is not None
        assert (await follower.stdout.readline()).strip() == b"READY"
        made: list[float] = []
        for i in range(8):  # a model typing slowly: no flush point in between
            chunk = {"type": "text-delta", "index": 0, "text": f"t{i} "}
            session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
            made.append(asyncio.get_running_loop().time())
            await asyncio.sleep(0.3)
        session.append("step/end", {"turn": 1, "step": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        ended_at = __import__("time").time()
        await service.flush("live")
        out, _ = await asyncio.wait_for(follower.communicate(), 60)
    seen = [json.loads(line) for line in out.decode().splitlines()]
    assert [s[0] for s in seen] == list(range(12))  # every event once, in order
    chunk_seen = [t for _, kind, t in seen if kind == "assistant/chunk"]
    # the timer flushed each chunk long before the turn's end flush point: no burst at the end
    assert all(t < ended_at for t in chunk_seen[:-1]), (chunk_seen, ended_at)


async def test_show_lists_the_checkpoints(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from todo_sessions.cli import main as cli

    url = f"sqlite:///{tmp_path}/s.db"
    events = turn(0) + turn(6, 2)
    async with SessionStore(url) as store:
        await store_log(store, "s", events)
        await store.write_checkpoint("s", fold(events[:6]))
    run = CliRunner().invoke
    listed = await asyncio.to_thread(
        run, cli, ["--db", url, "show", "s", "--checkpoints", "--json"]
    )
    assert listed.exit_code == 0, listed.output
    [only] = json.loads(listed.stdout)
    assert (only["seq"], only["formatVersion"]) == (6, 2) and only["bytes"] > 0
    table = await asyncio.to_thread(run, cli, ["--db", url, "show", "s", "--checkpoints"])
    assert "events after it" in table.stdout and " 6 " in table.stdout
    async with SessionStore(url) as store:
        await store.delete_checkpoints("s")
    none = await asyncio.to_thread(run, cli, ["--db", url, "show", "s", "--checkpoints"])
    assert "no checkpoints (12 events" in none.stdout
