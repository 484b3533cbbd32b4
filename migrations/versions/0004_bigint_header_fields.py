"""header integers are 64-bit on every backend

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

``sessions.format_version`` and ``sessions.delegation_depth`` were ``INTEGER``: 32 bits on
PostgreSQL, 64 on SQLite, so the two backends accepted different headers. Every integer of a
header (and every seq and time) is now limited to ±(2**53 - 1), the integers a JSON number
carries exactly to a JavaScript reader, and both columns are ``BIGINT`` so that limit holds on
either backend. SQLite stores any integer in 64 bits whatever the declared type, and changing
a declared type there means rebuilding the table under its foreign keys, so on SQLite this
revision changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from todo_sessions.store.namespace import migration_namespace

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("format_version", "delegation_depth")


def _retype(type_: sa.types.TypeEngine[int]) -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    ns = migration_namespace()
    for column in COLUMNS:
        op.alter_column(
            ns.name("sessions"), column, type_=type_, existing_nullable=False, schema=ns.schema
        )


def upgrade() -> None:
    _retype(sa.BigInteger())


def downgrade() -> None:
    _retype(sa.Integer())
