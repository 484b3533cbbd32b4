"""A keyed chain is never poisoned by an unkeyed write (issue 39, item 4): a store without
the session's key (or with another) refuses to append to it with `ChainKeyError` naming
``TODO_SESSIONS_CHAIN_KEY``, in the library and on the command line, and ``verify`` tells
an unkeyed link (as an earlier version wrote one) from a changed event."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner
from factories import header, tamper, turn, user_message

from todo_sessions import SessionStore, verify_session
from todo_sessions.cli import main
from todo_sessions.errors import ChainKeyError
from todo_sessions.store import writing


@pytest.fixture(params=["sqlite-file", "postgres"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite-file":
        return f"sqlite:///{tmp_path}/s.db"
    return str(request.getfixturevalue("fresh_pg_url"))


async def keyed_session(url: str, key: str = "k1") -> None:
    async with SessionStore(url, chain_key=key) as store:
        await store.create(header("s1", title="first"))
        await store.append("s1", turn(0))


async def test_a_store_without_the_key_refuses_to_append(backend_url: str) -> None:
    await keyed_session(backend_url)
    for other in (None, "k2"):
        async with SessionStore(backend_url, chain_key=other) as store:
            with pytest.raises(ChainKeyError, match="TODO_SESSIONS_CHAIN_KEY") as info:
                await store.append("s1", [user_message(6)])
            assert (info.value.session_id, info.value.seq) == ("s1", 5)
            with pytest.raises(ChainKeyError):
                await store.update_meta("s1", title="second")
            assert await store.count("s1") == 6  # nothing written
    async with SessionStore(backend_url, chain_key="k1") as store:
        await store.append("s1", [user_message(6)])
        await store.append("s1", [user_message(7)])  # its own link: no read needed
        assert await store.chain_break("s1") is None


async def test_unkeyed_sessions_stay_appendable(backend_url: str) -> None:
    async with SessionStore(backend_url) as store:
        await store.create(header("plain"))
        await store.append("plain", turn(0))
    async with SessionStore(backend_url) as store:
        await store.append("plain", [user_message(6)])
    async with SessionStore(backend_url, chain_key="k1") as store:  # a key set later
        await store.append("plain", [user_message(7)])
        assert await store.count("plain") == 8


def test_retitle_without_the_key_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = f"sqlite:///{tmp_path}/s.db"
    asyncio.run(keyed_session(db))
    runner = CliRunner()
    monkeypatch.delenv("TODO_SESSIONS_CHAIN_KEY", raising=False)
    refused = runner.invoke(main, ["--db", db, "retitle", "s1", "second"])
    assert refused.exit_code == 1
    assert refused.output.startswith("error: ") and "TODO_SESSIONS_CHAIN_KEY" in refused.output
    assert "unexpected" not in refused.output
    monkeypatch.setenv("TODO_SESSIONS_CHAIN_KEY", "k1")
    done = runner.invoke(main, ["--db", db, "retitle", "s1", "second"])
    assert done.exit_code == 0, done.output
    verified = runner.invoke(main, ["--db", db, "verify", "s1"])
    assert verified.exit_code == 0 and "✓ s1" in verified.output


async def test_verify_tells_an_unkeyed_link_from_tampering(
    backend_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await keyed_session(backend_url)
    with monkeypatch.context() as unchecked:  # as a version without the check appended
        unchecked.setattr(writing, "check_append_key", _no_check)
        async with SessionStore(backend_url) as store:
            await store.append("s1", [user_message(6)])
    async with SessionStore(backend_url, chain_key="k1") as store:
        await store.append("s1", [user_message(7)])  # keyed again after it
        problems = await verify_session(store, "s1")
        assert [(p.seq, p.kind) for p in problems] == [(6, "chain")]
        assert problems[0].message.startswith("unkeyed link:")
        await tamper(store, "UPDATE session_events SET time = time + 1 WHERE seq = 3")
        changed = await verify_session(store, "s1")
        assert [(p.seq, p.kind) for p in changed] == [(3, "chain")]
        assert "changed, moved or inserted" in changed[0].message


def test_verify_on_the_command_line_reports_the_unkeyed_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = f"sqlite:///{tmp_path}/s.db"
    asyncio.run(keyed_session(db))

    async def unkeyed_append() -> None:
        async with SessionStore(db) as store:
            await store.append("s1", [user_message(6)])

    with monkeypatch.context() as unchecked:
        unchecked.setattr(writing, "check_append_key", _no_check)
        asyncio.run(unkeyed_append())
    monkeypatch.setenv("K", "k1")
    result = CliRunner().invoke(main, ["--db", db, "verify", "s1", "--key-env", "K"])
    assert result.exit_code == 1
    assert "unkeyed link" in result.output and "changed, moved" not in result.output


async def _no_check(store: object, session_id: str, first: int) -> None:
    return None
