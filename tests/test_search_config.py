"""PostgreSQL's text search configuration of the search index (`store.search_config`,
`reindex(search_config=...)`, `todo-sessions reindex --search-config`): ``simple`` by default,
another one chosen once for the database, seen by every store on it and by appends made after
the change; a name the server does not know, or any backend that has no such setting, is a
typed error that changes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from click.testing import CliRunner
from conftest import _asyncpg_dsn
from factories import header, user_message

from todo_sessions import SessionStore, migrate
from todo_sessions.cli import main
from todo_sessions.store.migrate import downgrade


async def seeded(url: str) -> None:
    async with SessionStore(url) as store:
        await store.create(header("s1"))
        await store.append("s1", [user_message(0, "the runner runs quickly to the houses")])


async def found(store: SessionStore, query: str) -> list[tuple[str, int]]:
    return [(hit.session_id, hit.seq) for hit in await store.search(query)]


@pytest.fixture(params=["public", "schema"])
def pg_url(request: pytest.FixtureRequest, fresh_pg_url: str) -> Iterator[str]:
    """A database of this test's own (the configuration is the database's, not a store's):
    the default namespace, or a schema of its own."""
    yield fresh_pg_url if request.param == "public" else f"{fresh_pg_url}?schema=agent"


async def test_simple_by_default_then_english_for_every_store(pg_url: str) -> None:
    await seeded(pg_url)
    async with SessionStore(pg_url) as first, SessionStore(pg_url) as second:
        assert await first.search_config() == "simple"
        assert await found(first, "running") == []  # simple: no stemming
        assert await found(first, "runs") == [("s1", 0)]

        assert await first.reindex(search_config="english") == 1
        assert await first.search_config() == "english"
        assert await second.search_config() == "english"  # the database's, not the store's
        assert await second.search(" running ") != []
        assert await found(second, "running") == [("s1", 0)]  # english stems both to "run"
        assert await found(first, "house") == [("s1", 0)]

        # an append made after the change, by the other store, is indexed the new way
        await second.append("s1", [user_message(1, "then it jumped over the fences")])
        assert await found(first, "jumping") == [("s1", 1)]
        assert await first.search_index_problems() == []
        assert await first.search_index_problems("s1") == []

        assert await first.reindex(search_config="simple") == 2
        assert await found(second, "jumping") == []
        assert await found(second, "jumped") == [("s1", 1)]


@pytest.mark.parametrize(
    "name",
    ["klingon", "English", "english'; DROP TABLE sessions; --", "", "pg_catalog.english"],
)
async def test_an_unknown_configuration_changes_nothing(pg_url: str, name: str) -> None:
    await seeded(pg_url)
    async with SessionStore(pg_url) as store:
        await store.reindex(search_config="english")
        with pytest.raises(ValueError, match="search_config") as caught:
            await store.reindex(search_config=name)
        assert repr(name) in str(caught.value)
        if name == "klingon":
            assert "english" in str(caught.value) and "simple" in str(caught.value)  # the list
        assert await store.search_config() == "english"
        assert await found(store, "running") == [("s1", 0)]  # the index is still whole
        assert [s.id for s in await store.list()] == ["s1"]


async def test_not_a_string_is_a_type_error(pg_url: str) -> None:
    async with SessionStore(pg_url) as store:
        with pytest.raises(TypeError, match="search_config must be a str"):
            await store.reindex(search_config=3)  # type: ignore[arg-type]


async def test_sqlite_has_no_configuration(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    await seeded(url)
    async with SessionStore(url) as store:
        assert await store.search_config() is None
        with pytest.raises(ValueError, match="SQLite's index uses FTS5's unicode61 tokenizer"):
            await store.reindex(search_config="english")
        assert await found(store, "runs") == [("s1", 0)]


async def _functions(url: str) -> list[str]:
    """The configuration functions in the database (read past the store: at revision 0009 it
    would refuse to open)."""
    conn = await asyncpg.connect(_asyncpg_dsn(url.split("?")[0]))
    try:
        rows = await conn.fetch(
            "SELECT n.nspname || '.' || p.proname FROM pg_proc p JOIN pg_namespace n "
            "ON n.oid = p.pronamespace WHERE p.proname = 'todo_sessions_search_config'"
        )
    finally:
        await conn.close()
    return sorted(r[0] for r in rows)


async def test_the_migration_creates_and_drops_the_function(fresh_pg_url: str) -> None:
    url = f"{fresh_pg_url}?schema=agent"
    await migrate(url)
    assert await _functions(url) == ["agent.todo_sessions_search_config"]
    await downgrade(url, revision="0009")
    assert await _functions(url) == []
    await migrate(url)
    assert await _functions(url) == ["agent.todo_sessions_search_config"]


def test_cli_reindex_with_a_configuration(fresh_pg_url: str, tmp_path: Path) -> None:
    asyncio.run(seeded(fresh_pg_url))
    runner = CliRunner()
    done = runner.invoke(main, ["--db", fresh_pg_url, "reindex", "--search-config", "english"])
    assert done.exit_code == 0, done.output
    assert "1 row(s)" in done.output and "configuration english" in done.output
    hits = runner.invoke(main, ["--db", fresh_pg_url, "search", "running", "--json"])
    assert hits.exit_code == 0, hits.output
    assert '"s1"' in hits.output
    bad = runner.invoke(main, ["--db", fresh_pg_url, "reindex", "--search-config", "klingon"])
    assert bad.exit_code == 1
    assert "'klingon' is not a text search configuration" in bad.output
    sqlite = runner.invoke(
        main, ["--db", f"sqlite:///{tmp_path}/s.db", "reindex", "--search-config", "english"]
    )
    assert sqlite.exit_code == 1 and "SQLite's index uses FTS5" in sqlite.output
