"""a session row with events cannot be replaced or deleted by cascade

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02

Before this revision the foreign key's ``ON DELETE CASCADE`` let a raw ``DELETE FROM sessions``
(or, on SQLite, an ``INSERT OR REPLACE INTO sessions``, whose replace deletes the row) wipe a
session's whole log past the append-only triggers of 0001, which let an event row go once
its session row was gone. Now:

- a ``sessions`` row that still has events is never deleted (SQLite and PostgreSQL: a
  ``BEFORE DELETE`` trigger), and on SQLite never replaced: an insert of a session id that
  has events is refused before the conflict resolution runs (a replace fires no delete
  trigger);
- an event row may be deleted only at or past its session's stored next seq (the events
  trigger of 0001, which allowed it once the session row was gone).

So the store's own delete (`store.delete`) is, in one transaction: set the session's next seq
to 0 (its log is no longer protected), delete its events, delete the session row (tags and
checkpoints cascade). The downgrade restores 0001's events trigger and drops the new ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from todo_sessions.store.namespace import Namespace, migration_namespace

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = "session_events rows are append-only"
KEPT = "a session with events keeps them: delete it with todo_sessions (store.delete)"


def _sqlite_events_trigger(ns: Namespace, protected: str) -> str:
    events, sessions = ns.sql_name("session_events"), ns.sql_name("sessions")
    return f"""
        CREATE TRIGGER trg_{ns.name("session_events")}_no_delete BEFORE DELETE ON {events}
        WHEN EXISTS (SELECT 1 FROM {sessions} WHERE id = OLD.session_id{protected})
        BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: delete the session instead'); END
        """


def _pg_events_function(ns: Namespace, protected: str) -> str:
    return f"""
        CREATE OR REPLACE FUNCTION {ns.qualify("todo_sessions_events_no_delete")}()
        RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF EXISTS (
                SELECT 1 FROM {ns.sql_name("sessions")} WHERE id = OLD.session_id{protected}
            ) THEN
                RAISE EXCEPTION '{APPEND_ONLY}: delete the session instead'
                    USING ERRCODE = 'restrict_violation';
            END IF;
            RETURN OLD;
        END $$
        """


BELOW_END = " AND next_seq > OLD.seq"


def upgrade() -> None:
    ns = migration_namespace()
    events, sessions = ns.sql_name("session_events"), ns.sql_name("sessions")
    name = ns.name("sessions")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_pg_events_function(ns, BELOW_END))
        function = ns.qualify("todo_sessions_sessions_no_delete")
        op.execute(
            f"""
            CREATE FUNCTION {function}() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                IF EXISTS (SELECT 1 FROM {events} WHERE session_id = OLD.id) THEN
                    RAISE EXCEPTION '{KEPT}' USING ERRCODE = 'restrict_violation';
                END IF;
                RETURN OLD;
            END $$
            """
        )
        op.execute(
            f"""
            CREATE TRIGGER trg_{name}_no_delete BEFORE DELETE ON {sessions}
            FOR EACH ROW EXECUTE FUNCTION {function}()
            """
        )
        return
    op.execute(f"DROP TRIGGER trg_{ns.name('session_events')}_no_delete")
    op.execute(_sqlite_events_trigger(ns, BELOW_END))
    op.execute(
        f"""
        CREATE TRIGGER trg_{name}_no_delete BEFORE DELETE ON {sessions}
        WHEN EXISTS (SELECT 1 FROM {events} WHERE session_id = OLD.id)
        BEGIN SELECT RAISE(ABORT, '{KEPT}'); END
        """
    )
    op.execute(
        f"""
        CREATE TRIGGER trg_{name}_no_replace BEFORE INSERT ON {sessions}
        WHEN EXISTS (SELECT 1 FROM {events} WHERE session_id = NEW.id)
        BEGIN SELECT RAISE(ABORT, '{KEPT}'); END
        """
    )


def downgrade() -> None:
    ns = migration_namespace()
    name = ns.name("sessions")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER IF EXISTS trg_{name}_no_delete ON {ns.sql_name('sessions')}")
        op.execute(f"DROP FUNCTION IF EXISTS {ns.qualify('todo_sessions_sessions_no_delete')}()")
        op.execute(_pg_events_function(ns, ""))
        return
    op.execute(f"DROP TRIGGER IF EXISTS trg_{name}_no_replace")
    op.execute(f"DROP TRIGGER IF EXISTS trg_{name}_no_delete")
    op.execute(f"DROP TRIGGER trg_{ns.name('session_events')}_no_delete")
    op.execute(_sqlite_events_trigger(ns, ""))
