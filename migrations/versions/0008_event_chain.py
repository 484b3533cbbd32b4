"""the hash chain of each session's events

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02

``session_events.chain`` holds each event's chain value (`todo_sessions.core.chain`: a hash
over the previous event's value and the event's stored text, the header bound in at seq 0):
its 32 bytes, a BLOB on SQLite and ``bytea`` on PostgreSQL (its 64 hex digits cost every
PostgreSQL row and WAL record 65 bytes), written by the append from now on. The upgrade
chains the rows already stored, session by session in seq order (rows past a session's
stored end stay without a value; ``verify`` reports those rows anyway), with a plain hash:
the database holds no key. The append-only UPDATE trigger is set aside for that one
statement and put back in the same transaction. The downgrade drops the column.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from todo_sessions.core.chain import BOUND_HEADER_FIELDS, event_text, genesis, link
from todo_sessions.store.namespace import Namespace, migration_namespace

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = "session_events rows are append-only"
PAGE = 2000
FIELDS = ("seq", "type", "time", "data", "surface_op", "source_event_seqs", "ignorable")


def upgrade() -> None:
    ns = migration_namespace()
    events = ns.name("session_events")
    op.add_column(events, sa.Column("chain", sa.LargeBinary(), nullable=True), schema=ns.schema)
    dialect = op.get_bind().dialect.name
    trigger = f"trg_{events}_no_update"
    if dialect == "postgresql":
        op.execute(f"ALTER TABLE {ns.sql_name('session_events')} DISABLE TRIGGER {trigger}")
    else:
        op.execute(f"DROP TRIGGER {trigger}")
    _chain_existing(ns)
    if dialect == "postgresql":
        op.execute(f"ALTER TABLE {ns.sql_name('session_events')} ENABLE TRIGGER {trigger}")
    else:  # as revision 0001 made it
        op.execute(
            f"""
            CREATE TRIGGER {trigger} BEFORE UPDATE ON {ns.sql_name("session_events")}
            BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}: UPDATE is not allowed'); END
            """
        )


def _chain_existing(ns: Namespace) -> None:
    bind = op.get_bind()
    sessions = sa.table(
        ns.name("sessions"),
        *(sa.column(name) for name in (*BOUND_HEADER_FIELDS, "next_seq")),
        schema=ns.schema,
    )
    events = sa.table(
        ns.name("session_events"),
        sa.column("session_id", sa.String),
        *(sa.column(name) for name in FIELDS),
        sa.column("chain", sa.LargeBinary),
        schema=ns.schema,
    )
    c = events.c
    page = (
        sa.select(*(c[name] for name in FIELDS))
        .where(
            c.session_id == sa.bindparam("sid"),
            c.seq >= sa.bindparam("lo"),
            c.seq < sa.bindparam("hi"),
        )
        .order_by(c.seq)
    )
    update = (
        events.update()
        .where(c.session_id == sa.bindparam("b_sid"), c.seq == sa.bindparam("b_seq"))
        .values(chain=sa.bindparam("b_chain"))
    )
    headers = bind.execute(
        sa.select(sessions).where(sessions.c.next_seq > 0).order_by(sessions.c.id)
    ).all()
    for header in headers:
        row = header._mapping
        sid, end = row["id"], row["next_seq"]
        value = genesis(row)
        for lo in range(0, end, PAGE):
            found = bind.execute(page, {"sid": sid, "lo": lo, "hi": min(end, lo + PAGE)}).all()
            batch = []
            for event in found:
                value = link(value, event_text(event._mapping))
                batch.append({"b_sid": sid, "b_seq": event.seq, "b_chain": value})
            if batch:
                bind.execute(update, batch)


def downgrade() -> None:
    ns = migration_namespace()
    op.execute(f"ALTER TABLE {ns.sql_name('session_events')} DROP COLUMN chain")
