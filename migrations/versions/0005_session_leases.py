"""session ownership leases

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

``session_leases`` records which `SessionService` owns a session live: owner id, host, pid,
expiry, and an epoch that grows with every new holder. Appends made under a lease check owner
and epoch inside their own transaction, so a writer whose lease was taken over writes nothing.
It has no foreign key to ``sessions``: a new session is leased before its first append stores
it. Derived, operational data: dropping it (downgrade) loses no session data.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from todo_sessions.store.namespace import migration_namespace

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    ns = migration_namespace()
    name = ns.name("session_leases")
    op.create_table(
        name,
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("host", sa.Text(), nullable=True),
        sa.Column("pid", sa.BigInteger(), nullable=True),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("acquired_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=f"pk_{name}"),
        sa.CheckConstraint("epoch > 0", name=f"ck_{name}_epoch_positive"),
        schema=ns.schema,
    )


def downgrade() -> None:
    ns = migration_namespace()
    op.drop_table(ns.name("session_leases"), schema=ns.schema)
