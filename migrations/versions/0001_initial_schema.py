"""initial schema: sessions, session_events (append-only), store_state

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = "session_events rows are append-only"

SQLITE_TRIGGERS = [
    f"""
    CREATE TRIGGER trg_session_events_no_update BEFORE UPDATE ON session_events
    BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: UPDATE is not allowed'); END
    """,
    # A row may leave only together with its session (the FK cascade runs after the
    # session row is gone, so the check below lets it through).
    f"""
    CREATE TRIGGER trg_session_events_no_delete BEFORE DELETE ON session_events
    WHEN EXISTS (SELECT 1 FROM sessions WHERE id = OLD.session_id)
    BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: delete the session instead'); END
    """,
]

POSTGRES_TRIGGERS = [
    f"""
    CREATE FUNCTION todo_sessions_events_no_update() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION '{APPEND_ONLY}: % is not allowed', TG_OP
            USING ERRCODE = 'restrict_violation';
    END $$
    """,
    f"""
    CREATE FUNCTION todo_sessions_events_no_delete() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF EXISTS (SELECT 1 FROM sessions WHERE id = OLD.session_id) THEN
            RAISE EXCEPTION '{APPEND_ONLY}: delete the session instead'
                USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN OLD;
    END $$
    """,
    """
    CREATE TRIGGER trg_session_events_no_update BEFORE UPDATE ON session_events
    FOR EACH ROW EXECUTE FUNCTION todo_sessions_events_no_update()
    """,
    """
    CREATE TRIGGER trg_session_events_no_truncate BEFORE TRUNCATE ON session_events
    FOR EACH STATEMENT EXECUTE FUNCTION todo_sessions_events_no_update()
    """,
    """
    CREATE TRIGGER trg_session_events_no_delete BEFORE DELETE ON session_events
    FOR EACH ROW EXECUTE FUNCTION todo_sessions_events_no_delete()
    """,
]


def upgrade() -> None:
    op.create_table(
        "sessions",
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
        sa.PrimaryKeyConstraint("id", name="pk_sessions"),
        sa.CheckConstraint("next_seq >= 0", name="ck_sessions_next_seq_non_negative"),
        sa.CheckConstraint("revision >= 0", name="ck_sessions_revision_non_negative"),
    )
    op.create_index("ix_sessions_updated_at_id", "sessions", ["updated_at", "id"])
    op.create_table(
        "session_events",
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
        sa.PrimaryKeyConstraint("session_id", "seq", name="pk_session_events"),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name="fk_session_events_session_id_sessions",
            ondelete="CASCADE",
        ),
        sa.CheckConstraint("seq >= 0", name="ck_session_events_seq_non_negative"),
    )
    op.create_index(
        "ix_session_events_session_id_type_seq", "session_events", ["session_id", "type", "seq"]
    )
    op.create_index(
        "ix_session_events_surface",
        "session_events",
        ["session_id", "seq"],
        sqlite_where=sa.text("surface_op IS NOT NULL"),
        postgresql_where=sa.text("surface_op IS NOT NULL"),
    )
    store_state = op.create_table(
        "store_state",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("store_id", sa.String(36), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_store_state"),
        sa.CheckConstraint("id = 1", name="ck_store_state_single_row"),
    )
    op.bulk_insert(store_state, [{"id": 1, "store_id": str(uuid.uuid4())}])
    dialect = op.get_bind().dialect.name
    for statement in POSTGRES_TRIGGERS if dialect == "postgresql" else SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    on_table = " ON session_events" if dialect == "postgresql" else ""
    for trigger in ("no_update", "no_delete", "no_truncate"):
        op.execute(f"DROP TRIGGER IF EXISTS trg_session_events_{trigger}{on_table}")
    if dialect == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS todo_sessions_events_no_update()")
        op.execute("DROP FUNCTION IF EXISTS todo_sessions_events_no_delete()")
    op.drop_table("store_state")
    op.drop_index("ix_session_events_surface", table_name="session_events")
    op.drop_index("ix_session_events_session_id_type_seq", table_name="session_events")
    op.drop_table("session_events")
    op.drop_index("ix_sessions_updated_at_id", table_name="sessions")
    op.drop_table("sessions")
