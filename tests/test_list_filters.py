"""`SessionStore.list` filters (issue #14, part 3): every combination of ``cwd``, ``tag``,
``since``/``until``, ``parent``, ``has_open_todos`` and ``text``, each paged to the end with
keyset pagination, against a model computed in Python, over 10,000 sessions built with
concurrent batched appends (on SQLite and PostgreSQL). And the ``list`` command's options.

See docs/design.md, "Reading" and docs/format.md, "Session metadata".
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import _pg_admin, scratch_database
from factories import T0, header, todo_write, user_message
from sqlalchemy.engine import make_url

from todo_sessions import SessionEvent, SessionStore, SessionSummary
from todo_sessions.cli import main

WORDS = ("Alpha", "beta", "GAMMA", "Straße", "50%_off", "delta")
TAGS = ("red", "blue", "green")


@dataclass(frozen=True)
class Made:
    """What a session was built with: the model the filters are checked against."""

    id: str
    cwd: str
    parent: str | None
    title: str
    tags: tuple[str, ...]
    open_todos: bool


def made(i: int) -> Made:
    parent = "s00001" if i % 9 == 1 else "s00002" if i % 9 == 2 else None
    tags = tuple(t for n, t in enumerate(TAGS) if i % (n + 2) == 0)
    return Made(
        id=f"s{i:05d}",
        cwd=f"/repo/{i % 7}",
        parent=parent,
        title=f"Session {i} {WORDS[i % len(WORDS)]}",
        tags=tags,
        open_todos=i % 5 in (0, 3),
    )


def events_of(m: Made, i: int) -> list[SessionEvent]:
    """A todo write that leaves items open or not, then (for some) a meta that is replaced by
    a later one in the same batch: the last write wins."""
    status = "in_progress" if m.open_todos else "completed"
    events = [user_message(0), todo_write(1, ("a", "completed"), ("b", status))]
    if i % 4 == 1:  # an open list closed again, and the reverse, in one batch
        events[1] = todo_write(1, ("b", "completed" if m.open_todos else "pending"))
        events.append(todo_write(2, ("a", "completed"), ("b", status)))
    meta: dict[str, Any] = {"tags": list(m.tags)}
    if i % 3 == 1:
        meta["metadata"] = {"i": i}
    if i % 11 == 0:  # set twice: the later one wins
        events.append(SessionEvent("session/meta", len(events), T0, {"tags": ["stale"]}))
    events.append(SessionEvent("session/meta", len(events), T0, meta))
    return events


async def build(store: SessionStore, count: int) -> dict[str, Made]:
    """``count`` sessions, created and appended 250 at a time concurrently (group commit on
    SQLite; the pool on PostgreSQL)."""
    models = {m.id: m for m in (made(i) for i in range(count))}

    async def one(i: int, m: Made) -> None:
        await store.create(header(m.id, cwd=m.cwd, parent_session=m.parent, title=m.title))
        await store.append(m.id, events_of(m, i))

    items = list(enumerate(models.values()))
    for start in range(0, len(items), 250):
        await asyncio.gather(*(one(i, m) for i, m in items[start : start + 250]))
    return models


async def page_through(store: SessionStore, limit: int, **filters: Any) -> list[SessionSummary]:
    found: list[SessionSummary] = []
    before = None
    while True:
        page = await store.list(limit=limit, before=before, **filters)
        assert len(page) <= limit
        found += page
        if len(page) < limit:
            return found
        before = page[-1]


def matches(m: Made, s: SessionSummary, f: dict[str, Any]) -> bool:
    return (
        ("cwd" not in f or m.cwd == f["cwd"])
        and ("tag" not in f or f["tag"] in m.tags)
        and ("since" not in f or s.updated_at >= f["since"])
        and ("until" not in f or s.updated_at < f["until"])
        and ("parent" not in f or m.parent == f["parent"])
        and ("has_open_todos" not in f or m.open_todos == f["has_open_todos"])
        and ("text" not in f or f["text"].casefold() in m.title.casefold())
    )


@pytest.fixture(params=["sqlite-file", "postgres"])
async def big(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """10,000 sessions (fewer with ``TODO_SESSIONS_LIST_TEST_SESSIONS``)."""
    count = int(os.environ.get("TODO_SESSIONS_LIST_TEST_SESSIONS", "10000"))
    if request.param == "sqlite-file":
        async with SessionStore(
            f"sqlite:///{tmp_path}/big.db", synchronous="NORMAL", pool_size=10
        ) as store:
            yield store, await build(store, count)
        return
    # a database of its own whose commits do not wait for the disk (as synchronous=NORMAL on
    # SQLite): what is tested is the listing, not durability, and 20,000 commits add up
    server = str(request.getfixturevalue("pg_server_url"))
    with scratch_database(server, "todo_sessions_list") as url:
        _pg_admin(server, f'ALTER DATABASE "{make_url(url).database}" SET synchronous_commit = off')
        async with SessionStore(url, pool_size=10) as store:
            yield store, await build(store, count)


@pytest.mark.slow  # seeding 10,000 sessions: started first under xdist
async def test_every_filter_combination_pages_to_the_right_sessions(big: Any) -> None:
    store, models = big
    everything = await page_through(store, 1000)
    assert len(everything) == len(models)
    order = [(s.updated_at, s.id) for s in everything]
    assert order == sorted(order, reverse=True)  # newest activity first, ties by id
    for s in everything:  # the projection holds what the log set
        m = models[s.id]
        assert (s.title, s.tags, s.parent, s.cwd, s.open_todos) == (
            m.title,
            m.tags,
            m.parent,
            m.cwd,
            m.open_todos,
        )
        assert dict(s.metadata) == ({"i": int(s.id[1:])} if int(s.id[1:]) % 3 == 1 else {})
    times = sorted(s.updated_at for s in everything)
    values: dict[str, Any] = {
        "cwd": "/repo/3",
        "tag": "blue",
        "since": times[len(times) // 5],
        "until": times[4 * len(times) // 5],
        "parent": "s00001",
        "text": "straSSE",  # casefold: matches "Straße"
    }
    names = [*values, "has_open_todos"]
    checked = 0
    for size in range(len(names) + 1):
        for combo in itertools.combinations(names, size):
            f = {name: values.get(name, checked % 2 == 0) for name in combo}
            expected = [s.id for s in everything if matches(models[s.id], s, f)]
            limit = 100 if len(expected) < 3000 else 1000
            got = [s.id for s in await page_through(store, limit, **f)]
            assert got == expected, f
            checked += 1
    assert checked == 2 ** len(names)

    # selective filters and edge values
    assert await store.list(tag="no-such-tag") == []
    assert await store.list(tag="stale") == []  # replaced later in the same batch
    percent = {s.id for s in await store.list(text="%", limit=10_000)}
    assert percent == {m.id for m in models.values() if "%" in m.title}
    assert percent == {s.id for s in await store.list(text="50%_OFF", limit=10_000)}
    assert await store.list(text="n_1") == []  # _ and % are no wildcards
    assert await store.list(text="n%1") == []
    children = await page_through(store, 50, parent="s00002")
    assert {s.id for s in children} == {m.id for m in models.values() if m.parent == "s00002"}
    newest = (await store.list(limit=1))[0]
    assert await store.list(since=newest.updated_at + 1) == []
    assert await store.list(until=0) == []
    with pytest.raises(TypeError):
        await store.list(since="yesterday")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await store.list(has_open_todos=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await store.list(cwd="a\x00b")


# -- the command line ---------------------------------------------------------------------------


def cli(db: str, *args: str) -> Result:
    return CliRunner().invoke(main, ["--db", db, *args])


@pytest.fixture
def small_db(tmp_path: Path) -> str:
    db = f"sqlite:///{tmp_path}/small.db"

    async def fill() -> None:
        async with SessionStore(db) as store:
            await build(store, 60)

    asyncio.run(fill())
    return db


def listed(db: str, *args: str) -> list[dict[str, Any]]:
    result = cli(db, "list", "--json", "--limit", "1000", *args)
    assert result.exit_code == 0, result.stderr
    value = json.loads(result.stdout)
    assert isinstance(value, list)
    return value


def test_list_options(small_db: str) -> None:
    models = [made(i) for i in range(60)]
    assert {x["id"] for x in listed(small_db, "--cwd", "/repo/2")} == {
        m.id for m in models if m.cwd == "/repo/2"
    }
    assert {x["id"] for x in listed(small_db, "--tag", "green", "--open-todos")} == {
        m.id for m in models if "green" in m.tags and m.open_todos
    }
    assert {x["id"] for x in listed(small_db, "--no-open-todos", "--text", "GAMMA")} == {
        m.id for m in models if not m.open_todos and "gamma" in m.title.lower()
    }
    children = listed(small_db, "--parent", "s00001")
    assert children and all(x["parent"] == "s00001" for x in children)
    assert listed(small_db, "--since", "2000-01-01", "--until", "2000-01-02") == []
    assert len(listed(small_db, "--since", "1h")) == 60
    assert len(listed(small_db, "--since", "2000-01-01T00:00:00+00:00")) == 60
    assert listed(small_db, "--until", "1w") == []
    first = listed(small_db, "--tag", "red")[0]
    assert set(first) >= {"tags", "metadata", "parent", "openTodos"}


def test_list_next_page_hint_repeats_the_filters(small_db: str) -> None:
    result = cli(small_db, "list", "--limit", "2", "--tag", "red", "--since", "1d", "--open-todos")
    assert result.exit_code == 0
    hint = result.stdout.split("next page: ", 1)[1].strip()
    args = hint.split()
    assert args[args.index("--tag") + 1] == "red" and "--open-todos" in args
    since = args[args.index("--since") + 1]
    again = cli(small_db, *args[args.index("--db") :][2:])  # the hint's own arguments
    assert again.exit_code == 0, again.stderr
    assert "--since" in again.stdout and since in again.stdout  # the same moment, exactly


def test_list_bad_moment_is_a_usage_error(small_db: str) -> None:
    result = cli(small_db, "list", "--since", "last tuesday")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --since must be a date or time")
