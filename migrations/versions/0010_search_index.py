"""full-text search index

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02

``search_text(id, session_id, seq, kind, body)``: one row per event and kind with text
(``todo_sessions.core.search``), written by each append; rows go with their session (ON
DELETE CASCADE). SQLite: the FTS5 table ``search_fts`` over ``body`` (external content,
``content_rowid='id'``, tokenizer ``unicode61 remove_diacritics 2``): an append inserts its
rows with one ``INSERT ... SELECT`` (an insert trigger cost four times as much, measured), a
trigger follows deletes (a session's cascade too).
PostgreSQL: ``doc tsvector`` with a GIN index, built in the configuration the function
``todo_sessions_search_config()`` names (``simple``; ``todo-sessions reindex --search-config``
replaces it).

The upgrade indexes the sessions already stored (`todo_sessions.store.search.fill_index`).
Derived data: the downgrade drops it all and loses nothing; ``todo-sessions reindex`` rebuilds
it at any time.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from todo_sessions.store.namespace import migration_namespace
from todo_sessions.store.schema import SEARCH_FTS, define_tables
from todo_sessions.store.search import CONFIG_FUNCTION, config_function_sql, fill_index

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    ns = migration_namespace()
    n, schema = ns.name, ns.schema
    search, sessions = n("search_text"), n("sessions")
    op.create_table(
        search,
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=f"pk_{search}"),
        sa.ForeignKeyConstraint(
            ["session_id"],
            [f"{ns.ref('sessions')}.id"],
            name=f"fk_{search}_session_id_{sessions}",
            ondelete="CASCADE",
        ),
        schema=schema,
    )
    op.create_index(f"ix_{search}_session_id_seq", search, ["session_id", "seq"], schema=schema)
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        fts = n(SEARCH_FTS)
        op.execute(
            f"CREATE VIRTUAL TABLE {fts} USING fts5(body, content='{search}', "
            "content_rowid='id', tokenize='unicode61 remove_diacritics 2')"
        )
        op.execute(
            f"CREATE TRIGGER trg_{search}_delete AFTER DELETE ON {search} BEGIN "
            f"INSERT INTO {fts}({fts}, rowid, body) VALUES ('delete', old.id, old.body); END"
        )
    else:
        op.execute(config_function_sql(schema))
        op.add_column(
            search, sa.Column("doc", postgresql.TSVECTOR(), nullable=False), schema=schema
        )
        op.create_index(f"ix_{search}_doc", search, ["doc"], postgresql_using="gin", schema=schema)
    fill_index(bind, define_tables(ns.table_prefix, schema))


def downgrade() -> None:
    ns = migration_namespace()
    n, schema = ns.name, ns.schema
    search = n("search_text")
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"DROP TRIGGER IF EXISTS trg_{search}_delete")
        op.execute(f"DROP TABLE IF EXISTS {n(SEARCH_FTS)}")
    else:
        op.drop_index(f"ix_{search}_doc", table_name=search, schema=schema)
    op.drop_index(f"ix_{search}_session_id_seq", table_name=search, schema=schema)
    op.drop_table(search, schema=schema)
    if op.get_bind().dialect.name != "sqlite":
        op.execute(f"DROP FUNCTION IF EXISTS {ns.qualify(CONFIG_FUNCTION)}()")
