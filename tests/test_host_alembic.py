"""Embedding in a host application's alembic history (issue #14, part 1).

A throwaway host project (its own alembic.ini, env.py and one revision creating
``host_things``) runs ``alembic upgrade head`` as a subprocess, calling
``todo_sessions.alembic.migrate_on(connection)`` before its own migrations, after them, or
from inside one of its revisions. Both histories must end up applied, each in its own version
table, and
the host's autogenerate (``alembic check``) must see nothing to do for our tables.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Connection

import todo_sessions.alembic
from todo_sessions import SchemaError, SessionStore, migrate
from todo_sessions.alembic import migrate_on
from todo_sessions.store.migrate import head_revision, run_locked

ALEMBIC = Path(sys.executable).parent / "alembic"
OUR_TABLES = {
    "sessions",
    "session_events",
    "store_state",
    "session_leases",
    "session_checkpoints",
    "todo_sessions_alembic_version",
}

ENV_PY = """
import asyncio
import os

from alembic import context
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, pool
from sqlalchemy.ext.asyncio import create_async_engine

import todo_sessions.alembic

host_metadata = MetaData()
Table("host_things", host_metadata, Column("id", Integer, primary_key=True),
      Column("name", String(50)))

WHEN = os.environ.get("HOST_TS_WHEN", "none")
URL = os.environ["HOST_DB_URL"]
FILTER = os.environ.get("HOST_TS_FILTER", "object")
# Our namespace (a schema on PostgreSQL, a table prefix on SQLite), when the host embeds us
# next to its own `sessions` table.
NAMESPACE = {
    k: os.environ[f"HOST_TS_{k.upper()}"]
    for k in ("schema", "table_prefix")
    if os.environ.get(f"HOST_TS_{k.upper()}")
}
OURS = todo_sessions.Namespace(**NAMESPACE)
if NAMESPACE:  # the host's own `sessions` table (its revision 0002)
    Table("sessions", host_metadata, Column("host_key", String(20), primary_key=True))


def run(connection):
    if WHEN == "before":
        todo_sessions.alembic.migrate_on(connection, **NAMESPACE)
    options = {}
    if FILTER == "object":
        options["include_object"] = OURS.include_object
    elif FILTER == "name":
        options["include_name"] = OURS.include_name
    if OURS.schema is not None:  # so that autogenerate looks at our schema at all
        options["include_schemas"] = True
    context.configure(connection=connection, target_metadata=host_metadata, **options)
    with context.begin_transaction():
        context.run_migrations()
    if WHEN == "after":
        todo_sessions.alembic.migrate_on(connection, **NAMESPACE)


if URL.startswith("postgresql+asyncpg"):  # the async template: no sync driver needed

    async def main():
        engine = create_async_engine(URL, poolclass=pool.NullPool)
        async with engine.connect() as connection:
            await connection.run_sync(run)
        await engine.dispose()

    asyncio.run(main())
else:
    engine = create_engine(URL, poolclass=pool.NullPool)
    with engine.connect() as connection:
        run(connection)
"""

# The host's first revision is deliberately called "0001", as ours is: the two histories
# never meet (separate script directories and version tables), so the ids cannot collide.
HOST_REVISION = '''
"""host things

Revision ID: 0001
"""
import os

import sqlalchemy as sa
from alembic import op

import todo_sessions.alembic

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "host_things",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(50)),
    )
    if os.environ.get("HOST_TS_WHEN") == "inside":
        todo_sessions.alembic.migrate_on(op.get_bind())
    op.execute("INSERT INTO host_things (id, name) VALUES (1, 'still the host op')")


def downgrade():
    op.drop_table("host_things")
'''


def make_host_project(root: Path) -> Path:
    (root / "host_migrations" / "versions").mkdir(parents=True)
    (root / "alembic.ini").write_text(
        "[alembic]\nscript_location = %(here)s/host_migrations\npath_separator = os\n"
    )
    (root / "host_migrations" / "env.py").write_text(textwrap.dedent(ENV_PY))
    (root / "host_migrations" / "script.py.mako").write_text(
        '"""${message}"""\nrevision = ${repr(up_revision)}\ndown_revision = '
        "${repr(down_revision)}\n\ndef upgrade():\n    ${upgrades if upgrades else 'pass'}\n"
        "\ndef downgrade():\n    ${downgrades if downgrades else 'pass'}\n"
    )
    (root / "host_migrations" / "versions" / "0001_host_things.py").write_text(
        textwrap.dedent(HOST_REVISION)
    )
    return root


def host_alembic(
    root: Path,
    url: str,
    *args: str,
    when: str = "none",
    filter: str = "object",
    namespace: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOST_DB_URL": url, "HOST_TS_WHEN": when, "HOST_TS_FILTER": filter}
    for key, value in (namespace or {}).items():
        env[f"HOST_TS_{key.upper()}"] = value
    env.pop("TODO_SESSIONS_URL", None)
    return subprocess.run(
        [str(ALEMBIC), "-c", str(root / "alembic.ini"), *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(params=["sqlite", "postgres"])
def host_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/host.db"
    else:
        from conftest import scratch_database

        with scratch_database(request.getfixturevalue("pg_server_url"), "todo_sessions_host") as u:
            yield u


def state(url: str) -> tuple[set[str], str | None, str | None, list[str]]:
    """Tables, the host's version, our version, host_things' names."""

    def read(conn: Connection) -> tuple[set[str], str | None, str | None, list[str]]:
        names = set(inspect(conn).get_table_names())

        def version(table: str) -> str | None:
            if table not in names:
                return None
            return conn.execute(text(f"SELECT version_num FROM {table}")).scalar_one_or_none()

        things = (
            [str(r[0]) for r in conn.execute(text("SELECT name FROM host_things"))]
            if "host_things" in names
            else []
        )
        return names, version("alembic_version"), version("todo_sessions_alembic_version"), things

    return asyncio.run(run_locked(url, read))


@pytest.mark.parametrize("when", ["before", "after", "inside"])
def test_host_upgrade_runs_both_histories(host_url: str, tmp_path: Path, when: str) -> None:
    root = make_host_project(tmp_path / "host")
    done = host_alembic(root, host_url, "upgrade", "head", when=when)
    assert done.returncode == 0, done.stderr
    tables, host_version, our_version, things = state(host_url)
    assert tables >= OUR_TABLES | {"host_things", "alembic_version"}
    assert (host_version, our_version) == ("0001", head_revision())
    assert things == ["still the host op"]

    # Again: both histories are at head; nothing to do, still exit 0.
    again = host_alembic(root, host_url, "upgrade", "head", when=when)
    assert again.returncode == 0, again.stderr
    assert state(host_url)[1:3] == ("0001", head_revision())

    async def store_opens_without_migrating() -> None:
        async with SessionStore(host_url, migrate=False) as store:
            assert await store.list() == []

    asyncio.run(store_opens_without_migrating())


@pytest.mark.parametrize("hook", ["object", "name"])
def test_host_autogenerate_ignores_our_tables(host_url: str, tmp_path: Path, hook: str) -> None:
    root = make_host_project(tmp_path / "host")
    assert host_alembic(root, host_url, "upgrade", "head", when="before").returncode == 0

    check = host_alembic(root, host_url, "check", filter=hook)
    assert check.returncode == 0, check.stderr
    assert "No new upgrade operations detected" in check.stdout + check.stderr

    # Without the hook the host's autogenerate would want to drop our tables.
    unfiltered = host_alembic(root, host_url, "check", filter="none")
    assert unfiltered.returncode != 0
    assert "session_events" in unfiltered.stdout + unfiltered.stderr

    revision = host_alembic(
        root, host_url, "revision", "--autogenerate", "-m", "nothing", filter=hook
    )
    assert revision.returncode == 0, revision.stderr
    [generated] = [p for p in (root / "host_migrations" / "versions").glob("*nothing*.py")]
    body = generated.read_text()
    assert "def upgrade():" in body
    assert "op." not in body  # no operation at all, neither up nor down
    assert "auto generated" in body  # (the autogenerate ran)


# -- migrate_on / migrate on what a host hands over, in process -----------------------------


def test_migrate_on_a_sync_engine_and_connection_leaves_alembic_as_found(tmp_path: Path) -> None:
    from alembic import context as alembic_context
    from alembic import op as alembic_op

    before = (dict(vars(alembic_context)), dict(vars(alembic_op)))
    engine = create_engine(f"sqlite:///{tmp_path}/e.db")
    try:
        migrate_on(engine)
        with engine.connect() as conn:
            migrate_on(conn)  # already at head: nothing to do
            assert not conn.in_transaction()  # its own transaction, ended
            assert set(inspect(conn).get_table_names()) >= OUR_TABLES
        assert (dict(vars(alembic_context)), dict(vars(alembic_op))) == before
    finally:
        engine.dispose()


def test_migrate_on_inside_the_hosts_transaction_leaves_the_commit_to_the_host(
    tmp_path: Path,
) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/t.db")
    try:
        with engine.connect() as conn:
            conn.begin()
            conn.execute(text("CREATE TABLE host_things (id INTEGER PRIMARY KEY)"))
            migrate_on(conn)
            assert conn.in_transaction()  # still the host's transaction
            conn.commit()
        with engine.connect() as conn:
            assert set(inspect(conn).get_table_names()) >= OUR_TABLES | {"host_things"}
    finally:
        engine.dispose()


async def test_migrate_takes_an_async_connection_and_engine(host_url: str) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    if host_url.startswith("sqlite"):
        pytest.importorskip("aiosqlite")
        host_url = host_url.replace("sqlite://", "sqlite+aiosqlite://")
    engine = create_async_engine(host_url)
    try:
        async with engine.connect() as conn:
            await migrate(conn)
            await conn.commit()
        await migrate(engine)  # at head: nothing to do

        async with engine.connect() as conn:
            names = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
        assert names >= OUR_TABLES
    finally:
        await engine.dispose()


def test_the_wrong_kind_of_connection_is_a_type_error(tmp_path: Path) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    with pytest.raises(TypeError, match=r"await todo_sessions\.migrate"):
        migrate_on(create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/x.db"))  # type: ignore[arg-type]
    engine = create_engine(f"sqlite:///{tmp_path}/y.db")
    with pytest.raises(TypeError, match="migrate_on"):
        asyncio.run(migrate(engine))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Connection or Engine"):
        migrate_on("sqlite:///nope.db")  # type: ignore[arg-type]
    engine.dispose()


def test_migrate_on_refuses_a_foreign_schema(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/f.db")
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE sessions (x INTEGER PRIMARY KEY)"))
        with pytest.raises(SchemaError, match="did not create"):
            migrate_on(engine)
    finally:
        engine.dispose()


def test_include_hooks_judge_tables_by_name_and_schema() -> None:
    from sqlalchemy import Column, Index, Integer, MetaData, Table

    include = todo_sessions.alembic.alembic_include_object
    name_hook = todo_sessions.alembic.alembic_include_name
    ours = todo_sessions.alembic.metadata.tables["session_events"]
    mine = Table("host_things", MetaData(), Column("id", Integer), Index("ix_h", "id"))
    elsewhere = Table("sessions", MetaData(), Column("id", Integer), schema="host")
    assert not include(ours, "session_events", "table", True, None)
    assert not include(next(iter(ours.indexes)), "ix", "index", True, None)
    assert not include(ours.c.seq, "seq", "column", True, None)
    assert include(mine, "host_things", "table", False, None)
    assert include(next(iter(mine.indexes)), "ix_h", "index", False, None)
    assert include(elsewhere, "sessions", "table", False, None)
    assert not name_hook("todo_sessions_alembic_version", "table", {"schema_name": None})
    assert not name_hook("ix_x", "index", {"table_name": "sessions", "schema_name": None})
    assert name_hook("host_things", "table", {"schema_name": None})
    assert name_hook("sessions", "table", {"schema_name": "host"})
    assert name_hook("host", "schema", {})


def test_a_running_host_environment_survives_a_nested_migrate_on(tmp_path: Path) -> None:
    """In process: the host's EnvironmentContext and Operations stay installed, the same
    objects, while and after we migrate on its connection."""
    from alembic import context as alembic_context
    from alembic import op as alembic_op
    from alembic.config import Config
    from alembic.operations import Operations
    from alembic.runtime.environment import EnvironmentContext
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    root = make_host_project(tmp_path / "host")
    config = Config(str(root / "alembic.ini"))
    script = ScriptDirectory.from_config(config)
    engine = create_engine(f"sqlite:///{tmp_path}/nested.db")
    try:
        with engine.connect() as conn, EnvironmentContext(config, script) as host_env:
            host_env.configure(connection=conn)
            host_ops = Operations(MigrationContext.configure(conn))
            with Operations.context(host_ops.migration_context) as installed:
                migrate_on(conn)
                assert alembic_context.config is config
                assert alembic_context.script is script
                assert alembic_context._proxy is host_env  # type: ignore[attr-defined]
                assert alembic_op._proxy is installed  # type: ignore[attr-defined]
                alembic_op.create_table("host_things", sa_column("id"))
            conn.commit()
        assert alembic_context._proxy is None  # type: ignore[attr-defined]
        with engine.connect() as conn:
            assert set(inspect(conn).get_table_names()) >= OUR_TABLES | {"host_things"}
    finally:
        engine.dispose()


def sa_column(name: str) -> Any:
    from sqlalchemy import Column, Integer

    return Column(name, Integer, primary_key=True)


# -- a namespaced embedding, next to the host's own ``sessions`` table ------------------------

HOST_SESSIONS = '''
"""host sessions

Revision ID: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table("sessions", sa.Column("host_key", sa.String(20), primary_key=True))
    op.execute("INSERT INTO sessions (host_key) VALUES ('the host row')")


def downgrade():
    op.drop_table("sessions")
'''


def namespace_for(url: str) -> dict[str, str]:
    return {"table_prefix": "agent_"} if url.startswith("sqlite") else {"schema": "agent"}


@pytest.mark.parametrize("hook", ["object", "name"])
def test_a_namespaced_embedding_next_to_the_hosts_sessions_table(
    host_url: str, tmp_path: Path, hook: str
) -> None:
    """The host has a ``sessions`` table of its own and an alembic history with ours in a
    namespace: both upgrade, the host's autogenerate sees nothing to do for our tables (with
    the namespace's hooks; without them it would drop them), and a store opens there."""
    root = make_host_project(tmp_path / "host")
    (root / "host_migrations" / "versions" / "0002_host_sessions.py").write_text(
        textwrap.dedent(HOST_SESSIONS)
    )
    namespace = namespace_for(host_url)
    ours = todo_sessions.Namespace(**namespace)
    done = host_alembic(root, host_url, "upgrade", "head", when="after", namespace=namespace)
    assert done.returncode == 0, done.stderr

    check = host_alembic(root, host_url, "check", filter=hook, namespace=namespace)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "No new upgrade operations detected" in check.stdout + check.stderr
    unfiltered = host_alembic(root, host_url, "check", filter="none", namespace=namespace)
    assert unfiltered.returncode != 0
    assert ours.name("session_events") in unfiltered.stdout + unfiltered.stderr

    def read(conn: Connection) -> tuple[list[str], set[str]]:
        rows = [str(r[0]) for r in conn.execute(text("SELECT host_key FROM sessions"))]
        return rows, set(inspect(conn).get_table_names(schema=ours.schema))

    rows, tables = asyncio.run(run_locked(host_url, read))
    assert rows == ["the host row"]
    assert tables >= ours.table_names | {ours.version_table}

    async def store_opens_without_migrating() -> None:
        async with SessionStore(host_url, migrate=False, **namespace) as store:
            assert await store.list() == []

    asyncio.run(store_opens_without_migrating())
