"""refuse INSERT OR REPLACE over an existing event row (SQLite)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

SQLite's ``INSERT OR REPLACE`` (and ``REPLACE INTO``) deletes the conflicting row without
firing delete triggers (unless the connection turned ``recursive_triggers`` on), so it could
rewrite an event past the append-only triggers of 0001. This trigger refuses any insert of a
``(session_id, seq)`` that already exists, before the conflict resolution runs. PostgreSQL
has no REPLACE, and ``INSERT … ON CONFLICT DO UPDATE`` fires the UPDATE trigger of 0001.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from todo_sessions.store.namespace import migration_namespace

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    ns = migration_namespace()
    events = ns.sql_name("session_events")
    op.execute(
        f"""
        CREATE TRIGGER trg_{ns.name("session_events")}_no_replace BEFORE INSERT ON {events}
        WHEN EXISTS (
            SELECT 1 FROM {events} WHERE session_id = NEW.session_id AND seq = NEW.seq
        )
        BEGIN
            SELECT RAISE(ABORT, 'session_events rows are append-only: that seq already exists');
        END
        """
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    ns = migration_namespace()
    op.execute(f"DROP TRIGGER IF EXISTS trg_{ns.name('session_events')}_no_replace")
