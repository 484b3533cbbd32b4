"""Shared fixtures: one store contract suite, run against every backend.

Backends: ``sqlite-file`` (a fresh file per test), ``sqlite-memory`` and ``postgres``. The
PostgreSQL backend needs ``TODO_SESSIONS_PG_URL`` (a server URL; skipped when unset); each test
run creates its own database there and drops it at the end, so runs never see each other.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from todo_sessions import SessionStore
from todo_sessions.store.schema import session_leases, sessions

PG_ENV = "TODO_SESSIONS_PG_URL"
PGBOUNCER_ENV = "TODO_SESSIONS_PGBOUNCER_URL"
"""A PgBouncer (transaction pooling) in front of the same server; ``.ci/run`` starts one."""


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _pg_admin(url: str, statement: str) -> None:
    """Run one statement on the server (in a thread, so it works inside a running loop too)."""
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(_asyncpg_dsn(url))
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result()


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

        def empty(conn: Any) -> None:
            conn.execute(sessions.delete())
            conn.execute(session_leases.delete())

        await store._run_sync(empty, write=True)


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


def _url_for(backend: str, request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> str:
    if backend == "sqlite-file":
        return f"sqlite:///{tmp_path}/sessions.db"
    if backend == "sqlite-memory":
        return "sqlite://"
    if backend == "pgbouncer":
        return through_pgbouncer(request.getfixturevalue("pg_database_url"))
    return request.getfixturevalue("pg_database_url")


async def _fresh(backend: str, request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> str:
    url = _url_for(backend, request, tmp_path)
    if backend in ("postgres", "pgbouncer"):
        await _empty_pg(url)
    return url


@pytest.fixture(params=["sqlite-file", "sqlite-memory", "postgres", "pgbouncer"])
async def db_url(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> str:
    """A database URL for each backend, empty at the start of the test. ``pgbouncer`` is the
    PostgreSQL backend through PgBouncer in transaction pooling mode."""
    return await _fresh(request.param, request, tmp_path)


@pytest.fixture(params=["sqlite-file", "postgres", "pgbouncer"])
async def shared_db_url(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> str:
    """Like ``db_url`` but only backends several stores/processes can share."""
    return await _fresh(request.param, request, tmp_path)


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SessionStore]:
    async with SessionStore(db_url) as opened:
        yield opened
