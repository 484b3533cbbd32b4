"""``verify`` as a database integrity checker: SQLite's own check first, sessions found from the
event rows too, rows past the stored end, interrupted turns; and byte-level corruption of a
database file, where every operation either works or raises a typed error."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from factories import chunks, header, tamper, turn

from todo_sessions import SessionEvent, SessionStore, TodoSessionsError, verify_all
from todo_sessions.cli import main


async def verify(url: str, *args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, main, ["--db", url, "verify", *args])


async def test_an_interrupted_last_turn_is_reported_until_loaded(db_url: str) -> None:
    async with SessionStore(db_url) as store:
        await store.create(header("open"))
        await store.append("open", turn(0)[:4])  # turn/start … step/start: never closed
        report = await verify_all(store)
        ((problem,),) = [report.sessions["open"]]
        assert (problem.kind, problem.seq) == ("interrupted", 3)
        assert "load" in problem.message
        await store.load("open")
        assert (await verify_all(store)).ok


async def test_rows_past_the_stored_end_are_reported(db_url: str) -> None:
    async with SessionStore(db_url) as store:
        await store.create(header("s"))
        await store.append("s", turn(0))
        await tamper(
            store,
            "INSERT INTO session_events (session_id, seq, type, time, data, ignorable) "
            "VALUES ('s', 9, 'request/context', 0, '{}', false)",
        )
        problems = (await verify_all(store)).sessions["s"]
        assert [(p.kind, p.seq) for p in problems] == [("past-end", 9)]
        assert "outside todo_sessions" in problems[0].message


async def test_events_without_a_session_row_are_found(tmp_path: Path) -> None:
    path = tmp_path / "o.db"
    async with SessionStore(path) as store:
        await store.create(header("kept"))
        await store.append("kept", turn(0))
        await store.create(header("lost"))
        await store.append("lost", turn(0))
        assert await store.search_index_problems() == []  # indexed (it catches up first)
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA foreign_keys = OFF")  # no cascade: the events stay behind
    raw.execute("DROP TRIGGER trg_sessions_no_delete")  # (revision 0009 refuses it otherwise)
    raw.execute("DELETE FROM sessions WHERE id = 'lost'")
    raw.close()
    result = await verify(f"sqlite:///{path}", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["kept"] == []
    assert [p["kind"] for p in report["lost"]] == ["orphan"]
    # the search index's rows of the session are left behind with its events
    assert sorted(report[""], key=lambda p: p["message"]) == [
        {
            "seq": None,
            "kind": "database",
            "message": "2 row(s) of search_text refer to a missing row of sessions",
        },
        {
            "seq": None,
            "kind": "database",
            "message": "6 row(s) of session_events refer to a missing row of sessions",
        },
    ]


def _corrupt_index(path: Path) -> None:
    """Overwrite the pages of the ``sessions`` list index with garbage (a damaged index)."""
    raw = sqlite3.connect(path)
    page_size = raw.execute("PRAGMA page_size").fetchone()[0]
    rootpage = raw.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'ix_sessions_updated_at_id'"
    ).fetchone()[0]
    raw.close()
    with path.open("r+b") as f:
        f.seek((rootpage - 1) * page_size + 8)
        f.write(b"\x00" * (page_size - 8))


async def test_a_damaged_index_is_reported_and_hides_no_session(tmp_path: Path) -> None:
    path = tmp_path / "ix.db"
    async with SessionStore(path) as store:
        for name in ("a", "b", "c"):
            await store.create(header(name))
            await store.append(name, turn(0))
    _corrupt_index(path)
    check = sqlite3.connect(path).execute("PRAGMA integrity_check").fetchall()
    assert check != [("ok",)]
    result = await verify(f"sqlite:///{path}", "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report[""], report  # the database as a whole
    assert all(p["kind"] == "database" for p in report[""])
    assert set(report) == {"", "a", "b", "c"}  # found through the sessions' own keys
    plain = await verify(f"sqlite:///{path}")
    assert "✗ database" in plain.stdout


# -- byte-level corruption ------------------------------------------------------------------------


def _offsets(path: Path, count: int, seed: int) -> list[tuple[str, int]]:
    """Where to flip bytes: the file header, page headers, and cell content of every page."""
    raw = sqlite3.connect(path)
    page_size = raw.execute("PRAGMA page_size").fetchone()[0]
    pages = raw.execute("PRAGMA page_count").fetchone()[0]
    raw.close()
    rng = random.Random(seed)
    found: list[tuple[str, int]] = []
    for i in range(count):
        kind = ("header", "page-header", "cell")[i % 3]
        page = rng.randrange(pages)
        base = page * page_size + (100 if page == 0 else 0)
        if kind == "header":
            offset = rng.randrange(16, 100)
        elif kind == "page-header":
            offset = base + rng.randrange(12)
        else:
            offset = base + rng.randrange(12, page_size - (100 if page == 0 else 0))
        found.append((kind, offset))
    return found


def _damaged_copy(pristine: Path, copy: Path, offset: int) -> Path:
    """A copy of ``pristine`` with every bit of the byte at ``offset`` flipped."""
    shutil.copyfile(pristine, copy)
    with copy.open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([(byte[0] if byte else 0) ^ 0xFF]))
    return copy


def _sqlite_says_damaged(path: Path) -> bool:
    try:
        conn = sqlite3.connect(path)
        try:
            conn.text_factory = lambda raw: raw.decode("utf-8", "replace")  # damaged text
            try:
                return conn.execute("PRAGMA integrity_check").fetchall() != [("ok",)]
            except UnicodeDecodeError:  # SQLite's error text quotes the damaged bytes
                return True
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return True


async def _exercise(url: str) -> None:
    """Open, list, read, count todos, verify and append: each works or raises a typed error."""
    try:
        async with SessionStore(url) as store:
            ids = [s.id for s in await store.list()]
            for sid in ids:
                for call in (store.read_from, store.current_todos, store.derive_messages):
                    with contextlib.suppress(TodoSessionsError):
                        await call(sid)
            with contextlib.suppress(TodoSessionsError):
                await verify_all(store)
            try:
                await store.create(header("new"))
                await store.append("new", turn(0))
            except TodoSessionsError:
                pass
    except TodoSessionsError:
        pass


@pytest.mark.parametrize("name", [b"store_state", b"sessions", b"ix_session"])
async def test_schema_text_that_is_not_utf8_is_a_typed_error(tmp_path: Path, name: bytes) -> None:
    pristine = tmp_path / "p.db"
    async with SessionStore(pristine) as store:
        await store.create(header("a"))
        await store.append("a", turn(0))
    data = pristine.read_bytes()
    start = data.find(name)
    while start != -1:
        broken = bytearray(data)
        broken[start] = 0xC3  # a UTF-8 lead byte followed by ASCII: invalid
        copy = tmp_path / f"b{start}.db"
        copy.write_bytes(bytes(broken))
        await _exercise(f"sqlite:///{copy}")  # raises anything untyped
        start = data.find(name, start + 1)


@pytest.mark.slow
async def test_corrupted_copies_raise_only_typed_errors_and_verify_fails(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine.db"
    async with SessionStore(pristine) as store:
        for i in range(4):
            sid = f"s{i}"
            await store.create(header(sid, title=f"session {i}"))
            await store.append(sid, turn(0))
            await store.append(sid, chunks(6, 150))
            await store.append(sid, [SessionEvent("request/context", 156, 0, {"pad": "x" * 900})])
    damaged = 0
    for n, (kind, offset) in enumerate(
        _offsets(
            pristine,
            int(os.environ.get("CORRUPT_N", 90)),
            seed=int(os.environ.get("CORRUPT_SEED", 20261201)),
        )
    ):
        copy = _damaged_copy(pristine, tmp_path / f"c{n}.db", offset)
        sqlite_damaged = _sqlite_says_damaged(copy)
        url = f"sqlite:///{copy}"
        try:
            await _exercise(url)
        except Exception as exc:  # anything but a typed error is a defect
            raise AssertionError(f"{kind} byte {offset}: raw {type(exc).__name__}: {exc}") from exc
        if sqlite_damaged:
            damaged += 1
            # _exercise may have written to the copy: verify a fresh one
            probe = _damaged_copy(pristine, tmp_path / f"p{n}.db", offset)
            result = await verify(f"sqlite:///{probe}")
            assert result.exit_code != 0, f"{kind} byte {offset}: verify passed\n{result.output}"
            assert "Traceback" not in result.output
    assert damaged >= 10  # the campaign really damaged something
