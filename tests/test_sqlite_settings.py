"""SQLite specifics: per-connection settings, the write lock, busy errors, file mode.

See docs/design.md, "Backends".
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
from factories import header, raw_sql, recorder_of, turn
from sqlalchemy import text
from sqlalchemy.engine import Connection

from todo_sessions import SessionStore, StoreBusyError
from todo_sessions.store.engine import SQLiteOptions, parse_url
from todo_sessions.store.sqlite.driver import connect_sqlite

T = TypeVar("T")


def pragmas(conn: Connection) -> dict[str, Any]:
    names = ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
    return {n: conn.execute(text(f"PRAGMA {n}")).scalar_one() for n in names}


async def on_the_store(store: SessionStore, fn: Callable[[Connection], T], write: bool) -> T:
    """``fn(connection)`` in one transaction on the SQLite recorder's own connection, as its
    package runs the search index's operations (`index_ops`; ``write``: under the write lock,
    as `reindex`): these tests are of the store's connection settings, which a connection of
    the test's own would not have."""
    recorder: Any = await recorder_of(store)
    return cast(T, await recorder._on_sa(fn, write=write))


async def test_defaults_on_every_pooled_connection(tmp_path: Path) -> None:
    async with SessionStore(tmp_path / "s.db") as store:
        assert await on_the_store(store, pragmas, write=False) == {
            "journal_mode": "wal",
            "synchronous": 2,  # FULL
            "foreign_keys": 1,
            "busy_timeout": 5000,
        }


async def test_settings_are_configurable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    async with SessionStore(
        url, journal_mode="DELETE", synchronous="NORMAL", busy_timeout_ms=250
    ) as store:
        assert await on_the_store(store, pragmas, write=False) == {
            "journal_mode": "delete",
            "synchronous": 1,
            "foreign_keys": 1,
            "busy_timeout": 250,
        }
    with pytest.raises(ValueError):
        SessionStore(url, synchronous="OFF")  # type: ignore[arg-type]


def test_writer_connection_has_the_same_settings(tmp_path: Path) -> None:
    conn = connect_sqlite(parse_url(tmp_path / "w.db"), SQLiteOptions(busy_timeout_ms=1234))
    try:
        got = {
            n: conn.execute(f"PRAGMA {n}").fetchone()[0]
            for n in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
        }
        assert got == {
            "journal_mode": "wal",
            "synchronous": 2,
            "foreign_keys": 1,
            "busy_timeout": 1234,
        }
        assert conn.isolation_level is None  # no implicit BEGIN: we say BEGIN IMMEDIATE
    finally:
        conn.close()


async def test_write_transactions_take_the_write_lock_up_front(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SessionStore(path) as store:

        def probe(conn: Connection) -> str:
            # No statement has written yet, but another writer must already be shut out.
            other = sqlite3.connect(path, timeout=0, isolation_level=None)
            try:
                other.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                return str(exc)
            finally:
                other.close()
            return "not locked"

        assert await on_the_store(store, probe, write=True) == "database is locked"
        assert await on_the_store(store, probe, write=False) == "not locked"


async def test_busy_timeout_exhausted_is_a_typed_error_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SessionStore(path, busy_timeout_ms=100) as store:
        await store.create(header("s"))
        token = await store.append("s", turn(0))
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreBusyError, match="locked"):
                await store.append("s", turn(6, 2))
            with pytest.raises(StoreBusyError):
                await store.delete("s")
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert await store.revision("s") == token
        await store.append("s", turn(6, 2))
        assert len(await store.read_from("s")) == 12


async def test_new_database_file_is_private(tmp_path: Path) -> None:
    existing = tmp_path / "shared"
    existing.mkdir(mode=0o755)
    os.chmod(existing, 0o755)
    async with SessionStore(existing / "a.db") as store:
        await store.create(header("s"))
        await store.append("s", turn(0))
    assert (existing / "a.db").stat().st_mode & 0o777 == 0o600
    assert existing.stat().st_mode & 0o777 == 0o755  # an existing directory is left as it was
    for suffix in ("-wal", "-shm"):
        side = existing / f"a.db{suffix}"
        if side.exists():
            assert side.stat().st_mode & 0o077 == 0
    fresh = tmp_path / "new" / "deeper"
    async with SessionStore(f"sqlite:///{fresh}/b.db"):
        pass
    assert fresh.stat().st_mode & 0o777 == 0o700
    assert fresh.parent.stat().st_mode & 0o777 == 0o700  # every directory we made
    assert (fresh / "b.db").stat().st_mode & 0o777 == 0o600


async def test_foreign_keys_cascade_from_sessions(tmp_path: Path) -> None:
    """The store's connections have foreign keys on: past the trigger that keeps a session's
    log (revision 0009), deleting its row cascades."""

    def delete(c: Any) -> None:
        c.execute(text("DROP TRIGGER trg_sessions_no_delete"))
        c.execute(text("DELETE FROM sessions WHERE id = 's'"))

    async with SessionStore(tmp_path / "s.db") as store:
        await store.create(header("s"))
        await store.append("s", turn(0))
        await on_the_store(store, delete, write=True)
        count = await raw_sql(
            store, lambda c: c.execute(text("SELECT COUNT(*) FROM session_events")).scalar_one()
        )
        assert count == 0
