"""Behind PgBouncer in transaction pooling mode (``?pgbouncer=true``).

The whole store contract suite also runs through PgBouncer (the ``pgbouncer`` backend of the
``db_url`` fixtures). These tests cover what only a pooler setup has: the URL flag and the
separate LISTEN connection (``listen_url``).
"""

from __future__ import annotations

import asyncio

import pytest
from conftest import through_pgbouncer
from factories import header, turn

from todo_sessions import SessionStore
from todo_sessions.store.engine import parse_url


def test_the_flag_turns_off_statements_that_outlive_a_transaction() -> None:
    target = parse_url("postgresql://u@h/db?pgbouncer=true")
    assert target.pooler
    assert target.connect_args["statement_cache_size"] == 0
    assert target.url.query["prepared_statement_cache_size"] == "0"
    name = target.connect_args["prepared_statement_name_func"]
    assert name() != name()  # never reused across the clients of one server connection
    assert "pgbouncer" not in target.url.query
    plain = parse_url("postgresql://u@h/db")
    assert not plain.pooler and "statement_cache_size" not in plain.connect_args


def test_a_bad_flag_or_listen_url_is_refused() -> None:
    with pytest.raises(ValueError, match="pgbouncer in the database URL must be true or false"):
        parse_url("postgresql://u@h/db?pgbouncer=maybe")
    with pytest.raises(ValueError, match="listen_url must be a PostgreSQL URL"):
        SessionStore("postgresql://u@h/db?pgbouncer=true", listen_url="sqlite://")


async def _woken_by_another_store(url: str, listen_url: str | None, within: float) -> None:
    async with SessionStore(url, listen_url=listen_url) as follower, SessionStore(url) as writer:
        await writer.create(header("w"))
        await writer.append("w", turn(0))
        tail = follower.follow("w", 6, poll_interval=60)
        pending = asyncio.create_task(anext(tail))
        await asyncio.sleep(0.2)
        assert not pending.done()
        await writer.append("w", turn(6, 2))
        # a poll would take 60 s: only a notification can deliver it this soon
        assert (await asyncio.wait_for(pending, within)).seq == 6
        await tail.aclose()


async def test_follow_listens_on_the_direct_listen_url(pg_database_url: str) -> None:
    from conftest import _empty_pg

    await _empty_pg(pg_database_url)
    await _woken_by_another_store(through_pgbouncer(pg_database_url), pg_database_url, 10)


async def test_without_listen_url_followers_poll(pg_database_url: str) -> None:
    from conftest import _empty_pg

    await _empty_pg(pg_database_url)
    with pytest.raises(TimeoutError):  # no LISTEN through the pooler: the 60 s poll decides
        await _woken_by_another_store(through_pgbouncer(pg_database_url), None, 1.5)


async def test_a_schema_through_the_pooler(fresh_pg_url: str) -> None:
    """A namespaced store behind PgBouncer: migrated, written, read and followed through the
    pooler (its statements never prepared for reuse), with LISTEN on the direct URL for the
    schema's own channel; nothing lands outside the schema."""
    pooled = through_pgbouncer(fresh_pg_url) + "&schema=agent"
    await _woken_by_another_store(pooled, fresh_pg_url, 10)
    async with SessionStore(pooled) as store:
        await store.update_meta("w", add_tags=["pooled"])
        assert [s.id for s in await store.list(tag="pooled")] == ["w"]
        events = await store.read_from("w")
        assert [e.seq for e in events] == list(range(13)) and events[-1].type == "session/meta"
    async with SessionStore(fresh_pg_url) as default:  # the default namespace: empty
        assert await default.list() == []
