"""initial schema: sessions, session_events (append-only), store_state

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Every name comes from the namespace being migrated (``migration_namespace()``: a PostgreSQL
schema or an SQLite table prefix; the default namespace has the names written here).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from todo_sessions.store.namespace import Namespace, migration_namespace

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = "session_events rows are append-only"


def sqlite_triggers(ns: Namespace) -> list[str]:
    events, sessions = ns.sql_name("session_events"), ns.sql_name("sessions")
    name = ns.name("session_events")
    return [
        f"""
        CREATE TRIGGER trg_{name}_no_update BEFORE UPDATE ON {events}
        BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: UPDATE is not allowed'); END
        """,
        # A row may leave only together with its session (the FK cascade runs after the
        # session row is gone, so the check below lets it through).
        f"""
        CREATE TRIGGER trg_{name}_no_delete BEFORE DELETE ON {events}
        WHEN EXISTS (SELECT 1 FROM {sessions} WHERE id = OLD.session_id)
        BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: delete the session instead'); END
        """,
    ]


def postgres_triggers(ns: Namespace) -> list[str]:
    """The functions live in the namespace's schema and name their tables with it, so no
    ``search_path`` ever redirects them."""
    events, sessions = ns.sql_name("session_events"), ns.sql_name("sessions")
    no_update = ns.qualify("todo_sessions_events_no_update")
    no_delete = ns.qualify("todo_sessions_events_no_delete")
    name = ns.name("session_events")
    return [
        f"""
        CREATE FUNCTION {no_update}() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION '{APPEND_ONLY}: % is not allowed', TG_OP
                USING ERRCODE = 'restrict_violation';
        END $$
        """,
        f"""
        CREATE FUNCTION {no_delete}() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            IF EXISTS (SELECT 1 FROM {sessions} WHERE id = OLD.session_id) THEN
                RAISE EXCEPTION '{APPEND_ONLY}: delete the session instead'
                    USING ERRCODE = 'restrict_violation';
            END IF;
            RETURN OLD;
        END $$
        """,
        f"""
        CREATE TRIGGER trg_{name}_no_update BEFORE UPDATE ON {events}
        FOR EACH ROW EXECUTE FUNCTION {no_update}()
        """,
        f"""
        CREATE TRIGGER trg_{name}_no_truncate BEFORE TRUNCATE ON {events}
        FOR EACH STATEMENT EXECUTE FUNCTION {no_update}()
        """,
        f"""
        CREATE TRIGGER trg_{name}_no_delete BEFORE DELETE ON {events}
        FOR EACH ROW EXECUTE FUNCTION {no_delete}()
        """,
    ]


def upgrade() -> None:
    ns = migration_namespace()
    n, schema = ns.name, ns.schema
    op.create_table(
        n("sessions"),
        sa.Column("id", sa.String(200), nullable=False),
        sa.Column("format_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("cwd", sa.Text(), nullable=True),
        sa.Column("parent_session", sa.String(200), nullable=True),
        sa.Column("seed_length", sa.BigInteger(), nullable=True),
        sa.Column("origin", sa.Text(), nullable=True),
        sa.Column("delegation_depth", sa.Integer(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("incarnation", sa.String(36), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("next_seq", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=f"pk_{n('sessions')}"),
        sa.CheckConstraint("next_seq >= 0", name=f"ck_{n('sessions')}_next_seq_non_negative"),
        sa.CheckConstraint("revision >= 0", name=f"ck_{n('sessions')}_revision_non_negative"),
        schema=schema,
    )
    op.create_index(
        f"ix_{n('sessions')}_updated_at_id", n("sessions"), ["updated_at", "id"], schema=schema
    )
    op.create_table(
        n("session_events"),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.String(200), nullable=False),
        sa.Column("time", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("surface_op", sa.Text(), nullable=True),
        sa.Column("source_event_seqs", sa.Text(), nullable=True),
        sa.Column(
            "ignorable",
            sa.Boolean(create_constraint=False),
            nullable=False,
            server_default=sa.false(),
        ),
        sa.PrimaryKeyConstraint("session_id", "seq", name=f"pk_{n('session_events')}"),
        sa.ForeignKeyConstraint(
            ["session_id"],
            [f"{ns.ref('sessions')}.id"],
            name=f"fk_{n('session_events')}_session_id_{n('sessions')}",
            ondelete="CASCADE",
        ),
        sa.CheckConstraint("seq >= 0", name=f"ck_{n('session_events')}_seq_non_negative"),
        schema=schema,
    )
    op.create_index(
        f"ix_{n('session_events')}_session_id_type_seq",
        n("session_events"),
        ["session_id", "type", "seq"],
        schema=schema,
    )
    op.create_index(
        f"ix_{n('session_events')}_surface",
        n("session_events"),
        ["session_id", "seq"],
        sqlite_where=sa.text("surface_op IS NOT NULL"),
        postgresql_where=sa.text("surface_op IS NOT NULL"),
        schema=schema,
    )
    store_state = op.create_table(
        n("store_state"),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("store_id", sa.String(36), nullable=False),
        sa.PrimaryKeyConstraint("id", name=f"pk_{n('store_state')}"),
        sa.CheckConstraint("id = 1", name=f"ck_{n('store_state')}_single_row"),
        schema=schema,
    )
    op.bulk_insert(store_state, [{"id": 1, "store_id": str(uuid.uuid4())}])
    dialect = op.get_bind().dialect.name
    for statement in postgres_triggers(ns) if dialect == "postgresql" else sqlite_triggers(ns):
        op.execute(statement)


def downgrade() -> None:
    ns = migration_namespace()
    n, schema = ns.name, ns.schema
    dialect = op.get_bind().dialect.name
    on_table = f" ON {ns.sql_name('session_events')}" if dialect == "postgresql" else ""
    for trigger in ("no_update", "no_delete", "no_truncate"):
        op.execute(f"DROP TRIGGER IF EXISTS trg_{n('session_events')}_{trigger}{on_table}")
    if dialect == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS {ns.qualify('todo_sessions_events_no_update')}()")
        op.execute(f"DROP FUNCTION IF EXISTS {ns.qualify('todo_sessions_events_no_delete')}()")
    op.drop_table(n("store_state"), schema=schema)
    op.drop_index(
        f"ix_{n('session_events')}_surface", table_name=n("session_events"), schema=schema
    )
    op.drop_index(
        f"ix_{n('session_events')}_session_id_type_seq",
        table_name=n("session_events"),
        schema=schema,
    )
    op.drop_table(n("session_events"), schema=schema)
    op.drop_index(f"ix_{n('sessions')}_updated_at_id", table_name=n("sessions"), schema=schema)
    op.drop_table(n("sessions"), schema=schema)
