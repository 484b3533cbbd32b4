"""Session metadata (issue #14, part 3): ``session/meta`` events, their projection into
``sessions`` at each append, ``has_open_todos``, usage totals, the migration that adds the
columns, and the ``tag`` / ``retitle`` commands.

See docs/format.md, "Session metadata".
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from factories import T0, header, raw_sql, todo_write, turn, user_message
from sqlalchemy import text

from todo_sessions import (
    InvalidEventError,
    Session,
    SessionEvent,
    SessionService,
    SessionStore,
    export_lines,
    import_lines,
    validate_event,
)
from todo_sessions.cli import main
from todo_sessions.core.meta import OPEN_STATUSES, fold_meta
from todo_sessions.store.migrate import downgrade, migrate


def meta(seq: int, **data: Any) -> SessionEvent:
    return SessionEvent("session/meta", seq, T0 + seq, data)


# -- the event --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"title": "x"},
        {"title": None},
        {"tags": []},
        {"tags": ["a", "b c", "ünï"]},
        {"metadata": {}},
        {"metadata": {"k": [1, {"n": None}]}},
        {"title": "t", "tags": ["x"], "metadata": {"a": 1}, "newerKey": 1},
    ],
)
def test_valid_payloads(data: dict[str, Any]) -> None:
    validate_event(meta(0, **data))


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"title": 3}, "data.title"),
        ({"title": "a\x00b"}, "data.title"),
        ({"tags": None}, "data.tags"),
        ({"tags": "a"}, "data.tags"),
        ({"tags": [1]}, "data.tags[0]"),
        ({"tags": ["a", ""]}, "data.tags[1]"),
        ({"tags": ["a", "a"]}, "data.tags[1]"),
        ({"tags": [" a"]}, "data.tags[0]"),
        ({"tags": ["a\nb"]}, "data.tags[0]"),
        ({"tags": ["x" * 201]}, "data.tags[0]"),
        ({"tags": [str(i) for i in range(101)]}, "data.tags"),
        ({"metadata": None}, "data.metadata"),
        ({"metadata": [1]}, "data.metadata"),
    ],
)
def test_invalid_payloads_name_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidEventError) as caught:
        validate_event(meta(4, **data))
    assert caught.value.field == field
    assert caught.value.seq == 4


def test_a_live_session_takes_meta_anywhere_in_strict_mode() -> None:
    session = Session(header("live"), strict=True)
    session.append("session/meta", {"title": "before any turn"})
    session.append("turn/start", {"turn": 1})
    session.append("session/meta", {"tags": ["inside"]})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert [e.type for e in session.events].count("session/meta") == 2
    assert session.derive_messages().to_list() == []  # never on the surface


# -- the projection ----------------------------------------------------------------------------


async def test_set_and_reset_last_write_wins_per_field(store: SessionStore) -> None:
    await store.create(header("s", title="Original", cwd="/repo"))
    await store.append("s", turn(0))
    first = await store.summary("s")
    assert (first.title, first.tags, dict(first.metadata)) == ("Original", (), {})

    await store.append("s", [meta(6, title="Renamed", tags=["a", "b"], metadata={"k": 1})])
    s = await store.summary("s")
    assert (s.title, s.tags, dict(s.metadata)) == ("Renamed", ("a", "b"), {"k": 1})
    assert (await store.header("s")).title == "Renamed"  # the header reads the current title

    # a key left out changes nothing; each key present replaces its field whole
    await store.append("s", [meta(7, tags=["c"])])
    s = await store.summary("s")
    assert (s.title, s.tags, dict(s.metadata)) == ("Renamed", ("c",), {"k": 1})
    await store.append("s", [meta(8, metadata={"other": True})])
    assert dict((await store.summary("s")).metadata) == {"other": True}

    # within one batch, the last event that sets a field wins
    await store.append(
        "s",
        [meta(9, title="one", tags=["x"]), meta(10, title="two"), meta(11, metadata={"m": 2})],
    )
    s = await store.summary("s")
    assert (s.title, s.tags, dict(s.metadata)) == ("two", ("x",), {"m": 2})

    # null clears the title, [] the tags, {} the metadata
    await store.append("s", [meta(12, title=None, tags=[], metadata={})])
    s = await store.summary("s")
    assert (s.title, s.tags, dict(s.metadata)) == (None, (), {})
    assert await store.list(tag="x") == []
    assert await store.list(text="two") == []
    log = await store.read("s")
    folded = fold_meta(log.events, title="Original")
    assert (folded.title, folded.tags, dict(folded.metadata)) == (None, (), {})


async def test_a_refused_batch_changes_nothing(store: SessionStore) -> None:
    await store.create(header("s", title="kept"))
    await store.append("s", [meta(0, tags=["a"])])
    with pytest.raises(InvalidEventError):
        await store.append("s", [meta(1, title="lost", tags=["b"]), meta(2, tags=["dup", "dup"])])
    s = await store.summary("s")
    assert (s.title, s.tags, s.next_seq) == ("kept", ("a",), 1)
    with pytest.raises(Exception, match="seq"):  # a conflict writes nothing either
        await store.append("s", [meta(5, title="lost")])
    assert (await store.summary("s")).title == "kept"
    assert [x.id for x in await store.list(tag="a")] == ["s"]


async def test_racing_appends_project_only_the_winner(store: SessionStore) -> None:
    """Two appends race for the same seq (on SQLite they may share one group commit, each under its
    own savepoint): the loser's projection goes with its events."""
    await store.create(header("s"))
    await store.append("s", [user_message(0)])
    for _ in range(5):
        seq = (await store.summary("s")).next_seq
        results = await asyncio.gather(
            store.append("s", [meta(seq, title=f"a{seq}", tags=["a"]), todo_write(seq + 1)]),
            store.append("s", [meta(seq, title=f"b{seq}", tags=["b"])]),
            return_exceptions=True,
        )
        won = [i for i, r in enumerate(results) if isinstance(r, str)]
        assert len(won) == 1, results
        s = await store.summary("s")
        if won == [0]:
            assert (s.title, s.tags, s.open_todos, s.next_seq) == (
                f"a{seq}",
                ("a",),
                False,
                seq + 2,
            )
        else:
            assert (s.title, s.tags, s.next_seq) == (f"b{seq}", ("b",), seq + 1)
        assert [x.id for x in await store.list(tag="a" if won == [0] else "b")] == ["s"]
        assert await store.list(tag="b" if won == [0] else "a") == []


async def test_tags_go_with_their_session(store: SessionStore) -> None:
    await store.create(header("s"))
    await store.append("s", [meta(0, tags=["t"])])
    await store.delete("s")
    assert await store.list(tag="t") == []
    await store.create(header("s"))
    await store.append("s", [user_message(0)])
    assert (await store.summary("s")).tags == ()
    assert await store.list(tag="t") == []


async def test_forks_inherit_tags_and_metadata_but_keep_their_title(store: SessionStore) -> None:
    await store.create(header("src", title="Source"))
    await store.append("src", [meta(0, title="Inherited title", tags=["t"], metadata={"a": 1})])
    await store.append("src", turn(1))
    child = await store.fork("src", child_id="child")
    assert child.header.title == "Inherited title"  # the source's current title
    c = await store.summary("child")
    assert (c.title, c.tags, dict(c.metadata), c.parent) == (
        "Inherited title",
        ("t",),
        {"a": 1},
        "src",
    )
    await store.fork("src", child_id="named", title="Given")
    assert (await store.summary("named")).title == "Given"  # not the inherited event's
    n = await store.summary("named")
    await store.append("named", [meta(n.next_seq, title="Later")])
    assert (await store.summary("named")).title == "Later"  # events after the seed apply
    assert {s.id for s in await store.list(parent="src")} == {"child", "named"}


async def test_jsonl_round_trip_keeps_the_projection(store: SessionStore) -> None:
    await store.create(header("s", title="Start"))
    await store.append("s", [*turn(0), meta(6, title="Mid", tags=["k"]), meta(7, tags=["k", "j"])])
    lines = [line async for line in export_lines(store, "s")]
    await import_lines(store, lines, as_id="copy")
    a, b = await store.summary("s"), await store.summary("copy")
    assert (
        (a.title, a.tags, a.open_todos)
        == (b.title, b.tags, b.open_todos)
        == ("Mid", ("k", "j"), True)
    )
    again = [line async for line in export_lines(store, "copy")]
    assert again[1:] == lines[1:]


async def test_service_new_sets_the_parent(db_url: str) -> None:
    async with SessionService(SessionStore(db_url), strict=True) as service:
        parent = await service.new("p", cwd="/repo")
        child = await service.new("c", cwd="/repo", parent="p", delegation_depth=1)
        for session in (parent, child):
            session.append("turn/start", {"turn": 1})
            session.append("session/meta", {"tags": ["sub" if session is child else "main"]})
        await service.flush()
        found = await service.store.list(parent="p")
        assert [(s.id, s.parent, s.tags) for s in found] == [("c", "p", ("sub",))]
        assert (await service.store.header("c")).parent_session == "p"


# -- has_open_todos ----------------------------------------------------------------------------

STATUSES = ("pending", "in_progress", "completed")


def random_log(rng: random.Random, length: int) -> list[SessionEvent]:
    """Messages, metas and todo writes (some empty, some all done) in random order."""
    events: list[SessionEvent] = []
    for seq in range(length):
        roll = rng.random()
        if roll < 0.4:
            items = [(f"item {i}", rng.choice(STATUSES)) for i in range(rng.randrange(4))]
            events.append(todo_write(seq, *items))
        elif roll < 0.55:
            events.append(meta(seq, tags=rng.sample(["a", "b", "c"], rng.randrange(4))))
        else:
            events.append(user_message(seq))
    return events


async def test_has_open_todos_agrees_with_current_todos(store: SessionStore) -> None:
    """Every session of a seeded random population, appended in random batch splits: the
    projected flag, the filter and `current_todos` agree, for every session."""
    rng = random.Random(14)
    sessions = {f"s{i:03d}": random_log(rng, rng.randrange(0, 12)) for i in range(120)}
    for sid, events in sessions.items():
        await store.create(header(sid))
        if not events:
            await store.append(sid, [user_message(0)])
            continue
        start = 0
        while start < len(events):
            end = min(len(events), start + rng.randrange(1, 5))
            await store.append(sid, events[start:end])
            start = end
    open_ids = set()
    before = None
    while page := await store.list(has_open_todos=True, limit=7, before=before):
        open_ids |= {s.id for s in page}
        before = page[-1]
    closed_ids = {s.id for s in await store.list(has_open_todos=False, limit=1000)}
    assert open_ids.isdisjoint(closed_ids) and open_ids | closed_ids == set(sessions)
    for sid in sessions:
        todos = await store.current_todos(sid)
        expected = todos is not None and any(t.status in OPEN_STATUSES for t in todos)
        assert (sid in open_ids) == expected, sid
        assert (await store.summary(sid)).open_todos == expected
        assert fold_meta(await store.read_from(sid)).open_todos == expected
    assert 10 < len(open_ids) < 110  # the population has both kinds


# -- update_meta --------------------------------------------------------------------------------


async def test_update_meta_adds_removes_and_skips_no_ops(store: SessionStore) -> None:
    await store.create(header("s", title="T"))
    await store.append("s", [user_message(0)])
    s = await store.update_meta("s", add_tags=["a", "b", "a"])
    assert s.tags == ("a", "b") and s.next_seq == 2
    s = await store.update_meta("s", add_tags=["c"], remove_tags=["a"])
    assert s.tags == ("b", "c")
    same = await store.update_meta("s", add_tags=["b"], title="T")
    assert same.revision == s.revision  # nothing to change: nothing appended
    s = await store.update_meta("s", title=None, metadata={"x": 1}, tags=["z"])
    assert (s.title, s.tags, dict(s.metadata)) == (None, ("z",), {"x": 1})
    events = await store.read_from("s")
    assert [e.type for e in events] == ["user/message"] + ["session/meta"] * 3
    assert events[-1].data == {"title": None, "tags": ["z"], "metadata": {"x": 1}}
    assert all(e.ignorable for e in events[1:])  # readers without the type skip them


async def test_update_meta_reads_again_after_another_writer(shared_db_url: str) -> None:
    async with SessionStore(shared_db_url) as one, SessionStore(shared_db_url) as two:
        await one.create(header("s"))
        await one.append("s", [meta(0, tags=["first"])])
        await two.append("s", [meta(1, tags=["first", "second"])])
        s = await one.update_meta("s", add_tags=["third"])
        assert s.tags == ("first", "second", "third")


# -- usage -------------------------------------------------------------------------------------


def assistant(seq: int, turn_number: int, usage: Any) -> SessionEvent:
    data: dict[str, Any] = {
        "turn": turn_number,
        "step": 1,
        "message": {
            "id": f"a{seq}",
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}],
            "source": {"kind": "model", "provider": "p", "model": "m"},
        },
    }
    if usage is not None:
        data["usage"] = usage
    return SessionEvent("assistant/message", seq, T0 + seq, data, surface_op="append")


async def test_usage_totals_per_session_and_turn(store: SessionStore) -> None:
    await store.create(header("s"))
    await store.append(
        "s",
        [
            assistant(0, 1, {"input_tokens": 10, "output_tokens": 5}),
            assistant(1, 1, {"input_tokens": 7, "output_tokens": 1, "cache": {"read": 3}}),
            assistant(2, 2, None),
            assistant(3, 2, {"prompt_tokens": 2, "cost": 0.5, "flag": True, "tier": "x"}),
            todo_write(4, ("a", "pending")),
        ],
    )
    usage = await store.usage("s")
    assert usage.messages == 3
    assert dict(usage.total) == {
        "input_tokens": 17,
        "output_tokens": 6,
        "cache.read": 3,
        "prompt_tokens": 2,
        "cost": 0.5,
    }
    assert {t: dict(u) for t, u in usage.turns.items()} == {
        1: {"input_tokens": 17, "output_tokens": 6, "cache.read": 3},
        2: {"prompt_tokens": 2, "cost": 0.5},
    }
    await store.create(header("empty"))
    await store.append("empty", [user_message(0)])
    assert (await store.usage("empty")).messages == 0


# -- the migration ------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/m.db"
    return str(request.getfixturevalue("fresh_pg_url"))


async def test_upgrade_fills_the_columns_from_the_logs(empty_url: str) -> None:
    async with SessionStore(empty_url) as store:
        await store.create(header("open", title="Ünïcode TITLE"))
        await store.append("open", [*turn(0), meta(6, title="Meta title", tags=["k"])])
        await store.create(header("done", title="plain"))
        await store.append(
            "done", [todo_write(0, ("x", "pending")), todo_write(1, ("x", "completed"))]
        )
    await downgrade(empty_url, revision="0006")
    await migrate(empty_url)
    async with SessionStore(empty_url, migrate=False) as store:
        o, d = await store.summary("open"), await store.summary("done")
        assert (o.title, o.tags, o.open_todos) == ("Meta title", ("k",), True)
        assert (d.title, d.tags, d.open_todos) == ("plain", (), False)
        assert [s.id for s in await store.list(tag="k")] == ["open"]
        assert [s.id for s in await store.list(text="META")] == ["open"]
        assert [s.id for s in await store.list(has_open_todos=True)] == ["open"]

        def folded(conn: Any) -> list[Any]:
            return list(conn.execute(text("SELECT title_folded FROM sessions ORDER BY id")))

        assert [r[0] for r in await raw_sql(store, folded)] == ["plain", "meta title"]


# -- the command line ---------------------------------------------------------------------------


def cli(db: str, *args: str) -> Result:
    return CliRunner().invoke(main, ["--db", db, *args])


def test_tag_and_retitle_commands(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/c.db"

    async def build() -> None:
        async with SessionStore(db) as store:
            await store.create(header("s", title="Old"))
            await store.append("s", [user_message(0)])

    asyncio.run(build())
    result = cli(db, "tag", "s", "red", "blue")
    assert result.exit_code == 0 and result.stdout == "tags of s: red, blue\n"
    result = cli(db, "tag", "s", "red")
    assert result.exit_code == 0 and "nothing to change" in result.stderr
    assert cli(db, "tag", "s", "--remove", "red", "green").stdout == "tags of s: blue\n"
    assert cli(db, "retitle", "s", "New [title]").stdout == "title of s: New [title]\n"
    listed = json.loads(cli(db, "list", "--json", "--tag", "blue").stdout)
    assert [(x["id"], x["title"], x["tags"]) for x in listed] == [("s", "New [title]", ["blue"])]
    assert cli(db, "retitle", "s", "").stdout == "cleared the title of s\n"
    assert json.loads(cli(db, "list", "--json").stdout)[0]["title"] is None

    bad = cli(db, "tag", "s", " padded")
    assert bad.exit_code == 2 and bad.stderr.startswith("error: invalid tag")
    missing = cli(db, "retitle", "nope", "x")
    assert missing.exit_code == 1 and missing.stderr.startswith("error:")
    assert cli(db, "tag", "s").exit_code == 2  # at least one tag


def test_tag_refuses_a_session_a_live_service_owns(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/c.db"

    async def own() -> None:
        async with SessionStore(db) as store:
            await store.create(header("s"))
            await store.append("s", [user_message(0)])
            await store.acquire_lease("s", "someone-else", ttl=600)

    asyncio.run(own())
    result = cli(db, "tag", "s", "x")
    assert result.exit_code == 1
    assert "is live" in result.stderr and "someone-else" in result.stderr
    assert cli(db, "retitle", "s", "x").exit_code == 1
    assert json.loads(cli(db, "list", "--json").stdout)[0]["tags"] == []
