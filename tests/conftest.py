"""Shared fixtures: one store contract suite, run against every backend.

Backends: ``sqlite-file`` (a fresh file per test), ``sqlite-memory`` and ``postgres``. The
PostgreSQL backend needs ``TODO_SESSIONS_PG_URL`` (a server URL; skipped when unset); each test
run creates its own database there and drops it at the end, so runs never see each other.

The store contract modules (`NAMESPACED_MODULES`) also run on two namespaced backends, each in
a database where a host application's own ``sessions`` table (other columns, one row) is
already there: ``sqlite-prefix`` (``?table_prefix=agent_``) and ``postgres-schema``
(``?schema=agent``). The namespace travels in the URL (a documented store URL parameter), so
tests that open ``SessionStore(db_url)`` themselves get it too; after each test the host's
table and row must be exactly as they were.

The suite runs in parallel worker processes (README's ``pytest -n 4``, ``--dist loadgroup``
from pyproject), so every test must:

- keep its files in ``tmp_path`` (never the checkout, the home or a fixed /tmp name);
- use these fixtures' databases (per test, or per worker process: ``pg_database_url`` carries
  the worker's pid) or make its own with `scratch_database`; never a fixed database name;
- listen on port 0 and use the port it got (a child process announces its port; a port picked
  here and handed on can be taken by another worker in between);
- depend on no other test's state or order, and count only its own things (its processes,
  its threads, its database's backends: never the server's or the machine's);
- bound memory with tracemalloc or a child's own peak RSS (another worker's load does not
  change those); assert no timings; an interval it relies on (a lease ttl, a poll) leaves room
  for a busy machine;
- run in a few seconds, or be marked ``slow`` (those start first, see below); a test that
  fills both cores for long (several processes, a process pool) also takes
  ``@pytest.mark.xdist_group("cpu-heavy")`` so no two of them run at once;
- kill what it starts, also on a timeout (children that fork: ``start_new_session=True`` and
  ``os.killpg``);
- open few connections at once (a store's default pool, or ``pool_size=2`` in child
  processes): the server's 100 connections serve all the workers, PgBouncer's pool of 20 is
  per database, so per worker;
- start any extra PostgreSQL cluster in ``tmp_path`` on a port it got (pick one, and pick again
  when the server says the address is in use), and stop it at the end, also on a failure.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sqlite3
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from factories import raw_sql
from sqlalchemy.engine import make_url

from todo_sessions import SessionStore

PG_ENV = "TODO_SESSIONS_PG_URL"
PGBOUNCER_ENV = "TODO_SESSIONS_PGBOUNCER_URL"
"""A PgBouncer (transaction pooling) in front of the same server; ``.ci/run`` starts one."""


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _pg_admin(url: str, statement: str, *, fetch: bool = False) -> list[tuple[Any, ...]]:
    """Run one statement on the server (in a thread, so it works inside a running loop too);
    with ``fetch``, its rows."""
    import asyncpg

    async def run() -> list[tuple[Any, ...]]:
        conn = await asyncpg.connect(_asyncpg_dsn(url))
        try:
            if fetch:
                return [tuple(r) for r in await conn.fetch(statement)]
            await conn.execute(statement)
            return []
        finally:
            await conn.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a pytest-xdist worker, the tests marked ``slow`` go first (in their order, the rest
    after them in theirs), so that the minute-long ones start while every worker still has
    quick tests to take and none is left running alone at the end. Every worker collects the
    same order; a run without xdist keeps the file order."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _private_recovery_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovery files of services under test go to a temporary directory, never the user's."""
    monkeypatch.setenv("TODO_SESSIONS_RECOVERY_DIR", str(tmp_path_factory.mktemp("recovery")))


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set")
    return url


@contextmanager
def scratch_database(server_url: str, prefix: str) -> Iterator[str]:
    """A new, empty database on the server, dropped afterwards."""
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    _pg_admin(server_url, f'CREATE DATABASE "{name}"')
    try:
        yield (
            make_url(server_url)
            .set(drivername="postgresql+asyncpg", database=name)
            .render_as_string(hide_password=False)
        )
    finally:
        _pg_admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_database_url(pg_server_url: str) -> Iterator[str]:
    """A database of this test run's own, shared by its tests (emptied before each)."""
    with scratch_database(pg_server_url, "todo_sessions_test") as url:
        yield url


@pytest.fixture
def fresh_pg_url(pg_server_url: str) -> Iterator[str]:
    """An empty PostgreSQL database of this test's own (for migration tests)."""
    with scratch_database(pg_server_url, "todo_sessions_mig") as url:
        yield url


async def _empty_pg(url: str) -> None:
    async with SessionStore(url) as store:
        tables = store.namespace.tables

        def empty(conn: Any) -> None:  # in the order the store's own delete takes
            conn.execute(tables.sessions.update().values(next_seq=0))
            conn.execute(tables.session_events.delete())
            conn.execute(tables.sessions.delete())
            conn.execute(tables.session_leases.delete())

        await raw_sql(url, empty)


def through_pgbouncer(pg_url: str) -> str:
    """``pg_url``'s database reached through the PgBouncer of ``TODO_SESSIONS_PGBOUNCER_URL``."""
    bouncer = os.environ.get(PGBOUNCER_ENV)
    if not bouncer:
        pytest.skip(f"{PGBOUNCER_ENV} is not set")
    at = make_url(bouncer)
    return (
        make_url(pg_url)
        .set(host=at.host, port=at.port, query={"pgbouncer": "true"})
        .render_as_string(hide_password=False)
    )


# -- namespaced backends, next to a host's own ``sessions`` table --------------------------------

HOST_TABLE = "CREATE TABLE sessions (host_key VARCHAR(20) PRIMARY KEY, owner_name TEXT NOT NULL)"
HOST_ROW = ("host-1", "a row of the host application")
HOST_COLUMNS = ["host_key", "owner_name"]

NAMESPACED_MODULES = frozenset(
    {
        "test_store",
        "test_session_meta",
        "test_leases",
        "test_verify",
        "test_views",
        "test_jsonl",
        "test_long_sessions",
        "test_recorder_contract",
        "test_chain",
    }
)
"""The store contract modules that also run on ``sqlite-prefix`` and ``postgres-schema``."""

DB_BACKENDS = ["sqlite-file", "sqlite-memory", "postgres", "pgbouncer"]
SHARED_BACKENDS = ["sqlite-file", "postgres", "pgbouncer"]
NAMESPACED_BACKENDS = ["sqlite-prefix", "postgres-schema"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``db_url`` / ``shared_db_url`` for every backend; the namespaced ones for the store
    contract modules only (they would add minutes to the rest for no new coverage)."""
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    extra = NAMESPACED_BACKENDS if module in NAMESPACED_MODULES else []
    for name, backends in (("db_url", DB_BACKENDS), ("shared_db_url", SHARED_BACKENDS)):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, backends + extra, indirect=True)


def _host_sqlite(path: str) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute(HOST_TABLE)
        conn.execute("INSERT INTO sessions VALUES (?, ?)", HOST_ROW)
        conn.commit()
    finally:
        conn.close()


def _host_sqlite_state(path: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(sessions)")]
        return columns, [tuple(r) for r in conn.execute("SELECT * FROM sessions")]
    finally:
        conn.close()


def _host_pg_state(url: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    columns = _pg_admin(
        url,
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' "
        "AND table_name = 'sessions' ORDER BY ordinal_position",
        fetch=True,
    )
    return [c[0] for c in columns], _pg_admin(url, "SELECT * FROM public.sessions", fetch=True)


@pytest.fixture(scope="session")
def pg_host_database_url(pg_server_url: str) -> Iterator[str]:
    """A database of this run's own whose ``public.sessions`` is a host application's table
    (with a row); the namespaced PostgreSQL backend keeps its tables in schema ``agent``."""
    with scratch_database(pg_server_url, "todo_sessions_host") as url:
        _pg_admin(url, HOST_TABLE)
        _pg_admin(url, f"INSERT INTO sessions VALUES ('{HOST_ROW[0]}', '{HOST_ROW[1]}')")
        yield url


def _url_for(backend: str, request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> str:
    if backend == "sqlite-file":
        return f"sqlite:///{tmp_path}/sessions.db"
    if backend == "sqlite-memory":
        return "sqlite://"
    if backend == "sqlite-prefix":
        path = f"{tmp_path}/sessions.db"
        if not os.path.exists(path):
            _host_sqlite(path)
        return f"sqlite:///{path}?table_prefix=agent_"
    if backend == "postgres-schema":
        return f"{request.getfixturevalue('pg_host_database_url')}?schema=agent"
    if backend == "pgbouncer":
        return through_pgbouncer(request.getfixturevalue("pg_database_url"))
    return request.getfixturevalue("pg_database_url")


def _host_untouched(backend: str, url: str) -> None:
    """The host's own ``sessions`` table next to a namespaced store: same columns, same row."""
    if backend == "sqlite-prefix":
        state = _host_sqlite_state(url.removeprefix("sqlite:///").split("?")[0])
    elif backend == "postgres-schema":
        state = _host_pg_state(url.split("?")[0])
    else:
        return
    assert state == (HOST_COLUMNS, [HOST_ROW]), f"the host's sessions table changed: {state}"


async def _fresh(
    backend: str, request: pytest.FixtureRequest, tmp_path: os.PathLike[str]
) -> AsyncIterator[str]:
    url = _url_for(backend, request, tmp_path)
    if backend in ("postgres", "pgbouncer", "postgres-schema"):
        await _empty_pg(url)
    yield url
    _host_untouched(backend, url)


@pytest.fixture
async def db_url(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> AsyncIterator[str]:
    """A database URL for each backend (`pytest_generate_tests`), empty at the start of the
    test. ``pgbouncer`` is the PostgreSQL backend through PgBouncer in transaction pooling
    mode; ``sqlite-prefix`` and ``postgres-schema`` are namespaced, next to a host's table."""
    async for url in _fresh(request.param, request, tmp_path):
        yield url


@pytest.fixture
async def shared_db_url(
    request: pytest.FixtureRequest, tmp_path: os.PathLike[str]
) -> AsyncIterator[str]:
    """Like ``db_url`` but only backends several stores/processes can share."""
    async for url in _fresh(request.param, request, tmp_path):
        yield url


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SessionStore]:
    async with SessionStore(db_url) as opened:
        yield opened
