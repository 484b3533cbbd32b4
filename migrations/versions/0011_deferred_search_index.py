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

from todo_sessions.store.indexer import catch_up
from todo_sessions.store.namespace import migration_namespace
from todo_sessions.store.schema import define_tables

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
    while catch_up(bind, tables).more:
        pass
    op.drop_table(ns.name("search_pending"), schema=ns.schema)
