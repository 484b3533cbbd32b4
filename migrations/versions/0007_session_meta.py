"""session metadata and list filters

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

``session/meta`` events set a session's title, tags and metadata after its creation; the store
folds them, and whether the latest ``todo/write`` leaves anything open, into columns of
``sessions`` at each append, so ``list()`` filters without reading logs:

- ``sessions.title_folded`` (the title's casefold, for the ``text`` filter), ``tags`` (JSON
  list), ``metadata`` (JSON object), ``open_todos`` (boolean);
- ``session_tags(session_id, tag)`` with an index on ``(tag, session_id)``;
- indexes on ``sessions.cwd`` and ``sessions.parent_session`` (partial: forks and sub-agents).

The upgrade fills the columns from the stored logs (the latest ``todo/write`` of each session,
and every ``session/meta``, which a database downgraded and upgraded again may hold). The
downgrade drops them; the events stay in the log. On SQLite the columns are dropped with
``ALTER TABLE ... DROP COLUMN`` (SQLite 3.35+), never by rebuilding ``sessions`` under the
foreign keys of its events.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from todo_sessions.store.namespace import Namespace, migration_namespace

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("title_folded", "tags", "metadata", "open_todos")
OPEN = ("pending", "in_progress")


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def upgrade() -> None:
    ns = migration_namespace()
    n, schema = ns.name, ns.schema
    sessions = n("sessions")
    op.add_column(sessions, sa.Column("title_folded", sa.Text(), nullable=True), schema=schema)
    op.add_column(sessions, sa.Column("tags", sa.Text(), nullable=True), schema=schema)
    op.add_column(sessions, sa.Column("metadata", sa.Text(), nullable=True), schema=schema)
    op.add_column(
        sessions,
        sa.Column(
            "open_todos",
            sa.Boolean(create_constraint=False),
            nullable=False,
            server_default=sa.false(),
        ),
        schema=schema,
    )
    op.create_index(f"ix_{sessions}_cwd", sessions, ["cwd"], schema=schema)
    op.create_index(
        f"ix_{sessions}_parent_session",
        sessions,
        ["parent_session"],
        sqlite_where=sa.text("parent_session IS NOT NULL"),
        postgresql_where=sa.text("parent_session IS NOT NULL"),
        schema=schema,
    )
    tags = n("session_tags")
    tags_table = op.create_table(
        tags,
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("tag", sa.String(200), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "tag", name=f"pk_{tags}"),
        sa.ForeignKeyConstraint(
            ["session_id"],
            [f"{ns.ref('sessions')}.id"],
            name=f"fk_{tags}_session_id_{sessions}",
            ondelete="CASCADE",
        ),
        schema=schema,
    )
    op.create_index(f"ix_{tags}_tag_session_id", tags, ["tag", "session_id"], schema=schema)
    _fill(ns, tags_table)


def _fill(ns: Namespace, tags_table: sa.Table) -> None:
    """The projection of the logs already stored (see `todo_sessions.core.meta`)."""
    bind = op.get_bind()
    sessions = sa.table(
        ns.name("sessions"),
        sa.column("id", sa.String),
        sa.column("title", sa.Text),
        sa.column("seed_length", sa.BigInteger),
        sa.column("title_folded", sa.Text),
        sa.column("tags", sa.Text),
        sa.column("metadata", sa.Text),
        sa.column("open_todos", sa.Boolean),
        schema=ns.schema,
    )
    events = sa.table(
        ns.name("session_events"),
        sa.column("session_id", sa.String),
        sa.column("seq", sa.BigInteger),
        sa.column("type", sa.String),
        sa.column("data", sa.Text),
        schema=ns.schema,
    )
    titled = bind.execute(
        sa.select(sessions.c.id, sessions.c.title).where(sessions.c.title.is_not(None))
    ).all()
    if titled:
        bind.execute(
            sessions.update()
            .where(sessions.c.id == sa.bindparam("b_id"))
            .values(title_folded=sa.bindparam("b_folded")),
            [{"b_id": sid, "b_folded": title.casefold()} for sid, title in titled],
        )
    latest = (
        sa.select(events.c.session_id, sa.func.max(events.c.seq).label("seq"))
        .where(events.c.type == "todo/write")
        .group_by(events.c.session_id)
        .subquery()
    )
    writes = bind.execute(
        sa.select(events.c.session_id, events.c.data).join(
            latest,
            sa.and_(events.c.session_id == latest.c.session_id, events.c.seq == latest.c.seq),
        )
    ).all()
    open_ids = [
        {"b_id": sid}
        for sid, data in writes
        if any(isinstance(t, dict) and t.get("status") in OPEN for t in json.loads(data)["todos"])
    ]
    if open_ids:
        bind.execute(
            sessions.update()
            .where(sessions.c.id == sa.bindparam("b_id"))
            .values(open_todos=sa.true()),
            open_ids,
        )
    metas = bind.execute(
        sa.select(events.c.session_id, events.c.seq, events.c.data, sessions.c.seed_length)
        .join(sessions, sessions.c.id == events.c.session_id)
        .where(events.c.type == "session/meta")
        .order_by(events.c.session_id, events.c.seq)
    ).all()
    folded: dict[str, dict[str, Any]] = {}
    for sid, seq, text, seed_length in metas:
        data = json.loads(text)
        fields = folded.setdefault(sid, {})
        if "title" in data and seq >= (seed_length or 0):
            fields["title"] = data["title"]
        for key in ("tags", "metadata"):
            if key in data:
                fields[key] = data[key]
    for sid, fields in folded.items():
        values: dict[str, Any] = {}
        if "title" in fields:
            title = fields["title"]
            values["title"] = title
            values["title_folded"] = None if title is None else title.casefold()
        tags = fields.get("tags")
        if tags is not None:
            values["tags"] = _text(tags) if tags else None
        if tags:
            bind.execute(tags_table.insert(), [{"session_id": sid, "tag": t} for t in tags])
        if "metadata" in fields:
            values["metadata"] = _text(fields["metadata"]) if fields["metadata"] else None
        bind.execute(sessions.update().where(sessions.c.id == sid).values(**values))


def downgrade() -> None:
    ns = migration_namespace()
    n, schema = ns.name, ns.schema
    sessions, tags = n("sessions"), n("session_tags")
    op.drop_index(f"ix_{tags}_tag_session_id", table_name=tags, schema=schema)
    op.drop_table(tags, schema=schema)
    op.drop_index(f"ix_{sessions}_parent_session", table_name=sessions, schema=schema)
    op.drop_index(f"ix_{sessions}_cwd", table_name=sessions, schema=schema)
    for column in COLUMNS:
        op.execute(f"ALTER TABLE {ns.sql_name('sessions')} DROP COLUMN {column}")
