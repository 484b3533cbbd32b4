"""the search index leaves the append's transaction

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05

``search_pending(id, session_id, first_seq, end_seq)``: one row per append whose events the
search index has not taken yet, written by the append in its own transaction and deleted by
the catch-up that indexes them (`todo_sessions.store.indexer`). No foreign key and no index
but the primary key: the append pays one narrow insert.

Existing databases start with no pending row: revision 0010 indexed every append in its own
transaction, so everything stored is indexed already. The downgrade first indexes what is
still pending (0010's appends expect an index that is whole), then drops the table.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from todo_sessions.core.jsonvalue import decode_fast
from todo_sessions.store.namespace import migration_namespace
from todo_sessions.store.schema import define_tables
from todo_sessions.store.search import expected_rows, insert_rows

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    ns = migration_namespace()
    pending = ns.name("search_pending")
    op.create_table(
        pending,
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("first_seq", sa.BigInteger(), nullable=False),
        sa.Column("end_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=f"pk_{pending}"),
        schema=ns.schema,
    )


def downgrade() -> None:
    ns = migration_namespace()
    tables = define_tables(ns.table_prefix, ns.schema)
    bind = op.get_bind()
    # What is pending, indexed as this revision's catch-up did (written out here: the store's
    # own `indexer` reads the marks of the newest revision, 0013): the events of the pending
    # rows' ranges that have no index rows yet, session by session.
    pending = sa.table(
        ns.name("search_pending"),
        sa.column("session_id", sa.String()),
        sa.column("first_seq", sa.BigInteger()),
        sa.column("end_seq", sa.BigInteger()),
        schema=ns.schema,
    )
    ev, st = tables.session_events.c, tables.search_text.c
    indexed = sa.select(sa.literal_column("1")).where(st.session_id == ev.session_id)
    indexed = indexed.where(st.seq == ev.seq).exists()
    found = bind.execute(sa.select(pending.c.session_id, pending.c.first_seq, pending.c.end_seq))
    for session_id, first, end in found.all():
        events = bind.execute(
            sa.select(ev.seq, ev.type, ev.data)
            .where(ev.session_id == session_id, ev.seq >= first, ev.seq < end, ~indexed)
            .order_by(ev.seq)
        ).all()
        rows = expected_rows(session_id, ((s, t, decode_fast(d)) for s, t, d in events))
        if rows:
            insert_rows(bind, tables, rows, fts=bind.dialect.name != "postgresql")
    op.drop_table(ns.name("search_pending"), schema=ns.schema)
