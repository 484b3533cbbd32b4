"""notify listeners after each append (PostgreSQL): channel todo_sessions_appended

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

`SessionStore.follow` on PostgreSQL sleeps until this notification instead of polling. The
trigger fires on every change of ``sessions.next_seq``, whichever process or tool appended.
SQLite has no notifications; there ``follow`` polls, and this revision changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        """
        CREATE FUNCTION todo_sessions_notify_append() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('todo_sessions_appended', NEW.id);
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER trg_sessions_notify_append AFTER UPDATE OF next_seq ON sessions
        FOR EACH ROW WHEN (NEW.next_seq IS DISTINCT FROM OLD.next_seq)
        EXECUTE FUNCTION todo_sessions_notify_append()
        """
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER IF EXISTS trg_sessions_notify_append ON sessions")
    op.execute("DROP FUNCTION IF EXISTS todo_sessions_notify_append()")
