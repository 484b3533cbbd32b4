"""The hash chain (tamper evidence) and the sessions that keep their log (revisions 0008, 0009).

On every backend (``db_url``: SQLite file and memory, PostgreSQL, PgBouncer, and the namespaced
forms): each append chains its events; ``verify`` (`integrity.verify_session`,
`SessionStore.chain_break`) names the first seq where a log rewritten past the triggers breaks
the chain: a payload edited, a session deleted and re-inserted edited, two events swapped, a
tail cut off (against a head kept elsewhere, or an export); a keyed chain verifies only with its
key; the migration chains rows stored before it. A raw ``DELETE FROM sessions`` (and on SQLite
``INSERT OR REPLACE``) of a session with events is refused with nothing lost, and
`SessionStore.delete` still deletes.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from factories import chain_literal, header, in_namespace, raw_sql, tamper, turn
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from todo_sessions import (
    CorruptSessionError,
    SchemaError,
    SessionEvent,
    SessionStore,
    migrate,
    verify_all,
    verify_session,
)
from todo_sessions._jsonl import (
    declared_chain,
    export_lines,
    file_chain,
    file_chain_problem,
    parse_lines,
)
from todo_sessions.cli import main
from todo_sessions.core.chain import chain_values, derive_key, event_text, genesis, link
from todo_sessions.store.codec import event_row, header_row
from todo_sessions.store.migrate import downgrade, run_locked


def meta(seq: int, title: str) -> SessionEvent:
    return SessionEvent(
        "session/meta", seq, 1_764_000_000_000 + seq, {"title": title}, ignorable=True
    )


async def two_turns(store: SessionStore, sid: str = "s") -> None:
    """12 events in three appends (one a lone event), a retitle among them."""
    await store.create(header(sid, title="first", cwd="/repo"))
    await store.append(sid, turn(0))
    await store.append(sid, [meta(6, "renamed")])
    await store.append(sid, turn(7, 2, text="yo"))


async def stored_chain(store: SessionStore, sid: str = "s") -> list[tuple[int, str | None]]:
    """The stored chain values (32 bytes each, BLOB / bytea) as hex, by seq."""

    def read(conn: Connection) -> list[tuple[int, str | None]]:
        sql = f"SELECT seq, chain FROM session_events WHERE session_id = '{sid}' ORDER BY seq"
        found = [(r[0], r[1]) for r in conn.execute(text(in_namespace(store, sql)))]
        assert all(v is None or (type(v) is bytes and len(v) == 32) for _, v in found), found
        return [(seq, None if v is None else v.hex()) for seq, v in found]

    return await raw_sql(store, read)


def chain_problems(problems: list[Any]) -> list[int | None]:
    return [p.seq for p in problems if p.kind == "chain"]


# -- the chain as written ---------------------------------------------------------------------


async def test_each_append_chains_its_events_from_the_header(store: SessionStore) -> None:
    await two_turns(store)
    log = await store.read("s")
    assert log.header.title == "renamed"  # the title is not bound in: session/meta changes it
    rows = [event_row("s", e) for e in log.events]
    expected = list(chain_values(header_row(log.header), rows))
    assert await stored_chain(store) == list(enumerate(expected))
    assert await store.head("s") == expected[-1]
    assert await store.chain_head("s") == (12, expected[-1])
    assert await store.chain_break("s") is None
    assert await verify_session(store, "s") == []
    assert (await verify_all(store)).ok


def test_the_chain_is_blake2b_over_the_previous_value_and_the_stored_text() -> None:
    """Pinned, so a change of the hashed text or of the header binding cannot pass
    unnoticed (an exported file or a kept head would stop verifying)."""
    head = header("pin", cwd="/r", title="any title")
    first = genesis(header_row(head))
    assert genesis(header_row(head.model_copy(update={"title": "another"}))) == first
    assert genesis(header_row(head.model_copy(update={"cwd": "/x"}))) != first
    event = SessionEvent("turn/start", 0, 5, {"turn": 1})
    assert event_text(event_row("pin", event)) == b'["turn/start",0,5,{"turn":1},null,null,false]'
    import hashlib

    want = hashlib.blake2b(first + event_text(event_row("pin", event)), digest_size=32)
    assert link(first, event_text(event_row("pin", event))) == want.digest()


async def test_a_pending_session_has_no_head_and_an_unknown_one_is_not_found(
    store: SessionStore,
) -> None:
    from todo_sessions import SessionNotFoundError

    await store.create(header("p"))
    assert await store.head("p") is None
    with pytest.raises(SessionNotFoundError):
        await store.head("nobody")


# -- tampering ----------------------------------------------------------------------------------


async def test_a_payload_edited_past_the_triggers_breaks_the_chain_there(
    store: SessionStore,
) -> None:
    await two_turns(store)
    await tamper(
        store,
        "UPDATE session_events SET data = REPLACE(data, '\"yo\"', '\"no\"') "
        "WHERE session_id = 's' AND seq = 8",
    )
    assert "no" in json.dumps((await store.read_from("s", 8, limit=1))[0].data)
    problems = await verify_session(store, "s")
    assert [(p.seq, p.kind) for p in problems] == [(8, "chain")]
    assert (await store.chain_break("s")) is not None


async def test_a_session_deleted_and_reinserted_edited_breaks_the_chain(
    store: SessionStore,
) -> None:
    await two_turns(store)
    temp = "CREATE TEMP TABLE {} AS SELECT * FROM {} WHERE {} = 's'"
    await tamper(
        store,
        temp.format("saved_s", "sessions", "id"),
        temp.format("saved_e", "session_events", "session_id"),
        "DELETE FROM session_events WHERE session_id = 's'",
        "DELETE FROM sessions WHERE id = 's'",
        "UPDATE saved_e SET data = REPLACE(data, '\"hi\"', '\"HI\"') WHERE seq = 1",
        "INSERT INTO sessions SELECT * FROM saved_s",
        "INSERT INTO session_events SELECT * FROM saved_e",  # the old chain values kept
        "DROP TABLE saved_s",
        "DROP TABLE saved_e",
    )
    assert chain_problems(await verify_session(store, "s")) == [1]


async def test_a_session_reinserted_without_chain_values_breaks_at_seq_0(
    store: SessionStore,
) -> None:
    await two_turns(store)
    await tamper(store, "UPDATE session_events SET chain = NULL WHERE session_id = 's'")
    broken = await store.chain_break("s")
    assert broken is not None and broken[0] == 0 and "no chain value" in broken[1]
    # and the store refuses to chain on from a value that is not there
    with pytest.raises(CorruptSessionError, match="at seq 12: the stored event has no chain"):
        await store.append("s", turn(13, 3))


async def test_two_events_swapped_break_the_chain_at_the_first(store: SessionStore) -> None:
    await two_turns(store)
    await tamper(
        store,
        "UPDATE session_events SET seq = 1000 WHERE session_id = 's' AND seq = 1",
        "UPDATE session_events SET seq = 1 WHERE session_id = 's' AND seq = 8",
        "UPDATE session_events SET seq = 8 WHERE session_id = 's' AND seq = 1000",
    )
    assert (await store.read_from("s", 1, limit=1))[0].data["id"] == "u8"
    assert chain_problems(await verify_session(store, "s")) == [1]


async def test_a_header_edited_breaks_the_chain_at_seq_0(store: SessionStore) -> None:
    await two_turns(store)
    await tamper(store, "UPDATE sessions SET cwd = '/elsewhere' WHERE id = 's'")
    assert chain_problems(await verify_session(store, "s")) == [0]


async def test_a_tail_cut_off_is_found_against_a_kept_head_or_an_export(
    store: SessionStore,
) -> None:
    await two_turns(store)
    kept = await store.chain_head("s")
    assert kept is not None and kept[1] is not None
    exported = [line async for line in export_lines(store, "s")]
    await tamper(
        store,
        "DELETE FROM session_events WHERE session_id = 's' AND seq >= 7",
        "UPDATE sessions SET next_seq = 7 WHERE id = 's'",
    )
    # on its own a cut log is a shorter valid chain: only what was kept elsewhere tells
    assert await store.chain_break("s") is None
    problems = await verify_session(store, "s", against={kept[0]: kept[1]})
    assert chain_problems(problems) == [7]
    file_header, events = parse_lines(exported)
    computed = file_chain(file_header, events)
    assert file_chain_problem(declared_chain(exported[0]), computed) is None
    assert chain_problems(await verify_session(store, "s", against=computed)) == [7]


async def test_a_rewrite_with_the_chain_recomputed_is_found_against_an_export(
    store: SessionStore,
) -> None:
    """Without a key anyone can recompute the chain: then only values kept elsewhere find
    the rewrite, at its first seq."""
    await two_turns(store)
    exported = [line async for line in export_lines(store, "s")]
    log = await store.read("s")
    rows = [event_row("s", e) for e in log.events]
    rows[3]["data"] = rows[3]["data"].replace("1}", "2}")
    forged = list(chain_values(header_row(log.header), rows))
    updates = [
        f"UPDATE session_events SET chain = {chain_literal(store, value)} "
        f"WHERE session_id = 's' AND seq = {seq}"
        for seq, value in enumerate(forged)
    ]
    edit = "UPDATE session_events SET data = REPLACE(data, '1}', '2}') WHERE seq = 3"
    await tamper(store, edit + " AND session_id = 's'", *updates)
    assert (await store.read_from("s", 3, limit=1))[0].data == {"turn": 1, "step": 2}
    assert await store.chain_break("s") is None
    file_header, events = parse_lines(exported)
    kept = file_chain(file_header, events)
    assert chain_problems(await verify_session(store, "s", against=kept)) == [3]
    assert await store.chain_break("s", against=kept) == (
        3,
        "the chain differs from the one kept elsewhere (the log was rewritten at or before "
        "this seq)",
    )


async def test_a_keyed_chain_verifies_only_with_its_key(db_url: str) -> None:
    if db_url == "sqlite://":
        pytest.skip("a memory database does not outlive its store")
    async with SessionStore(db_url, chain_key="s3cret") as keyed:
        await two_turns(keyed)
        assert keyed.keyed
        assert await keyed.chain_break("s") is None
        head = await keyed.head("s")
        # forged without the key: the keyed verify sees it at once
        log = await keyed.read("s")
        rows = [event_row("s", e) for e in log.events]
        rows[1]["data"] = rows[1]["data"].replace('"hi"', '"HI"')
        forged = list(chain_values(header_row(log.header), rows))
        await tamper(
            keyed,
            "UPDATE session_events SET data = REPLACE(data, '\"hi\"', '\"HI\"') "
            "WHERE session_id = 's' AND seq = 1",
            *(
                f"UPDATE session_events SET chain = {chain_literal(keyed, v)} "
                f"WHERE session_id = 's' AND seq = {q}"
                for q, v in enumerate(forged)
            ),
        )
        assert chain_problems(await verify_session(keyed, "s")) == [0]
    async with SessionStore(db_url) as plain:
        assert await plain.chain_break("s") is None  # the forgery is a valid plain chain
    async with SessionStore(db_url, chain_key="another") as other:
        assert (await other.chain_break("s") or (None,))[0] == 0
    assert head is not None and head != forged[-1]
    expected = list(
        chain_values(
            header_row(log.header), [event_row("s", e) for e in log.events], derive_key("s3cret")
        )
    )
    assert head == expected[-1]


# -- the export carries the chain ----------------------------------------------------------------


async def test_the_export_carries_the_head_and_an_edited_file_is_found(
    store: SessionStore,
) -> None:
    await two_turns(store)
    lines = [line async for line in export_lines(store, "s")]
    assert declared_chain(lines[0]) == await store.chain_head("s")
    file_header, events = parse_lines(lines)
    assert file_chain_problem(declared_chain(lines[0]), file_chain(file_header, events)) is None
    assert '"plan"' in lines[3]  # line 1 is the header: this is seq 2, a todo/write
    edited = [lines[0], *lines[1:3], lines[3].replace('"plan"', '"PLAN"'), *lines[4:]]
    file_header, events = parse_lines(edited)
    problem = file_chain_problem(declared_chain(edited[0]), file_chain(file_header, events))
    assert problem is not None and "edited" in problem
    assert chain_problems(
        await verify_session(store, "s", against=file_chain(file_header, events))
    ) == [2]


async def test_export_then_import_keeps_the_chain(store: SessionStore) -> None:
    from todo_sessions import import_lines

    await two_turns(store)
    lines = [line async for line in export_lines(store, "s")]
    await store.delete("s")
    await import_lines(store, lines)
    assert [line async for line in export_lines(store, "s")] == lines
    assert await store.chain_break("s") is None


def test_cli_verify_names_the_cut_seq_against_an_export(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    runner = CliRunner()

    async def fill() -> None:
        async with SessionStore(db) as store:
            await two_turns(store)

    import asyncio

    asyncio.run(fill())
    export = tmp_path / "s.jsonl"
    assert runner.invoke(main, ["--db", str(db), "export", "s", "-o", str(export)]).exit_code == 0
    ok = runner.invoke(main, ["--db", str(db), "verify", "--against", str(export), "--json"])
    assert ok.exit_code == 0, ok.output
    raw = sqlite3.connect(db, isolation_level=None)
    raw.execute("DROP TRIGGER trg_session_events_no_delete")
    raw.execute("DELETE FROM session_events WHERE session_id = 's' AND seq >= 9")
    raw.execute("UPDATE sessions SET next_seq = 9 WHERE id = 's'")
    raw.close()
    cut = runner.invoke(main, ["--db", str(db), "verify", "--against", str(export), "--json"])
    assert cut.exit_code == 1
    found = json.loads(cut.stdout)["s"]
    assert [(p["seq"], p["kind"]) for p in found if p["kind"] == "chain"] == [(9, "chain")]


def test_cli_verify_key_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "k.db"
    runner = CliRunner()

    async def fill() -> None:
        async with SessionStore(db, chain_key="k-1") as store:
            await two_turns(store)

    import asyncio

    asyncio.run(fill())
    monkeypatch.setenv("MY_CHAIN_KEY", "k-1")
    good = runner.invoke(main, ["--db", str(db), "verify", "s", "--key-env", "MY_CHAIN_KEY"])
    assert good.exit_code == 0, good.output
    plain = runner.invoke(main, ["--db", str(db), "verify", "s", "--json"])
    assert plain.exit_code == 1
    assert [p["seq"] for p in json.loads(plain.stdout)["s"] if p["kind"] == "chain"] == [0]
    missing = runner.invoke(main, ["--db", str(db), "verify", "s", "--key-env", "NOT_SET_27"])
    assert missing.exit_code == 1 and "NOT_SET_27 is not set" in missing.output
    monkeypatch.setenv("TODO_SESSIONS_CHAIN_KEY", "k-1")  # every command's key
    assert runner.invoke(main, ["--db", str(db), "verify", "s"]).exit_code == 0


# -- the migration ------------------------------------------------------------------------------


async def test_the_migration_chains_rows_stored_before_it(db_url: str) -> None:
    if db_url == "sqlite://":
        pytest.skip("a memory database does not outlive its store")
    async with SessionStore(db_url) as store:
        await two_turns(store, "m1")
        await store.create(header("m2", parent_session="m1", seed_length=3))
        await store.append("m2", turn(0))
        written = {sid: await stored_chain(store, sid) for sid in ("m1", "m2")}
    await downgrade(db_url, revision="0007")
    ns = SessionStore(db_url).namespace

    def columns(conn: Connection) -> list[str]:
        from sqlalchemy import inspect

        table = ns.name("session_events")
        return [c["name"] for c in inspect(conn).get_columns(table, schema=ns.schema)]

    assert "chain" not in await run_locked(db_url, columns)
    with pytest.raises(SchemaError, match="'0007'"):
        async with SessionStore(db_url, migrate=False):
            pass
    await migrate(db_url)
    async with SessionStore(db_url) as store:
        assert {sid: await stored_chain(store, sid) for sid in ("m1", "m2")} == written
        assert await store.chain_break("m1") is None and await store.chain_break("m2") is None
        assert (await verify_all(store)).ok
        await store.append("m1", turn(13, 3))  # and it chains on
        assert await store.chain_break("m1") is None


# -- a session keeps its log (revision 0009) ------------------------------------------------------


async def test_a_raw_delete_of_a_session_with_events_is_refused(store: SessionStore) -> None:
    await two_turns(store)

    def delete(conn: Connection) -> None:
        conn.execute(text(in_namespace(store, "DELETE FROM sessions WHERE id = 's'")))

    with pytest.raises(DBAPIError, match="keeps them"):
        await raw_sql(store, delete)
    assert await store.count("s") == 13
    assert await verify_session(store, "s") == []
    if store.dialect == "postgresql":

        def truncate(conn: Connection) -> None:
            conn.execute(text(in_namespace(store, "TRUNCATE sessions CASCADE")))

        with pytest.raises(DBAPIError, match="append-only"):
            await raw_sql(store, truncate)
        assert await store.count("s") == 13


async def test_the_store_still_deletes_a_session_and_all_it_has(store: SessionStore) -> None:
    from todo_sessions import SessionNotFoundError

    await two_turns(store)
    await two_turns(store, "other")
    await store.delete("s")
    with pytest.raises(SessionNotFoundError):
        await store.read("s")

    def left(conn: Connection) -> int:
        sql = "SELECT COUNT(*) FROM session_events WHERE session_id = 's'"
        return int(conn.execute(text(in_namespace(store, sql))).scalar_one())

    assert await raw_sql(store, left) == 0
    assert await store.count("other") == 13 and await store.chain_break("other") is None
    await two_turns(store)  # the id can be used again, chained afresh
    assert await store.chain_break("s") is None


@pytest.mark.parametrize("foreign_keys", ["ON", "OFF"])
async def test_sqlite_insert_or_replace_and_delete_of_a_session_are_refused(
    tmp_path: Path, foreign_keys: str
) -> None:
    path = tmp_path / "r.db"
    async with SessionStore(path) as store:
        await two_turns(store, "d1")
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute(f"PRAGMA foreign_keys = {foreign_keys}")
    with pytest.raises(sqlite3.IntegrityError, match="keeps them"):
        raw.execute("INSERT OR REPLACE INTO sessions SELECT * FROM sessions WHERE id = 'd1'")
    with pytest.raises(sqlite3.IntegrityError, match="keeps them"):
        raw.execute("REPLACE INTO sessions SELECT * FROM sessions WHERE id = 'd1'")
    with pytest.raises(sqlite3.IntegrityError, match="keeps them"):
        raw.execute("DELETE FROM sessions")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("DELETE FROM session_events WHERE session_id = 'd1'")
    assert raw.execute("SELECT COUNT(*), MAX(seq) FROM session_events").fetchone() == (13, 12)
    assert raw.execute("SELECT next_seq FROM sessions").fetchone() == (13,)
    raw.close()
    async with SessionStore(path) as store:
        assert await verify_session(store, "d1") == []
        await store.delete("d1")
        assert [sid async for sid in store.session_ids()] == []
