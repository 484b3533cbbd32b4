"""PostgreSQL: an event row's session is checked once per statement, not once per row

Revision ID: 0012_events_statement_check
Revises: 0011
Create Date: 2026-12-05

On PostgreSQL the foreign key ``session_events.session_id -> sessions.id`` ran its check for
every inserted row (the RI trigger: a ``SELECT ... FOR KEY SHARE`` of the session row through
SPI), about a third of what a row cost the server (bench/row_cost_bench.py, bench/RESULTS.md
"Store v4: the row's own SQL"). This revision replaces it by one check per statement, with
the same guarantees:

- ``trg_session_events_have_sessions`` (``AFTER INSERT ... FOR EACH STATEMENT``, over the
  statement's new rows): every inserted row's session row exists, and is locked
  ``FOR KEY SHARE`` until the transaction ends, as the foreign key locked it (so a concurrent
  delete of that session waits, then finds the events: revision 0009's trigger refuses it);
  otherwise ``foreign_key_violation``. The append inserts its rows in one statement
  (``INSERT ... SELECT FROM unnest(...)``), so the check runs once an append.
- The foreign key's ``ON DELETE CASCADE`` never deleted events since revision 0009 (a session
  row with events cannot be deleted); without the key nothing cascades to them at all.
  ``TRUNCATE sessions ... CASCADE`` reached the events through the key (and was refused by
  their truncate trigger); ``trg_sessions_no_truncate`` refuses it now.

SQLite keeps its foreign key: its check per row is one probe of ``sessions`` on the
connection's own B-tree pages (7% of a row's SQL, measured), its ``PRAGMA foreign_key_check``
is how ``verify`` finds events without a session, and a trigger doing the same would cost no
less. On SQLite this revision changes nothing.

The downgrade drops both triggers and their functions and adds the foreign key back (it
validates the stored rows, which the triggers kept consistent).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from todo_sessions.store.namespace import Namespace, migration_namespace

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = "session_events rows are append-only"
CHECK_FUNCTION = "todo_sessions_events_have_sessions"
TRUNCATE_FUNCTION = "todo_sessions_sessions_no_truncate"


def _foreign_key(ns: Namespace) -> str:
    return f"fk_{ns.name('session_events')}_session_id_{ns.name('sessions')}"


def _upgrade_postgres(ns: Namespace) -> None:
    events, sessions = ns.sql_name("session_events"), ns.sql_name("sessions")
    check, no_truncate = ns.qualify(CHECK_FUNCTION), ns.qualify(TRUNCATE_FUNCTION)
    op.execute(f"ALTER TABLE {events} DROP CONSTRAINT {_foreign_key(ns)}")
    op.execute(
        f"""
        CREATE FUNCTION {check}() RETURNS trigger
        LANGUAGE plpgsql AS $$
        DECLARE
            missing text;
        BEGIN
            SELECT n.session_id INTO missing
            FROM (SELECT DISTINCT session_id FROM new_rows) AS n
            WHERE NOT EXISTS (
                SELECT FROM {sessions} AS s WHERE s.id = n.session_id FOR KEY SHARE
            )
            LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'session_events rows need their session: no session %', missing
                    USING ERRCODE = 'foreign_key_violation';
            END IF;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        f"""
        CREATE TRIGGER trg_{ns.name("session_events")}_have_sessions
        AFTER INSERT ON {events} REFERENCING NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION {check}()
        """
    )
    op.execute(
        f"""
        CREATE FUNCTION {no_truncate}() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION '{APPEND_ONLY}: TRUNCATE of sessions is not allowed'
                USING ERRCODE = 'restrict_violation';
        END $$
        """
    )
    op.execute(
        f"""
        CREATE TRIGGER trg_{ns.name("sessions")}_no_truncate BEFORE TRUNCATE ON {sessions}
        FOR EACH STATEMENT EXECUTE FUNCTION {no_truncate}()
        """
    )


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _upgrade_postgres(migration_namespace())


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    ns = migration_namespace()
    events, sessions = ns.sql_name("session_events"), ns.sql_name("sessions")
    op.execute(f"DROP TRIGGER IF EXISTS trg_{ns.name('sessions')}_no_truncate ON {sessions}")
    op.execute(f"DROP FUNCTION IF EXISTS {ns.qualify(TRUNCATE_FUNCTION)}()")
    op.execute(f"DROP TRIGGER IF EXISTS trg_{ns.name('session_events')}_have_sessions ON {events}")
    op.execute(f"DROP FUNCTION IF EXISTS {ns.qualify(CHECK_FUNCTION)}()")
    op.execute(
        f"ALTER TABLE {events} ADD CONSTRAINT {_foreign_key(ns)} FOREIGN KEY (session_id) "
        f"REFERENCES {ns.sql_name('sessions')} (id) ON DELETE CASCADE"
    )
