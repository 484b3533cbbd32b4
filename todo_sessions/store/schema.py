"""The tables, defined once. Only alembic migrations create them.

See docs/design.md, "Schema and migrations".

Every constraint and index is named through ``naming_convention`` so alembic batch mode works
on SQLite. The append-only triggers live in the migrations (they are DDL alembic does not
compare); `APPEND_ONLY_MESSAGE` is the text they raise.

`define_tables` builds them for a namespace (a PostgreSQL schema, a table name prefix: see
`namespace`); the module-level tables are the default namespace's, built once at import, with
the names every database had before namespaces existed.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    false,
    text,
)

__all__ = [
    "APPEND_ONLY_MESSAGE",
    "DEFAULT_TABLES",
    "FTS5_SHADOWS",
    "NAMING_CONVENTION",
    "SEARCH_FTS",
    "TABLE_NAMES",
    "VERSION_TABLE",
    "Tables",
    "define_tables",
    "metadata",
    "search_text",
    "session_checkpoints",
    "session_events",
    "session_leases",
    "session_tags",
    "sessions",
    "store_state",
]

VERSION_TABLE = "todo_sessions_alembic_version"
"""Alembic's version table for our history, apart from any host application's."""

APPEND_ONLY_MESSAGE = "session_events rows are append-only"

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Index and constraint names derive from the (prefixed) table name."""

TABLE_NAMES = (
    "sessions",
    "session_events",
    "store_state",
    "session_leases",
    "session_tags",
    "session_checkpoints",
    "search_text",
)
"""Our tables' names in the default namespace (a prefix goes in front of each)."""


@dataclass(frozen=True, slots=True)
class Tables:
    """The tables of one namespace, in their own `MetaData`."""

    metadata: MetaData
    sessions: Table
    session_events: Table
    store_state: Table
    session_leases: Table
    session_tags: Table
    session_checkpoints: Table
    search_text: Table


SEARCH_FTS = "search_fts"
"""SQLite's FTS5 index over ``search_text`` (external content), created by revision 0010."""
FTS5_SHADOWS = ("", "_data", "_idx", "_docsize", "_config")
"""The FTS5 table and its shadow tables (suffixes of `SEARCH_FTS`)."""


def define_tables(prefix: str = "", schema: str | None = None) -> Tables:
    """Our tables named ``prefix + name``, in ``schema`` (None: the connection's default),
    in a `MetaData` of their own. Names are not checked here (`namespace.Namespace` does)."""
    metadata = MetaData(schema=schema, naming_convention=NAMING_CONVENTION)
    sessions = Table(
        f"{prefix}sessions",
        metadata,
        Column("id", String(200), nullable=False),
        Column("format_version", BigInteger, nullable=False),
        Column("created_at", BigInteger, nullable=False),
        Column("cwd", Text, nullable=True),
        Column("parent_session", String(200), nullable=True),
        Column("seed_length", BigInteger, nullable=True),
        Column("origin", Text, nullable=True),
        Column("delegation_depth", BigInteger, nullable=False),
        Column("title", Text, nullable=True),
        Column("incarnation", String(36), nullable=False),
        Column("revision", BigInteger, nullable=False),
        Column("next_seq", BigInteger, nullable=False),
        Column("updated_at", BigInteger, nullable=False),
        # projected from the log at each append (`core.meta`): list() filters on them
        Column("title_folded", Text, nullable=True),
        Column("tags", Text, nullable=True),
        Column("metadata", Text, nullable=True),
        Column(
            "open_todos", Boolean(create_constraint=False), nullable=False, server_default=false()
        ),
        # the search index's mark (revision 0013): the first seq it has not taken, NULL when
        # it has taken every event (`indexer`)
        Column("index_from", BigInteger, nullable=True),
        PrimaryKeyConstraint("id"),
        CheckConstraint("next_seq >= 0", name="next_seq_non_negative"),
        CheckConstraint("revision >= 0", name="revision_non_negative"),
        # keyset pagination of list(): newest activity first
        Index(None, "updated_at", "id"),
        # list(cwd=...), list(parent=...): columns no append changes, so no append updates them
        Index(None, "cwd"),
        Index(
            f"ix_{prefix}sessions_parent_session",
            "parent_session",
            sqlite_where=text("parent_session IS NOT NULL"),
            postgresql_where=text("parent_session IS NOT NULL"),
        ),
        # the sessions the search index has not caught up with; an append sets ``index_from``
        # only when it finds it NULL, so only then does this index change
        Index(
            f"ix_{prefix}sessions_index_from",
            "id",
            sqlite_where=text("index_from IS NOT NULL"),
            postgresql_where=text("index_from IS NOT NULL"),
        ),
    )
    """``title`` is the current title: the header's, until a ``session/meta`` event sets
    another. ``title_folded`` is its `str.casefold` (the ``text`` filter); ``tags`` (a JSON
    list) and ``metadata`` (a JSON object) are NULL when empty; ``open_todos``: the latest
    ``todo/write`` holds an item pending or in progress."""

    # The foreign key is SQLite's: PostgreSQL checks an event row's session once per statement
    # with a trigger instead (revision 0012; migrations/env.py leaves it out of the comparison
    # there). Nothing cascades to events: a session row with events is never deleted (0009).
    session_events = Table(
        f"{prefix}session_events",
        metadata,
        Column(
            "session_id",
            String(200),
            ForeignKey(sessions.c.id, ondelete="CASCADE"),
            nullable=False,
        ),
        Column("seq", BigInteger, nullable=False),
        Column("type", String(200), nullable=False),
        Column("time", BigInteger, nullable=False),
        Column("data", Text, nullable=False),
        Column("surface_op", Text, nullable=True),
        Column("source_event_seqs", Text, nullable=True),
        Column(
            "ignorable", Boolean(create_constraint=False), nullable=False, server_default=false()
        ),
        # the hash chain (`core.chain`): its 32 bytes (BLOB / bytea; hex above the store),
        # written by the append (revision 0008)
        Column("chain", LargeBinary, nullable=True),
        PrimaryKeyConstraint("session_id", "seq"),
        CheckConstraint("seq >= 0", name="seq_non_negative"),
        # latest event of a type (todo/write) without scanning the session
        Index(None, "session_id", "type", "seq"),
        # surface rows only (partial index)
        Index(
            f"ix_{prefix}session_events_surface",
            "session_id",
            "seq",
            sqlite_where=text("surface_op IS NOT NULL"),
            postgresql_where=text("surface_op IS NOT NULL"),
        ),
    )

    store_state = Table(
        f"{prefix}store_state",
        metadata,
        Column("id", Integer, nullable=False),
        Column("store_id", String(36), nullable=False),
        PrimaryKeyConstraint("id"),
        CheckConstraint("id = 1", name="single_row"),
    )

    # Who owns a session live (`SessionService` leases). ``epoch`` grows with every new
    # holder; an append made under a lease checks owner and epoch inside its own transaction
    # (fencing). No foreign key: a service leases a new session before its first append
    # stores it.
    session_leases = Table(
        f"{prefix}session_leases",
        metadata,
        Column("session_id", String(200), nullable=False),
        Column("owner", String(200), nullable=False),
        Column("host", Text, nullable=True),
        Column("pid", BigInteger, nullable=True),
        Column("epoch", BigInteger, nullable=False),
        Column("acquired_at", BigInteger, nullable=False),
        Column("expires_at", BigInteger, nullable=False),
        PrimaryKeyConstraint("session_id"),
        CheckConstraint("epoch > 0", name="epoch_positive"),
    )

    # One row per tag of a session (the same tags as ``sessions.tags``): list(tag=...).
    session_tags = Table(
        f"{prefix}session_tags",
        metadata,
        Column(
            "session_id",
            String(200),
            ForeignKey(sessions.c.id, ondelete="CASCADE"),
            nullable=False,
        ),
        Column("tag", String(200), nullable=False),
        PrimaryKeyConstraint("session_id", "tag"),
        Index(None, "tag", "session_id"),
    )

    # Projection checkpoints (`core.checkpoint`): the live state as of ``seq`` (events
    # ``0..seq-1`` folded). Derived data: the only rows the library deletes and rewrites.
    session_checkpoints = Table(
        f"{prefix}session_checkpoints",
        metadata,
        Column(
            "session_id",
            String(200),
            ForeignKey(sessions.c.id, ondelete="CASCADE"),
            nullable=False,
        ),
        Column("seq", BigInteger, nullable=False),
        Column("format_version", BigInteger, nullable=False),
        Column("state", Text, nullable=False),
        Column("created_at", BigInteger, nullable=False),
        PrimaryKeyConstraint("session_id", "seq"),
        CheckConstraint("seq > 0", name="seq_positive"),
    )
    # The search index (`core.search`): derived from the log at each append, rebuilt by
    # `reindex`. Rows go with their session. PostgreSQL adds a ``doc tsvector`` column with a
    # GIN index, SQLite an FTS5 table over ``body`` (revision 0010; not in this metadata).
    search_text = Table(
        f"{prefix}search_text",
        metadata,
        Column("id", BigInteger().with_variant(Integer(), "sqlite"), nullable=False),
        Column(
            "session_id",
            String(200),
            ForeignKey(sessions.c.id, ondelete="CASCADE"),
            nullable=False,
        ),
        Column("seq", BigInteger, nullable=False),
        Column("kind", String(20), nullable=False),
        Column("body", Text, nullable=False),
        PrimaryKeyConstraint("id"),
        Index(None, "session_id", "seq"),
    )
    return Tables(
        metadata,
        sessions,
        session_events,
        store_state,
        session_leases,
        session_tags,
        session_checkpoints,
        search_text,
    )


DEFAULT_TABLES = define_tables()
"""The default namespace's tables: today's names, in the connection's default schema."""

metadata = DEFAULT_TABLES.metadata
sessions = DEFAULT_TABLES.sessions
session_events = DEFAULT_TABLES.session_events
store_state = DEFAULT_TABLES.store_state
session_leases = DEFAULT_TABLES.session_leases
session_tags = DEFAULT_TABLES.session_tags
session_checkpoints = DEFAULT_TABLES.session_checkpoints
search_text = DEFAULT_TABLES.search_text
