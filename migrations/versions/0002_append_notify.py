"""notify listeners after each append (PostgreSQL): channel todo_sessions_appended

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

`SessionStore.follow` on PostgreSQL sleeps until this notification instead of polling. The
trigger fires on every change of ``sessions.next_seq``, whichever process or tool appended.
SQLite has no notifications; there ``follow`` polls, and this revision changes nothing.
In a namespace (a schema) the function lives in that schema and notifies the namespace's own
channel, ``todo_sessions_appended_<schema>``, so followers of two namespaces never wake each
other.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from todo_sessions.store.namespace import migration_namespace

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    ns = migration_namespace()
    function = ns.qualify("todo_sessions_notify_append")
    op.execute(
        f"""
        CREATE FUNCTION {function}() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('{ns.notify_channel}', NEW.id);
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        f"""
        CREATE TRIGGER trg_{ns.name("sessions")}_notify_append
        AFTER UPDATE OF next_seq ON {ns.sql_name("sessions")}
        FOR EACH ROW WHEN (NEW.next_seq IS DISTINCT FROM OLD.next_seq)
        EXECUTE FUNCTION {function}()
        """
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    ns = migration_namespace()
    sessions = ns.sql_name("sessions")
    op.execute(f"DROP TRIGGER IF EXISTS trg_{ns.name('sessions')}_notify_append ON {sessions}")
    op.execute(f"DROP FUNCTION IF EXISTS {ns.qualify('todo_sessions_notify_append')}()")
