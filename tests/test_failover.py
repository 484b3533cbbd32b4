"""PostgreSQL with a primary and a standby: failover, lost tails, standbys in the host list,
read replicas.

Each scenario gets a pair of servers of its own (`pg_cluster.Pair`, started by the test from
Debian's binaries as the postgres user, in a temporary directory on free ports), built from one
``initdb`` per module; every server is stopped afterwards. ``fsync`` stays on.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from typing import Any

import pg_cluster
import pytest
from factories import T0, header

from todo_sessions import (
    AcknowledgedEventsLostError,
    SeqConflictError,
    SessionEvent,
    SessionStore,
    StandbyServerError,
    verify_session,
)

pytestmark = pytest.mark.skipif(
    not pg_cluster.available(), reason="needs Debian's PostgreSQL 15 binaries (and a postgres user)"
)


def event(seq: int, text: str) -> SessionEvent:
    return SessionEvent("request/context", seq, T0 + seq, {"text": text})


@pytest.fixture(scope="module")
def template() -> Iterator[pg_cluster.Template]:
    with pg_cluster.template() as made:
        yield made


@pytest.fixture
def sync_pair(template: pg_cluster.Template) -> Iterator[pg_cluster.Pair]:
    pair = template.pair(synchronous=True)
    yield pair
    pair.stop()


@pytest.fixture
def async_pair(template: pg_cluster.Template) -> Iterator[pg_cluster.Pair]:
    pair = template.pair(synchronous=False)
    yield pair
    pair.stop()


@pytest.fixture(scope="module")
def standing_pair(template: pg_cluster.Template) -> Iterator[pg_cluster.Pair]:
    """A pair that never fails over, shared by the module's tests (a database each)."""
    pair = template.pair(synchronous=False)
    yield pair
    pair.stop()


class Db:
    """A database of its own on `standing_pair`: its URL on the primary and on the standby."""

    def __init__(self, pair: pg_cluster.Pair, name: str) -> None:
        self.pair = pair
        self.name = name
        self.primary = pair.primary.url_for(name)
        self.standby = pair.standby.url_for(name)

    def multi_host_url(self, **kwargs: Any) -> str:
        return self.pair.multi_host_url(database=self.name, **kwargs)


@pytest.fixture
async def standing_db(standing_pair: pg_cluster.Pair) -> AsyncIterator[Db]:
    name = f"t_{secrets.token_hex(4)}"
    await fetchval(standing_pair.primary.url, f'CREATE DATABASE "{name}"')
    db = Db(standing_pair, name)
    async with SessionStore(db.primary):  # migrated on the primary
        pass
    await caught_up(standing_pair)
    yield db
    await fetchval(standing_pair.primary.url, f'DROP DATABASE "{name}" WITH (FORCE)')


async def fetchval(url: str, sql: str) -> object:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


async def caught_up(pair: pg_cluster.Pair) -> None:
    """Until the standby has replayed everything the primary has written so far."""
    target = await fetchval(pair.primary.url, "SELECT pg_current_wal_lsn()::text")
    for _ in range(1000):
        done = await fetchval(
            pair.standby.url, f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"
        )
        if done:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the standby never caught up")


async def stored(url: str, session_id: str) -> list[tuple[int, str]]:
    async with SessionStore(url, migrate=False) as store:
        return [(e.seq, e.data["text"]) for e in await store.read_from(session_id)]


async def fail_over(pair: pg_cluster.Pair) -> None:
    """The primary dies (``pg_ctl stop -m immediate``: no shutdown checkpoint, connections cut)
    and the standby is promoted."""
    await asyncio.to_thread(pair.primary.stop, "immediate")
    await asyncio.to_thread(pair.standby.promote)


# -- synchronous replication: nothing acknowledged is lost ---------------------------------------


async def test_sync_failover_loses_nothing_acknowledged_and_appends_go_on(
    sync_pair: pg_cluster.Pair,
) -> None:
    url = sync_pair.multi_host_url(attrs="read-write")
    sessions = [f"s{i}" for i in range(4)]
    per_session = 40
    acknowledged: dict[str, list[tuple[int, str]]] = {s: [] for s in sessions}
    failed_over, ready = asyncio.Event(), asyncio.Event()
    after_failover: dict[str, int] = {}
    # reconnect_timeout=10: an append that is not through within 10 s of the failover raises
    async with (
        SessionStore(url, reconnect_timeout=10.0) as store,
        SessionStore(url, reconnect_timeout=10.0) as watcher,
    ):
        for session_id in sessions:
            await store.create(header(session_id))
            await store.append(session_id, [event(0, f"{session_id}-0")])
            acknowledged[session_id].append((0, f"{session_id}-0"))

        async def write(session_id: str) -> None:
            for seq in range(1, per_session):
                text = f"{session_id}-{seq}"
                await store.append(session_id, [event(seq, text)])
                acknowledged[session_id].append((seq, text))
                if min(len(a) for a in acknowledged.values()) >= 10:
                    ready.set()
                if failed_over.is_set():
                    after_failover[session_id] = after_failover.get(session_id, 0) + 1
                await asyncio.sleep(0.005)

        async def follow(session_id: str) -> list[tuple[int, str]]:
            seen: list[tuple[int, str]] = []
            stream = watcher.follow(session_id, poll_interval=0.05, reconnect_timeout=20.0)
            async with aclosing(stream):  # type: ignore[type-var]  # an async generator
                async for e in stream:
                    seen.append((e.seq, e.data["text"]))
                    if len(seen) == per_session:
                        return seen
            return seen

        followers = [asyncio.create_task(follow(s)) for s in sessions]
        writers = [asyncio.create_task(write(s)) for s in sessions]
        await ready.wait()  # each session has 10 acknowledged events
        await fail_over(sync_pair)
        failed_over.set()
        await asyncio.gather(*writers)
        seen = await asyncio.wait_for(asyncio.gather(*followers), 60)
    assert all(after_failover.get(s, 0) > 0 for s in sessions)  # appends went on afterwards
    for session_id, followed in zip(sessions, seen, strict=True):
        on_new_primary = await stored(sync_pair.standby.url, session_id)
        # every acknowledged event exactly once, at its seq, with its contents
        assert on_new_primary == acknowledged[session_id]
        assert [seq for seq, _ in on_new_primary] == list(range(per_session))
        assert followed == on_new_primary  # follow saw every event, in order, once


# -- asynchronous replication: a lost tail is found, its seqs never handed out again -------------


async def test_async_failover_reports_the_lost_tail_and_never_reuses_its_seqs(
    async_pair: pg_cluster.Pair,
) -> None:
    url = async_pair.multi_host_url(attrs="read-write")
    async with SessionStore(url, reconnect_timeout=10.0) as store:
        await store.create(header("s"))
        for seq in range(5):
            await store.append("s", [event(seq, f"kept-{seq}")])
        await caught_up(async_pair)
        # the standby stops receiving WAL: what the primary acknowledges now, it never gets
        await fetchval(async_pair.standby.url, "ALTER SYSTEM SET primary_conninfo = ''")
        await fetchval(async_pair.standby.url, "SELECT pg_reload_conf()")
        for _ in range(200):
            if not await fetchval(
                async_pair.standby.url, "SELECT count(*) FROM pg_stat_wal_receiver"
            ):
                break
            await asyncio.sleep(0.02)
        for seq in range(5, 8):
            await store.append("s", [event(seq, f"acknowledged-{seq}")])
        await fail_over(async_pair)

        # the next append at the acknowledged end: the database is behind it
        with pytest.raises(AcknowledgedEventsLostError) as lost:
            await store.append("s", [event(8, "next")])
        assert (lost.value.session_id, lost.value.acknowledged_end, lost.value.stored_end) == (
            "s",
            8,
            5,
        )
        assert list(lost.value.lost_seqs) == [5, 6, 7]
        assert "seqs 5..7" in str(lost.value)
        # a writer that took the stored end at its word would reuse seq 5: refused
        with pytest.raises(AcknowledgedEventsLostError):
            await store.append("s", [event(5, "other contents")])
        # reads report it too, and so does verify
        with pytest.raises(AcknowledgedEventsLostError):
            await store.read_from("s")
        problems = await verify_session(store, "s")
        assert [(p.kind, p.seq) for p in problems] == [("lost", 5)]
    # nothing was written at the lost seqs: no seq acknowledged twice with other contents
    assert await stored(async_pair.standby.url, "s") == [(seq, f"kept-{seq}") for seq in range(5)]


# -- a standby first in the host list ------------------------------------------------------------


async def test_a_write_on_a_standby_is_typed_and_retried_on_the_next_host(
    standing_db: Db,
) -> None:
    primary, standby = standing_db.primary, standing_db.standby
    async with SessionStore(primary) as store:
        await store.create(header("s"))
        await store.append("s", [event(0, "first")])
    await caught_up(standing_db.pair)
    # the standby alone: the write is refused, typed (and nothing is written anywhere)
    async with SessionStore(standby, reconnect_timeout=0.0) as on_standby:
        with pytest.raises(StandbyServerError, match="does not take writes"):
            await on_standby.append("s", [event(1, "refused")])
        assert [e.seq for e in await on_standby.read_from("s")] == [0]  # reads work there
    url = standing_db.multi_host_url(attrs="any", standby_first=True)
    async with SessionStore(url) as store:
        await store.append("s", [event(1, "second")])  # reached the standby, then the primary
        await store.append("s", [event(2, "third")])
        # a conflict is still a conflict after the retry: nothing written twice
        with pytest.raises(SeqConflictError):
            await store.append("s", [event(2, "third")])
    expected = [(0, "first"), (1, "second"), (2, "third")]
    assert await stored(primary, "s") == expected
    # a lease (a write of its own transaction) is refused by the standby and taken on the
    # primary, once: the retried acquire is its first epoch, not a second one
    async with SessionStore(url) as store:
        lease = await store.acquire_lease("s", "worker")
        holders = await store.lease_holders(["s"])
        assert lease.epoch == holders["s"].epoch == 1
        assert holders["s"].owner == "worker"
        await store.append("s", [event(3, "leased")], lease=lease)
        assert await store.release_lease(lease)


# -- read replicas --------------------------------------------------------------------------------


async def test_a_read_replica_serves_reads_and_the_store_reads_its_own_writes(
    standing_db: Db,
) -> None:
    primary, standby = standing_db.primary, standing_db.standby
    async with (
        SessionStore(primary, read_url=standby, replica_wait=0.2) as store,
        SessionStore(primary) as other,
    ):
        await store.create(header("mine"))
        await other.create(header("theirs"))
        await other.append("theirs", [event(0, "t0")])
        await caught_up(standing_db.pair)
        await fetchval(standby, "SELECT pg_wal_replay_pause()")
        try:
            # another store's append: stale-tolerant reads on the replica do not see it yet
            await other.append("theirs", [event(1, "t1")])
            assert [e.seq for e in await store.read_from("theirs")] == [0]
            assert {s.id: s.next_seq for s in await store.list()} == {"theirs": 1}
            # read-your-writes: the replica has not replayed it, the primary serves the read
            await store.append("mine", [event(0, "m0")])
            assert [e.data["text"] for e in await store.read_from("mine")] == ["m0"]
            assert {s.id: s.next_seq for s in await store.list()} == {"theirs": 2, "mine": 1}
        finally:
            await fetchval(standby, "SELECT pg_wal_replay_resume()")
        await caught_up(standing_db.pair)
        await store.append("mine", [event(1, "m1")])
        # caught up, the replica's list and replay agree with the primary's
        assert [s.id for s in await store.list()] == [s.id for s in await other.list()]
        for session_id in ("mine", "theirs"):
            assert await store.read_from(session_id) == await other.read_from(session_id)
        # a seq conflict makes the next read wait for what the primary had then
        await fetchval(standby, "SELECT pg_wal_replay_pause()")
        try:
            await other.append("theirs", [event(2, "t2")])
            with pytest.raises(SeqConflictError):
                await store.append("theirs", [event(2, "mine, too late")])
            assert [e.seq for e in await store.read_from("theirs")] == [0, 1, 2]
        finally:
            await fetchval(standby, "SELECT pg_wal_replay_resume()")


async def test_the_replica_url_parameter_names_the_replica_hosts(
    standing_db: Db,
) -> None:
    port = standing_db.pair.standby.port
    url = f"{standing_db.primary}?replica=127.0.0.1:{port}"
    async with (
        SessionStore(url, replica_wait=0.2) as store,
        SessionStore(standing_db.primary) as other,
    ):
        await store.create(header("s"))
        await store.append("s", [event(0, "a")])
        await caught_up(standing_db.pair)
        await fetchval(standing_db.standby, "SELECT pg_wal_replay_pause()")
        try:
            await other.append("s", [event(1, "b")])
            assert [e.seq for e in await store.read_from("s")] == [0]  # from the replica
        finally:
            await fetchval(standing_db.standby, "SELECT pg_wal_replay_resume()")


async def test_follow_through_a_lagging_replica_sees_every_append(standing_db: Db) -> None:
    primary, standby = standing_db.primary, standing_db.standby
    async with (
        SessionStore(primary, read_url=standby, replica_wait=0.1) as watcher,
        SessionStore(primary) as writer,
    ):
        await writer.create(header("f"))
        await writer.append("f", [event(0, "e0")])
        await caught_up(standing_db.pair)
        await fetchval(standby, "SELECT pg_wal_replay_pause()")
        try:

            async def follow() -> list[str]:
                seen: list[str] = []
                stream = watcher.follow("f", reconnect_timeout=5.0)
                async with aclosing(stream):  # type: ignore[type-var]  # an async generator
                    async for e in stream:
                        seen.append(e.data["text"])
                        if len(seen) == 4:
                            return seen
                return seen

            following = asyncio.create_task(follow())
            for seq in range(1, 4):
                await writer.append("f", [event(seq, f"e{seq}")])
            # the replica replays nothing: each notified page falls back to the primary
            assert await asyncio.wait_for(following, 30) == ["e0", "e1", "e2", "e3"]
        finally:
            await fetchval(standby, "SELECT pg_wal_replay_resume()")
