"""Staying up on PostgreSQL: dead connections are discarded, appends land exactly once.

A store must survive its backends being terminated, the network being reset and the server
being unreachable for a while: the next call uses a fresh connection, a read that hit a dead
connection is retried, an append whose commit was never confirmed is decided by reading the
session back, and ``follow`` reconnects and goes on from where it was.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from factories import T0, header
from pg_chaos import TcpProxy, terminate_backends

from todo_sessions import SeqConflictError, SessionEvent, SessionStore, StoreUnavailableError
from todo_sessions.store.postgres import transactions as pg_transactions


def event(seq: int, text: str = "x") -> SessionEvent:
    return SessionEvent("request/context", seq, T0 + seq, {"text": text})


@pytest.fixture
async def pg_url(pg_database_url: str) -> str:
    from conftest import _empty_pg

    await _empty_pg(pg_database_url)
    return pg_database_url


@pytest.fixture
async def proxy(pg_url: str) -> AsyncIterator[TcpProxy]:
    proxy = TcpProxy(pg_url)
    await proxy.start()
    yield proxy
    await proxy.stop()


async def stored(url: str, session_id: str) -> list[SessionEvent]:
    async with SessionStore(url) as other:
        return await other.read_from(session_id)


async def test_every_call_after_terminated_backends_uses_a_fresh_connection(pg_url: str) -> None:
    async with SessionStore(pg_url, pool_size=3) as store:
        await store.create(header("s"))
        await store.append("s", [event(0)])
        # several pooled connections, all about to die
        await asyncio.gather(*(store.read_from("s") for _ in range(3)))
        for round_ in range(3):
            assert await terminate_backends(pg_url) >= 1
            first = 1 + round_ * 2
            await store.append("s", [event(first)])
            assert len(await store.read_from("s")) == first + 1
            await store.append("s", [event(first + 1)])
            assert await store.count("s") == first + 2
    assert [e.seq for e in await stored(pg_url, "s")] == list(range(7))


async def test_a_network_reset_costs_no_call(proxy: TcpProxy, pg_url: str) -> None:
    async with SessionStore(proxy.url()) as store:
        await store.create(header("s"))
        await store.append("s", [event(0)])
        for seq in range(1, 4):
            proxy.reset()
            await store.append("s", [event(seq)])
            proxy.reset()
            assert [e.seq for e in await store.read_from("s")] == list(range(seq + 1))


async def test_unreachable_server_is_a_typed_error_and_the_store_recovers(
    proxy: TcpProxy,
) -> None:
    async with SessionStore(proxy.url()) as store:
        await store.create(header("s"))
        await store.append("s", [event(0)])
        await proxy.stop()
        with pytest.raises(StoreUnavailableError, match="cannot reach the database"):
            await store.append("s", [event(1)])
        with pytest.raises(StoreUnavailableError):
            await store.read_from("s")
        await proxy.start()  # same port: reachable again
        await store.append("s", [event(1)])
        assert [e.seq for e in await store.read_from("s")] == [0, 1]


# -- exactly once across a lost commit confirmation ----------------------------------------------


def lose_the_connection(
    monkeypatch: pytest.MonkeyPatch, url: str, *, after_commit: bool
) -> list[str]:
    """Make the store's next append lose its connection: before the transaction reaches the
    server's commit (``after_commit=False``: nothing is stored) or after the server committed
    but before the client heard so (``after_commit=True``). Returns a log of what happened."""
    real = pg_transactions.append
    log: list[str] = []

    async def sabotaged(driver: Any, batch: Any, *statements: Any) -> Any:
        if log:  # only the first attempt is sabotaged
            log.append("retried")
            return await real(driver, batch, *statements)
        log.append("sabotaged")
        if after_commit:
            await real(driver, batch, *statements)  # committed on the server
        await terminate_backends(url)  # also kills this connection
        await asyncio.sleep(0.05)
        if after_commit:  # the client never learns that the commit succeeded
            import asyncpg

            raise asyncpg.ConnectionDoesNotExistError(
                "connection was closed in the middle of operation"
            )
        return await real(driver, batch, *statements)  # fails for real: the connection died

    monkeypatch.setattr(pg_transactions, "append", sabotaged)
    return log


@pytest.mark.parametrize("after_commit", [False, True], ids=["not-committed", "committed"])
async def test_append_with_lost_confirmation_lands_exactly_once(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, after_commit: bool
) -> None:
    async with SessionStore(pg_url) as store:
        await store.create(header("s"))
        await store.append("s", [event(0)])
        log = lose_the_connection(monkeypatch, pg_url, after_commit=after_commit)
        batch = [event(1, "a"), event(2, "b")]
        token = await store.append("s", batch)
        # committed: decided by reading back, no second send; not committed: sent once more
        assert log == (["sabotaged"] if after_commit else ["sabotaged", "retried"])
        assert token == await store.revision("s")
    events = await stored(pg_url, "s")
    assert [e.seq for e in events] == [0, 1, 2]
    assert [e.data_json for e in events[1:]] == [e.data_json for e in batch]


async def test_lost_confirmation_with_other_rows_stored_is_a_seq_conflict(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SessionStore(pg_url) as store:
        await store.create(header("s"))
        await store.append("s", [event(0)])
        real = pg_transactions.append
        monkeypatch.setattr(pg_transactions, "append", real)  # the rival appends normally

        async def someone_else_wins(driver: Any, batch: Any, *statements: Any) -> Any:
            monkeypatch.setattr(pg_transactions, "append", real)
            async with SessionStore(pg_url) as rival:
                await rival.append("s", [event(1, "rival")])
            await terminate_backends(pg_url)
            await asyncio.sleep(0.05)
            return await real(driver, batch, *statements)

        monkeypatch.setattr(pg_transactions, "append", someone_else_wins)
        with pytest.raises(SeqConflictError, match="stored next seq is 2"):
            await store.append("s", [event(1, "mine")])
    events = await stored(pg_url, "s")
    assert [(e.seq, e.data["text"]) for e in events] == [(0, "x"), (1, "rival")]


# -- follow ------------------------------------------------------------------------------------


async def test_follow_survives_terminations_with_no_gap_or_duplicate(pg_url: str) -> None:
    async with SessionStore(pg_url) as writer, SessionStore(pg_url) as reader:
        await writer.create(header("s"))
        await writer.append("s", [event(0)])
        seen: list[int] = []

        async def follow() -> None:
            async for e in reader.follow("s"):
                seen.append(e.seq)
                if e.seq == 29:
                    return

        following = asyncio.create_task(follow())
        for seq in range(1, 30):
            if seq % 7 == 0:
                await terminate_backends(pg_url)  # the listener's connection too
            await writer.append("s", [event(seq)])
            await asyncio.sleep(0.01)
        await asyncio.wait_for(following, 20)
        assert seen == list(range(30))


async def test_follow_reconnects_after_an_outage_and_catches_up(
    proxy: TcpProxy, pg_url: str
) -> None:
    async with SessionStore(proxy.url()) as reader, SessionStore(pg_url) as writer:
        await writer.create(header("s"))
        await writer.append("s", [event(0)])
        seen: list[int] = []
        first_yield = asyncio.Event()

        async def follow() -> None:
            async for e in reader.follow("s", reconnect_timeout=30):
                seen.append(e.seq)
                first_yield.set()
                if e.seq == 5:
                    return

        following = asyncio.create_task(follow())
        await first_yield.wait()
        await proxy.stop()
        await writer.append("s", [event(1), event(2)])  # written while the follower is cut off
        await asyncio.sleep(0.5)
        await proxy.start()
        await writer.append("s", [event(3), event(4), event(5)])
        await asyncio.wait_for(following, 20)
        assert seen == [0, 1, 2, 3, 4, 5]


async def test_follow_gives_up_after_reconnect_timeout(proxy: TcpProxy) -> None:
    async with SessionStore(proxy.url()) as reader:
        await reader.create(header("s"))
        await reader.append("s", [event(0)])
        seen: list[int] = []
        first_yield = asyncio.Event()

        async def follow() -> None:
            async for e in reader.follow("s", reconnect_timeout=0.5):
                seen.append(e.seq)
                first_yield.set()

        following = asyncio.create_task(follow())
        await first_yield.wait()
        await proxy.stop()
        with pytest.raises(
            StoreUnavailableError, match=r"unreachable for 0.5 s; the last event yielded was seq 0"
        ):
            await asyncio.wait_for(following, 20)
