"""projection checkpoints

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

``session_checkpoints`` holds, for a session at seq S, the state a live session needs to go on
from there (the surface, the turn/step state, the todo list), encoded by
``todo_sessions.core.checkpoint``, with its format version. Derived data: the log stays the
only truth, and deleting every checkpoint changes nothing but speed. Rows go with their session
(ON DELETE CASCADE).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from todo_sessions.store.namespace import migration_namespace

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    ns = migration_namespace()
    name = ns.name("session_checkpoints")
    op.create_table(
        name,
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("format_version", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "seq", name=f"pk_{name}"),
        sa.ForeignKeyConstraint(
            ["session_id"],
            [f"{ns.ref('sessions')}.id"],
            name=f"fk_{name}_session_id_{ns.name('sessions')}",
            ondelete="CASCADE",
        ),
        sa.CheckConstraint("seq > 0", name=f"ck_{name}_seq_positive"),
        schema=ns.schema,
    )


def downgrade() -> None:
    ns = migration_namespace()
    op.drop_table(ns.name("session_checkpoints"), schema=ns.schema)
