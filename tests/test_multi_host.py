"""Multi-host PostgreSQL URLs (libpq's ``h1:p1,h2:p2``, ``target_session_attrs``,
``load_balance_hosts``, ``replica=``), the standby condition, and the retry within the
reconnect timeout. The failover scenarios on real primary/standby pairs are in
``tests/test_failover.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pg_cluster
import pytest
from factories import T0, header
from pg_chaos import TcpProxy, asyncpg_dsn
from sqlalchemy.engine import make_url

from todo_sessions import SessionEvent, SessionStore, StandbyServerError, StoreUnavailableError
from todo_sessions.store import postgres
from todo_sessions.store.backends import replica_target
from todo_sessions.store.connecting import Unresponsive, connect_each_host
from todo_sessions.store.engine import HostChoice, parse_url, replica_url
from todo_sessions.store.retry import until_reachable
from todo_sessions.store.translate import translated


def event(seq: int) -> SessionEvent:
    return SessionEvent("request/context", seq, T0 + seq, {"text": f"e{seq}"})


# -- parsing -------------------------------------------------------------------------------------


def test_libpq_multi_host_form_becomes_asyncpg_host_and_port_lists() -> None:
    target = parse_url(
        "postgresql://u:secret@db1:5432,db2:5433,[::1]:5434/app"
        "?target_session_attrs=read-write&application_name=agent"
    )
    assert target.hosts == (("db1", 5432), ("db2", 5433), ("::1", 5434))
    assert target.connect_args["host"] == ["db1", "db2", "::1"]
    assert target.connect_args["port"] == [5432, 5433, 5434]
    assert target.connect_args["target_session_attrs"] == "read-write"
    assert target.connect_args["server_settings"] == {"application_name": "agent"}
    assert (target.url.host, target.url.port, target.url.database) == ("db1", 5432, "app")
    assert "target_session_attrs" not in target.url.query
    assert target.render() == (
        "postgresql://u:***@db1:5432,db2:5433,[::1]:5434/app"
        "?target_session_attrs=read-write&application_name=agent"
    )


def test_hosts_without_ports_take_the_default_port() -> None:
    assert parse_url("postgresql://u@a,b/db").hosts == (("a", 5432), ("b", 5432))
    # libpq's port list beside the hosts
    assert parse_url("postgresql://u@a,b/db?port=1,2").hosts == (("a", 1), ("b", 2))
    assert parse_url("postgresql://u@a,b/db?port=7").hosts == (("a", 7), ("b", 7))


def test_sqlalchemy_repeated_host_forms_are_the_same_list() -> None:
    repeated = parse_url("postgresql://u@/db?host=a:1&host=b:2")
    listed = parse_url("postgresql://u@/db?host=a,b&port=1,2")
    assert repeated.hosts == listed.hosts == (("a", 1), ("b", 2))
    assert repeated.connect_args == listed.connect_args
    # one host in the query (a socket directory, say) is left to SQLAlchemy as it was
    socket = parse_url("postgresql://u@/db?host=/run/postgresql")
    assert socket.hosts == () and socket.url.query["host"] == "/run/postgresql"


def test_pgbouncer_and_schema_keep_working_with_several_hosts() -> None:
    target = parse_url("postgresql://u@a:1,b:2/db?pgbouncer=true&schema=agent")
    assert target.pooler and target.schema == "agent"
    assert target.connect_args["statement_cache_size"] == 0
    assert target.connect_args["host"] == ["a", "b"]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://u@a:1,b:x/db", "port of host 'b'"),
        ("postgresql://u@a,,b/db", "host of the database URL is empty"),
        ("postgresql://u@a,b/db?target_session_attrs=writable", "target_session_attrs"),
        ("postgresql://u@a,b/db?load_balance_hosts=yes", "load_balance_hosts"),
        ("postgresql://u@/db?host=a,b&port=1,2,3", "do not match"),
        ("postgresql://u@a,b/db?host=c", "names hosts twice"),
    ],
)
def test_malformed_multi_host_urls_are_refused_clearly(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_url(url)


def test_the_replica_parameter_names_a_replica_on_the_same_database() -> None:
    target = parse_url("postgresql://u:pw@a:1,b:2/db?replica=r:7&target_session_attrs=read-write")
    replica = replica_url(target)
    assert replica is not None
    assert (replica.url.host, replica.url.port, replica.url.database) == ("r", 7, "db")
    assert replica.url.password == "pw"
    assert "host" not in replica.connect_args  # one replica host
    assert "target_session_attrs" not in replica.connect_args
    assert "replica" not in target.url.query
    assert replica_url(parse_url("postgresql://u@a/db")) is None
    with pytest.raises(ValueError, match="not both"):
        replica_target(target, "postgresql://u@r2/db")
    with pytest.raises(ValueError, match="PostgreSQL"):
        replica_target(parse_url("postgresql://u@a/db"), "sqlite:///x.db")


def test_load_balancing_shuffles_hosts_and_ports_together() -> None:
    choice = HostChoice(parse_url("postgresql://u@a:1,b:2,c:3/db?load_balance_hosts=random"))
    orders = set()
    for _ in range(200):
        params = {"host": ["a", "b", "c"], "port": [1, 2, 3]}
        choice.apply(params)
        assert sorted(zip(params["host"], params["port"], strict=True)) == [
            ("a", 1),
            ("b", 2),
            ("c", 3),
        ]
        orders.add(tuple(params["host"]))
    assert len(orders) > 1
    fixed = HostChoice(parse_url("postgresql://u@a:1,b:2/db"))
    params = {"host": ["a", "b"], "port": [1, 2]}
    fixed.apply(params)
    # several hosts: each is tried within its own connect timeout (store/connecting.py)
    assert params.pop("async_creator_fn").func is connect_each_host
    assert params == {"host": ["a", "b"], "port": [1, 2]}


def test_a_multi_host_url_bounds_connect_and_command_times() -> None:
    """An unresponsive host (a frozen primary) is given up: 5 s to connect per host and 15 s
    per statement by default; the URL sets either, ``command_timeout=0`` for none."""
    several = parse_url("postgresql://u@a:1,b:2/db").connect_args
    assert (several["timeout"], several["command_timeout"]) == (5.0, 15.0)
    given = parse_url("postgresql://u@a:1,b:2/db?connect_timeout=2&command_timeout=0")
    assert (given.connect_args["timeout"], given.connect_args["command_timeout"]) == (2.0, None)
    with pytest.raises(ValueError, match="command_timeout"):
        parse_url("postgresql://u@a:1,b:2/db?command_timeout=soon")
    one = parse_url("postgresql://u@a:1/db").connect_args  # one host: as before
    assert "timeout" not in one and "command_timeout" not in one


def test_after_a_standby_refused_a_write_only_a_writable_host_is_taken() -> None:
    several = HostChoice(parse_url("postgresql://u@a,b/db?target_session_attrs=any"))
    several.writable_only = True
    params: dict[str, object] = {"target_session_attrs": "any"}
    several.apply(params)
    assert params["target_session_attrs"] == "read-write"
    kept = {"target_session_attrs": "primary"}
    several.apply(kept)
    assert kept["target_session_attrs"] == "primary"
    one = HostChoice(parse_url("postgresql://u@a/db"))
    one.writable_only = True  # one host: nowhere else to go
    assert not one.writable_only


# -- the standby condition -----------------------------------------------------------------------


def test_a_read_only_transaction_error_is_the_typed_standby_condition() -> None:
    import asyncpg

    exc = asyncpg.exceptions.ReadOnlySQLTransactionError(
        "cannot execute INSERT in a read-only transaction"
    )
    assert postgres.classify_error(exc) == "standby"
    assert postgres.connection_lost(exc)  # dropped, never reused
    error = translated(exc, what="appending to session 's'")
    assert isinstance(error, StandbyServerError) and isinstance(error, StoreUnavailableError)
    assert "does not take writes" in str(error)
    none_match = asyncpg.exceptions.TargetServerAttributeNotMatched("no host matches")
    assert postgres.classify_error(none_match) == "standby"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("TooManyConnectionsError", "sorry, too many clients already"),
        ("TooManyConnectionsError", "remaining connection slots are reserved for superuser"),
        ("CannotConnectNowError", "the database system is starting up"),
    ],
)
def test_a_server_taking_no_connection_for_now_is_tried_again(name: str, message: str) -> None:
    """53300 (too many connections: every pool reconnects at once after a failover) and 57P03
    (starting up, shutting down) are "not now", as a lost connection is: tried again within the
    reconnect timeout, and typed unavailable once it has passed; never a fatal error."""
    import asyncpg

    exc = getattr(asyncpg.exceptions, name)(message)
    assert postgres.classify_error(exc) == "lost"
    assert postgres.connection_lost(exc)
    error = translated(exc, what="appending to session 's'")
    assert isinstance(error, StoreUnavailableError) and not isinstance(error, StandbyServerError)
    assert message in str(error)


async def test_until_reachable_retries_transient_errors_within_the_bound() -> None:
    calls: list[int] = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("down")
        return "up"

    assert await until_reachable(5.0, flaky, lambda e: isinstance(e, ConnectionError)) == "up"
    assert len(calls) == 3

    async def down() -> str:
        calls.append(1)
        raise ConnectionError("down")

    calls.clear()
    with pytest.raises(ConnectionError):
        await until_reachable(0.0, down, lambda e: isinstance(e, ConnectionError))
    assert len(calls) == 1  # no time: tried once

    async def broken() -> str:
        calls.append(1)
        raise ValueError("not transient")

    calls.clear()
    with pytest.raises(ValueError):
        await until_reachable(5.0, broken, lambda e: isinstance(e, ConnectionError))
    assert len(calls) == 1


def test_several_hosts_wait_for_a_failover_by_default() -> None:
    assert SessionStore("postgresql://u@a,b/db")._core.postgres.reconnect_timeout > 0
    assert SessionStore("postgresql://u@a/db")._core.postgres.reconnect_timeout == 0
    assert (
        SessionStore("postgresql://u@a,b/db", reconnect_timeout=3)._core.postgres.reconnect_timeout
        == 3
    )
    with pytest.raises(ValueError, match="reconnect_timeout"):
        SessionStore("postgresql://u@a/db", reconnect_timeout=-1)


# -- on the machine's server ---------------------------------------------------------------------


def _hosts_url(pg_url: str, *ports: int, query: str = "") -> str:
    url = make_url(pg_url)
    hosts = ",".join(f"127.0.0.1:{p}" for p in ports)
    user = url.username or "postgres"
    return f"postgresql://{user}@{hosts}/{url.database}" + (f"?{query}" if query else "")


@pytest.fixture
async def pg_url(pg_database_url: str) -> str:
    from conftest import _empty_pg

    await _empty_pg(pg_database_url)
    return pg_database_url


async def test_a_dead_first_host_is_passed_over(pg_url: str) -> None:
    port = make_url(pg_url).port or 5432
    dead = pg_cluster.free_port()  # nothing listens there
    url = _hosts_url(pg_url, dead, port, query="target_session_attrs=read-write")
    async with SessionStore(url) as store:
        await store.create(header("s"))
        await store.append("s", [event(0), event(1)])
        assert [e.seq for e in await store.read_from("s")] == [0, 1]
    async with SessionStore(pg_url) as direct:
        assert await direct.count("s") == 2


async def test_multi_host_with_pgbouncer_flag_schema_and_load_balancing(pg_url: str) -> None:
    port = make_url(pg_url).port or 5432
    url = _hosts_url(pg_url, port, port, query="pgbouncer=true&load_balance_hosts=random")
    async with SessionStore(url, schema="ha") as store:
        assert store.namespace.schema == "ha"
        await store.create(header("s"))
        for seq in range(5):
            await store.append("s", [event(seq)])
        assert await store.count("s") == 5
        async with SessionStore(f"{pg_url}?schema=ha") as direct:
            assert await direct.count("s") == 5


async def test_reads_racing_appends_of_the_same_store_are_no_lost_tail(pg_url: str) -> None:
    """A read whose snapshot began before an append was acknowledged shows the older end:
    that is not the database losing the append (the check compares with what was acknowledged
    when the read began)."""
    import asyncio

    async with SessionStore(pg_url, pool_size=6) as store:
        await store.create(header("s"))
        await store.append("s", [event(0)])
        done = asyncio.Event()

        async def write() -> None:
            for seq in range(1, 40):
                await store.append("s", [event(seq)])
            done.set()

        async def read() -> int:
            reads = 0
            while not done.is_set():
                await store.read_from("s")
                await store.header("s")
                await store.summary("s")
                reads += 1
            return reads

        results = await asyncio.gather(write(), *(read() for _ in range(4)))
        assert all(n > 0 for n in results[1:])
        assert await store.count("s") == 40


@pytest.fixture
async def full(pg_url: str) -> AsyncIterator[TcpProxy]:
    """A proxy to the server that answers as a full server when told (`TcpProxy.refuse`)."""
    proxy = TcpProxy(pg_url)
    await proxy.start()
    yield proxy
    await proxy.stop()


async def test_a_full_host_is_passed_over_for_the_next(pg_url: str, full: TcpProxy) -> None:
    """A host that takes no new connection (SQLSTATE 53300) is passed over like a dead one: the
    next host of the URL is tried, within its connect timeout."""
    import asyncpg

    port = make_url(pg_url).port or 5432
    full.refuse(100)
    url = make_url(asyncpg_dsn(pg_url))
    conn = await connect_each_host(
        user=url.username or "postgres",
        database=url.database,
        host=["127.0.0.1", "127.0.0.1"],
        port=[full.port, port],
        timeout=5.0,
        target_session_attrs="read-write",
    )
    try:
        assert await conn.fetchval("SELECT 1") == 1
    finally:
        await conn.close()
    assert full.refused == 1
    with pytest.raises(asyncpg.TooManyConnectionsError):  # every host full: its error
        await connect_each_host(
            user=url.username or "postgres",
            database=url.database,
            host=["127.0.0.1", "127.0.0.1"],
            port=[full.port, full.port],
            timeout=5.0,
        )
    store_url = _hosts_url(pg_url, full.port, port, query="target_session_attrs=read-write")
    async with SessionStore(store_url) as store:
        await store.create(header("s"))
        await store.append("s", [event(0)])
        assert await store.count("s") == 1


async def test_a_server_full_for_a_while_is_waited_for(full: TcpProxy, pg_url: str) -> None:
    """Connections cut, then the server full for the next reconnections (as after a failover,
    when every pool reconnects at once): the calls wait within the reconnect timeout and go on,
    nothing written twice; past the timeout, a typed StoreUnavailableError."""
    async with SessionStore(full.url(), reconnect_timeout=30.0) as store:
        await store.create(header("s"))
        await store.append("s", [event(0)])
        full.refuse(3)
        full.reset()
        await store.append("s", [event(1)])  # the write waits for a connection
        assert full.refused == 3
        full.refuse(3)
        full.reset()
        assert [e.seq for e in await store.read_from("s")] == [0, 1]  # so does a read
        assert full.refused == 6
    async with SessionStore(full.url(), reconnect_timeout=0.5) as store:
        full.refuse(10_000)
        full.reset()
        with pytest.raises(StoreUnavailableError, match="too many clients"):
            await store.append("s", [event(2)])
        full.refuse(0)
    async with SessionStore(pg_url) as direct:
        assert [e.seq for e in await direct.read_from("s")] == [0, 1]


def test_hosts_that_timed_out_lately_are_tried_last() -> None:
    memory = Unresponsive()
    params: dict[str, Any] = {"host": ["a", "b", "c"], "port": [1, 2, 3]}
    memory.arrange(params)
    assert params == {"host": ["a", "b", "c"], "port": [1, 2, 3]}  # nothing marked: as given
    memory.mark(("a", 1))
    memory.arrange(params)
    assert params == {"host": ["b", "c", "a"], "port": [2, 3, 1]}
    one_port = {"host": ["a", "b"], "port": 1}  # one port for every host
    memory.arrange(one_port)
    assert one_port == {"host": ["b", "a"], "port": [1, 1]}


@pytest.fixture
async def proxy(pg_url: str) -> AsyncIterator[TcpProxy]:
    proxy = TcpProxy(pg_url)
    await proxy.start()
    yield proxy
    proxy.thaw()
    await proxy.stop()


async def test_a_host_whose_statement_timed_out_is_tried_last(pg_url: str, proxy: TcpProxy) -> None:
    """A statement unanswered past ``command_timeout`` on the first host (frozen: the proxy
    passes no byte, TCP stays up): the call goes on through the next host, and no new
    connection tries the frozen one first (each would wait out its connect timeout there)."""
    port = make_url(pg_url).port or 5432
    # sslmode=disable: a cancel request (asyncpg's, after the timeout) then starts as itself on
    # the wire, not as an SSL request the proxy could not tell from a session's
    query = "target_session_attrs=read-write&command_timeout=1&connect_timeout=5&sslmode=disable"
    url = _hosts_url(pg_url, proxy.port, port, query=query)
    # no search index: its catch-up, in the background, would open a connection of its own
    async with SessionStore(url, reconnect_timeout=60.0, search_index=False) as store:
        await store.create(header("s"))
        await store.append("s", [event(0)])
        startups = proxy.startups
        assert startups >= 1  # the store's connections go through the first host
        proxy.freeze()
        await store.append("s", [event(1)])  # its statement times out on the frozen host
        for seq in range(2, 5):
            await store.append("s", [event(seq)])
        assert [e.seq for e in await store.read_from("s")] == [0, 1, 2, 3, 4]
        assert proxy.startups == startups  # (asyncpg's cancel requests aside)
    async with SessionStore(pg_url) as direct:
        assert await direct.count("s") == 5
