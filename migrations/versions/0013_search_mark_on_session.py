"""the search index's mark moves onto the session row

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05

``sessions.index_from``: the first seq of the session that the search index has not taken,
NULL when it has taken them all; ``ix_sessions_index_from``, a partial index of the marked
sessions. They replace revision 0011's ``search_pending`` table, one row per indexed append:
an append now sets the mark in the update of its session row that it makes anyway, and only
when it finds it NULL, so the index costs it no statement and no B-tree page of its own
(`todo_sessions.store.indexer`; bench/append_pages.py: 7.44 WAL frames a lone append with the
pending row, 6.42 with the mark).

The upgrade marks each session from its oldest pending row (the rows of a session cover its
seqs from there to its next seq, and indexing is idempotent), then drops the table; rows of
sessions that no longer exist go with it. The downgrade writes one pending row per marked
session (its mark to its next seq), then drops the index and the column
(``ALTER TABLE ... DROP COLUMN``, SQLite 3.35+, as revision 0007's downgrade does).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from todo_sessions.store.namespace import migration_namespace

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    ns = migration_namespace()
    sessions, schema = ns.name("sessions"), ns.schema
    op.add_column(sessions, sa.Column("index_from", sa.BigInteger(), nullable=True), schema=schema)
    op.create_index(
        f"ix_{sessions}_index_from",
        sessions,
        ["id"],
        sqlite_where=sa.text("index_from IS NOT NULL"),
        postgresql_where=sa.text("index_from IS NOT NULL"),
        schema=schema,
    )
    rows, pending = ns.sql_name("sessions"), ns.sql_name("search_pending")
    op.execute(
        f"UPDATE {rows} SET index_from = (SELECT MIN(p.first_seq) FROM {pending} p "
        f"WHERE p.session_id = {rows}.id) "
        f"WHERE id IN (SELECT session_id FROM {pending})"
    )
    op.drop_table(ns.name("search_pending"), schema=schema)


def downgrade() -> None:
    ns = migration_namespace()
    sessions, schema = ns.name("sessions"), ns.schema
    pending = ns.name("search_pending")
    op.create_table(
        pending,
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("first_seq", sa.BigInteger(), nullable=False),
        sa.Column("end_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=f"pk_{pending}"),
        schema=schema,
    )
    rows = ns.sql_name("sessions")
    op.execute(
        f"INSERT INTO {ns.sql_name('search_pending')} (session_id, first_seq, end_seq) "
        f"SELECT id, index_from, next_seq FROM {rows} "
        "WHERE index_from IS NOT NULL AND next_seq > index_from ORDER BY id"
    )
    op.drop_index(f"ix_{sessions}_index_from", table_name=sessions, schema=schema)
    op.execute(f"ALTER TABLE {rows} DROP COLUMN index_from")
