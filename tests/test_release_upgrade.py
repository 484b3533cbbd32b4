"""A database made by the previous release (commit 2059af8, schema revision 0010: the search
index written inside the append) upgraded by this one, on SQLite and PostgreSQL.

The files in tests/fixtures/release-2059af8 were written by that release's own code
(`make.sh` beside them): its demo session, tagged and retitled, a fork of it, and a second demo
session whose hash chain is keyed, with their search index rows and chain values; the exports
are that release's `todo-sessions export`. After the upgrade each session verifies clean, its
stored chain matches the old export's (`verify --against`), search finds what the old index
held and what is appended now, and the downgrade to 0010 gives back a database the old
revision's appends can go on with (a whole index, nothing pending).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import scratch_database
from factories import turn
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.engine.url import make_url

from todo_sessions import SessionStore, verify_session
from todo_sessions.cli import main
from todo_sessions.store.migrate import downgrade, run_locked

FIXTURES = Path(__file__).parent / "fixtures" / "release-2059af8"
KEY = "release-fixture-key"
PLAIN = ("demo-2059af8", "fork-2059af8")
KEYED = "keyed-2059af8"


@pytest.fixture(params=["sqlite", "postgres"])
def release_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database as the 2059af8 release left it."""
    if request.param == "sqlite":
        shutil.copy(FIXTURES / "store.db", tmp_path / "store.db")
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    server = request.getfixturevalue("pg_server_url")
    if shutil.which("psql") is None:
        pytest.skip("psql (to restore the release's dump) is not installed")
    with scratch_database(server, "todo_sessions_release") as url:
        plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(FIXTURES / "postgres.sql"), plain],
            check=True,
            capture_output=True,
        )
        yield url


def revision(conn: Connection) -> str:
    return str(conn.execute(text("SELECT version_num FROM todo_sessions_alembic_version")).scalar())


def index_rows(conn: Connection) -> list[tuple[object, ...]]:
    rows = conn.execute(text("SELECT session_id, seq, kind, body FROM search_text")).all()
    return sorted(tuple(r) for r in rows)


async def test_a_release_database_upgrades_verifies_searches_and_downgrades(
    release_url: str,
) -> None:
    assert await run_locked(release_url, revision) == "0010"
    before = await run_locked(release_url, index_rows)
    assert {r[0] for r in before} == {*PLAIN, KEYED}  # the old release indexed all three

    async with SessionStore(release_url) as store:  # opening migrates to head
        assert await run_locked(release_url, revision) != "0010"
        for session_id in PLAIN:
            assert await verify_session(store, session_id) == [], session_id
        found = {h.session_id for h in await store.search("mean", limit=500)}
        assert found == {*PLAIN, KEYED}
        assert await store.search_index_problems() == []
        summary = await store.summary("demo-2059af8")
        assert summary.title == "Fix mean() in calc.py (2059af8)"
        assert set(summary.tags) == {"release", "fixture"}
        # the log goes on from the old release's chain
        await store.append("demo-2059af8", turn(summary.next_seq, 3, text="upgraded"))
        assert await verify_session(store, "demo-2059af8") == []
        assert [h.session_id for h in await store.search("upgraded")] == ["demo-2059af8"]
    async with SessionStore(release_url, chain_key=KEY) as keyed:
        assert await verify_session(keyed, KEYED) == []

    # the stored chains match the exports the old release made
    runner = CliRunner()
    backend = "sqlite" if release_url.startswith("sqlite") else "postgres"
    for session_id, env in (("demo-2059af8", {}), (KEYED, {"TODO_SESSIONS_CHAIN_KEY": KEY})):
        export = FIXTURES / f"{backend}-{session_id}.jsonl"
        args = ["--db", release_url, "verify", "--against", str(export)]
        result = await asyncio.to_thread(runner.invoke, main, args, env=env)
        assert result.exit_code == 0, result.output
        assert f"✓ {session_id}" in result.output
    export = FIXTURES / f"{backend}-demo-2059af8.jsonl"
    args = ["--db", release_url, "verify", "--against", str(export)]
    wrong_key = {"TODO_SESSIONS_CHAIN_KEY": KEY}  # the plain chain cannot match a keyed one
    tampered = await asyncio.to_thread(runner.invoke, main, args, env=wrong_key)
    assert tampered.exit_code == 1

    # downgrade: 0010's appends expect a whole index and nothing pending
    await downgrade(release_url, revision="0010")
    assert await run_locked(release_url, revision) == "0010"
    after = await run_locked(release_url, index_rows)
    assert set(before) <= set(after)
    assert any(r[0] == "demo-2059af8" and "upgraded" in str(r[3]) for r in after)
    async with SessionStore(release_url) as store:  # and up again
        assert await verify_session(store, "demo-2059af8") == []
        assert [h.session_id for h in await store.search("upgraded")] == ["demo-2059af8"]
