"""The guards of ``session_events`` rows from a raw connection, and revision 0012.

Whoever connects (a plain ``sqlite3`` connection, foreign keys off as SQLite starts them, or a
plain ``asyncpg`` one): no event row is replaced (``INSERT OR REPLACE``, ``REPLACE INTO``, an
upsert), updated or deleted below its session's end, no session row with events is deleted,
replaced or truncated away (the cascade), and on PostgreSQL no event row is inserted without
its session row (revision 0012's statement check, which replaced the foreign key's check per
row), not even by a delete racing the insert. Afterwards the log is whole: every row, its
chain, ``verify`` clean.

Revision 0012 up and down on both backends (and in a PostgreSQL schema): the sessions, their
chain values and their search index rows come through unchanged, the store appends, chains and
finds on, and on PostgreSQL the foreign key is back after the downgrade and gone after the
upgrade.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from alembic.script import ScriptDirectory
from factories import header, turn
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, make_url

from todo_sessions import SessionStore, migrate, verify_all
from todo_sessions.store.migrate import (
    alembic_config,
    current_revision,
    downgrade,
    head_revision,
    run_locked,
)

REVISION = "0012"
KEPT = "keeps them"
APPEND_ONLY = "append-only"
COLUMNS = "session_id, seq, type, time, data, ignorable"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/g.db"
    return request.getfixturevalue("fresh_pg_url")


def dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def seeded(url: str) -> list[tuple[Any, ...]]:
    """Two sessions of 12 events each (two appends); their rows as stored."""
    async with SessionStore(url) as store:
        for sid in ("g1", "g2"):
            await store.create(header(sid, title=sid))
            await store.append(sid, turn(0, text=f"gnuword {sid}"))
            await store.append(sid, turn(6, 2, text="second"))
    return await run_locked(url, stored_rows(SessionStore(url).namespace))


def stored_rows(ns: Any) -> Any:
    """Every event row, its chain value included, read on a migration connection."""

    def read(conn: Connection) -> list[tuple[Any, ...]]:
        events = ns.sql_name("session_events")
        sql = f"SELECT session_id, seq, type, data, chain FROM {events} ORDER BY session_id, seq"
        return [tuple(r) for r in conn.execute(text(sql))]

    return read


async def whole(url: str, rows: list[tuple[Any, ...]]) -> None:
    assert await run_locked(url, stored_rows(SessionStore(url).namespace)) == rows
    async with SessionStore(url) as store:
        assert (await verify_all(store)).ok
        for sid in ("g1", "g2"):
            assert await store.chain_break(sid) is None
            assert await store.count(sid) == 12


# -- SQLite ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("foreign_keys", ["OFF", "ON"])
@pytest.mark.parametrize("recursive_triggers", ["OFF", "ON"])
async def test_sqlite_raw_connection_cannot_replace_update_or_cascade(
    tmp_path: Path, foreign_keys: str, recursive_triggers: str
) -> None:
    url = f"sqlite:///{tmp_path}/g.db"
    rows = await seeded(url)
    raw = sqlite3.connect(tmp_path / "g.db", isolation_level=None)
    raw.execute(f"PRAGMA foreign_keys = {foreign_keys}")
    raw.execute(f"PRAGMA recursive_triggers = {recursive_triggers}")
    row = "('g1', 3, 'turn/start', 0, '{}', 0)"
    refused = {
        f"INSERT OR REPLACE INTO session_events ({COLUMNS}) VALUES {row}": APPEND_ONLY,
        f"REPLACE INTO session_events ({COLUMNS}) VALUES {row}": APPEND_ONLY,
        f"INSERT INTO session_events ({COLUMNS}) VALUES {row} "
        "ON CONFLICT (session_id, seq) DO UPDATE SET data = excluded.data": APPEND_ONLY,
        f"INSERT OR IGNORE INTO session_events ({COLUMNS}) VALUES {row}": APPEND_ONLY,
        "UPDATE session_events SET data = '{}' WHERE session_id = 'g1' AND seq = 3": APPEND_ONLY,
        "UPDATE OR REPLACE session_events SET seq = 4 WHERE session_id = 'g1' AND seq = 3": (
            APPEND_ONLY
        ),
        "DELETE FROM session_events WHERE session_id = 'g1' AND seq = 11": APPEND_ONLY,
        "DELETE FROM sessions WHERE id = 'g1'": KEPT,
        "INSERT OR REPLACE INTO sessions SELECT * FROM sessions WHERE id = 'g1'": KEPT,
        "REPLACE INTO sessions SELECT * FROM sessions WHERE id = 'g2'": KEPT,
    }
    for statement, message in refused.items():
        with pytest.raises(sqlite3.IntegrityError, match=message):
            raw.execute(statement)
    raw.close()
    await whole(url, rows)


# -- PostgreSQL -----------------------------------------------------------------------------------


async def test_postgres_raw_connection_cannot_replace_update_truncate_or_orphan(
    fresh_pg_url: str,
) -> None:
    rows = await seeded(fresh_pg_url)
    raw = await asyncpg.connect(dsn(fresh_pg_url))
    try:
        row = "('g1', 3, 'turn/start', 0, '{}', false)"
        refused = {
            f"INSERT INTO session_events ({COLUMNS}) VALUES {row} "
            "ON CONFLICT (session_id, seq) DO UPDATE SET data = excluded.data": APPEND_ONLY,
            "UPDATE session_events SET data = '{}' WHERE session_id = 'g1' AND seq = 3": (
                APPEND_ONLY
            ),
            "DELETE FROM session_events WHERE session_id = 'g1' AND seq = 11": APPEND_ONLY,
            "DELETE FROM sessions WHERE id = 'g1'": KEPT,
            "TRUNCATE session_events": APPEND_ONLY,
            "TRUNCATE sessions CASCADE": APPEND_ONLY,
            # no row without its session, one row or among others
            f"INSERT INTO session_events ({COLUMNS}) "
            "VALUES ('nobody', 0, 'x/y', 0, '{}', false)": "no session nobody",
            f"INSERT INTO session_events ({COLUMNS}) VALUES ('g1', 99, 'x/y', 0, '{{}}', false), "
            "('nobody', 0, 'x/y', 0, '{}', false)": "no session nobody",
        }
        for statement, message in refused.items():
            with pytest.raises(asyncpg.PostgresError, match=message):
                await raw.execute(statement)
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await raw.execute(
                f"INSERT INTO session_events ({COLUMNS}) "
                "SELECT 'nobody', s, 'x/y', 0, '{}', false FROM generate_series(0, 99) AS s"
            )
    finally:
        await raw.close()
    await whole(fresh_pg_url, rows)


async def test_postgres_a_delete_racing_a_raw_insert_waits_and_keeps_the_row(
    fresh_pg_url: str,
) -> None:
    """The statement check locks the session row (``FOR KEY SHARE``) as the foreign key did:
    a delete of the session waits for the inserting transaction, then finds its event."""
    await seeded(fresh_pg_url)
    inserting = await asyncpg.connect(dsn(fresh_pg_url))
    deleting = await asyncpg.connect(dsn(fresh_pg_url))
    try:
        await inserting.execute(  # a session row with no events yet, as a host could write it
            "INSERT INTO sessions (id, format_version, created_at, delegation_depth, "
            "incarnation, revision, next_seq, updated_at) VALUES ('r', 1, 0, 0, 'x', 0, 0, 0)"
        )
        pid = deleting.get_server_pid()
        async with inserting.transaction():
            await inserting.execute(
                f"INSERT INTO session_events ({COLUMNS}) VALUES ('r', 0, 'x/y', 0, '{{}}', false)"
            )
            delete = asyncio.ensure_future(deleting.execute("DELETE FROM sessions WHERE id = 'r'"))
            while not delete.done():  # until the delete waits for our lock (or got through)
                waiting = await inserting.fetchval(
                    "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid
                )
                if waiting:
                    break
                await asyncio.sleep(0.01)
        with pytest.raises(asyncpg.PostgresError, match=KEPT):
            await delete
        assert await inserting.fetchval(
            "SELECT count(*) FROM session_events WHERE session_id = 'r'"
        )
        assert await inserting.fetchval("SELECT count(*) FROM sessions WHERE id = 'r'") == 1
    finally:
        await inserting.close()
        await deleting.close()


# -- revision 0012 ------------------------------------------------------------------------------


def index_rows(ns: Any) -> Any:
    def read(conn: Connection) -> list[tuple[Any, ...]]:
        search = ns.sql_name("search_text")
        sql = f"SELECT session_id, seq, kind, body FROM {search} ORDER BY session_id, seq, kind"
        return [tuple(r) for r in conn.execute(text(sql))]

    return read


def events_foreign_keys(ns: Any) -> Any:
    def read(conn: Connection) -> list[str]:
        keys = inspect(conn).get_foreign_keys(ns.name("session_events"), schema=ns.schema)
        return [key["name"] for key in keys]

    return read


@pytest.mark.parametrize("schema", [None, "agent"])
async def test_revision_0012_down_and_up_keeps_logs_chains_and_index(
    url: str, schema: str | None
) -> None:
    if schema is not None:
        if url.startswith("sqlite"):
            pytest.skip("a PostgreSQL schema")
        url = f"{url}?schema={schema}"
    rows = await seeded(url)
    ns = SessionStore(url).namespace
    postgres = not url.startswith("sqlite")
    key = f"fk_{ns.name('session_events')}_session_id_{ns.name('sessions')}"

    async def found() -> set[tuple[str, int]]:
        async with SessionStore(url) as store:
            return {(h.session_id, h.seq) for h in await store.search("gnuword")}

    before = await found()
    assert before == {("g1", 1), ("g2", 1)}
    indexed = await run_locked(url, index_rows(ns))
    assert {(sid, seq) for sid, seq, _, body in indexed if "gnuword" in body} == before
    assert await run_locked(url, events_foreign_keys(ns)) == ([] if postgres else [key])
    below = ScriptDirectory.from_config(alembic_config()).get_revision(REVISION)
    assert below is not None and below.down_revision is not None
    await downgrade(url, revision=str(below.down_revision))  # to the revision 0012 revises
    assert await run_locked(url, lambda c: current_revision(c, ns)) == below.down_revision
    assert await run_locked(url, events_foreign_keys(ns)) == [key]
    assert await run_locked(url, stored_rows(ns)) == rows
    await migrate(url)
    assert await run_locked(url, lambda c: current_revision(c, ns)) == head_revision()
    assert await run_locked(url, events_foreign_keys(ns)) == ([] if postgres else [key])
    await whole(url, rows)
    assert await found() == before
    assert await run_locked(url, index_rows(ns)) == indexed
    async with SessionStore(url) as store:
        await store.append("g1", turn(12, 3, text="gnuword again"))
        assert await store.chain_break("g1") is None
        assert (await verify_all(store)).ok
    assert await found() == before | {("g1", 13)}
