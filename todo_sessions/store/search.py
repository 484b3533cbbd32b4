"""The search index on the database: its statements, filling it, and one page of hits.

The index is derived data (docs/design.md, "Search"): ``search_text`` holds one row per event
and kind with text (`core.search.index_rows`), written in the append transaction; SQLite keeps
an FTS5 table over it (external content, ``unicode61 remove_diacritics 2``; the append
indexes its rows with one ``INSERT ... SELECT``, a trigger of revision 0010 follows deletes),
PostgreSQL a ``doc tsvector`` column (the row's `core.search.words` in the configuration the
database names, `SEARCH_CONFIG` unless `set_search_config` chose another) with a GIN index.
Rows go with their session (ON DELETE CASCADE). `fill_index` (revision 0010, `reindex`)
rebuilds it from the log.

Everything here runs on a SQLAlchemy connection (the migration's, or the one a backend's
package hands the index's named operations, `index_ops`), in Core, with the two backends'
match expressions as the only text.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..core.jsonvalue import decode_fast
from ..core.search import INDEXED_TYPES, SearchQuery, index_rows, to_fts5, to_tsquery, words
from .schema import SEARCH_FTS, Tables

__all__ = [
    "CONFIG_FUNCTION",
    "SEARCH_CONFIG",
    "SearchFilters",
    "check_config_backend",
    "clear_index",
    "config_function_sql",
    "expected_rows",
    "fill_index",
    "fts_problems",
    "insert_rows",
    "insert_statement",
    "replacing_sessions",
    "search_config",
    "search_page",
    "set_search_config",
    "stored_rows",
]

SEARCH_CONFIG = "simple"
"""PostgreSQL's text search configuration of ``doc`` by default: no stemming, no stop words,
any language (the words are already folded by `core.search.words`, as FTS5's tokenizer
folds)."""
CONFIG_FUNCTION = "todo_sessions_search_config"
"""PostgreSQL: the function (in the namespace's schema; revision 0010) that names the
configuration. Every insert and every query calls it (a one-line SQL function, inlined by the
planner), so the index and the queries always agree, in every process; `set_search_config`
replaces it and rebuilds the index in one transaction."""
_CONFIG_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""A configuration name we accept (unquoted, lower case: as `pg_ts_config` lists them)."""

FILL_BATCH = 2000


def _pg_table(tables: Tables) -> Any:
    """``search_text`` with PostgreSQL's ``doc`` column (outside the shared metadata)."""
    table = tables.search_text
    return sa.table(
        table.name,
        *(sa.column(c.name, c.type) for c in table.columns),
        sa.column("doc"),
        schema=table.schema,
    )


def _config_function(schema: str | None) -> str:
    return CONFIG_FUNCTION if schema is None else f'"{schema}".{CONFIG_FUNCTION}'


def config_function_sql(schema: str | None, config: str = SEARCH_CONFIG) -> str:
    """PostgreSQL: (re)create the function naming the configuration (``config`` must have
    passed `set_search_config`'s checks, or be the default)."""
    if not _CONFIG_NAME.fullmatch(config):
        raise ValueError(f"search_config must be a text search configuration name, got {config!r}")
    return (
        f"CREATE OR REPLACE FUNCTION {_config_function(schema)}() RETURNS regconfig "
        f"LANGUAGE sql STABLE PARALLEL SAFE AS $$ SELECT '{config}'::regconfig $$"
    )


def _config_call(tables: Tables) -> Any:
    return sa.literal_column(f"{_config_function(tables.search_text.schema)}()")


def search_config(conn: Connection, tables: Tables) -> str | None:
    """PostgreSQL: the configuration ``doc`` is built with; SQLite: None (FTS5's tokenizer)."""
    if conn.dialect.name == "sqlite":
        return None
    return str(conn.execute(sa.select(sa.cast(_config_call(tables), sa.Text))).scalar_one())


def check_config_backend(dialect_name: str, config: object) -> None:
    """Before any transaction: ``search_config`` is PostgreSQL's, and a str."""
    if dialect_name == "sqlite":
        raise ValueError(
            "search_config is PostgreSQL's text search configuration; SQLite's index uses "
            "FTS5's unicode61 tokenizer, which has no such setting"
        )
    if not isinstance(config, str):
        raise TypeError(f"search_config must be a str, got {type(config).__name__}")


def set_search_config(conn: Connection, tables: Tables, config: str) -> None:
    """PostgreSQL: build ``doc`` with ``config`` from now on (the caller rebuilds the index in
    the same transaction). A name the server does not know is a `ValueError` listing those it
    does; SQLite has no such setting (its FTS5 tokenizer is fixed by revision 0010)."""
    check_config_backend(conn.dialect.name, config)
    known = sorted(r[0] for r in conn.execute(sa.text("SELECT cfgname FROM pg_ts_config")))
    if config not in known:
        raise ValueError(
            f"search_config {config!r} is not a text search configuration of this server "
            f"(it has: {', '.join(known)})"
        )
    conn.exec_driver_sql(config_function_sql(tables.search_text.schema, config))


def insert_statement(tables: Tables, dialect_name: str) -> Any:
    """One index row: parameters ``session_id, seq, kind, body`` (PostgreSQL also ``words``,
    the row's folded words joined by spaces)."""
    values: dict[str, Any] = {
        name: sa.bindparam(name) for name in ("session_id", "seq", "kind", "body")
    }
    if dialect_name == "postgresql":
        doc = sa.func.to_tsvector(_config_call(tables), sa.bindparam("words", sa.Text))
        return _pg_table(tables).insert().values(**values, doc=doc)
    return tables.search_text.insert().values(**values)


def top_statement(tables: Tables) -> Any:
    """The highest index row id so far (0 without rows)."""
    return sa.select(sa.func.coalesce(sa.func.max(tables.search_text.c.id), sa.literal_column("0")))


def fts_name(tables: Tables) -> str:
    """SQLite: the FTS5 table of these tables' namespace (its prefix and `SEARCH_FTS`)."""
    return tables.search_text.name.removesuffix("search_text") + SEARCH_FTS


def fts_insert(tables: Tables) -> Any:
    """SQLite: index the rows above id ``top`` in FTS5 (one statement for an append's rows;
    a trigger per row measured four times slower)."""
    name, fts = tables.search_text.name, fts_name(tables)
    return sa.text(
        f"INSERT INTO {fts}(rowid, body) SELECT id, body FROM {name} WHERE id > :top"
    ).bindparams(sa.bindparam("top", type_=sa.BigInteger))


def pg_values(row: dict[str, Any]) -> dict[str, Any]:
    """An index row with PostgreSQL's ``words`` parameter."""
    return {**row, "words": " ".join(words(row["body"]))}


def expected_rows(session_id: str, events: Iterable[tuple[int, str, Any]]) -> list[dict[str, Any]]:
    """The index rows of ``(seq, type, data)`` in order."""
    out: list[dict[str, Any]] = []
    for seq, event_type, data in events:
        if event_type in INDEXED_TYPES:
            out += index_rows(session_id, seq, event_type, data)
    return out


def _insert(conn: Connection, tables: Tables, rows: list[dict[str, Any]]) -> None:
    """The rows in one ``executemany`` on the driver's own cursor (the connection's
    transaction; Core's per-row parameter processing cost a fifth of a catch-up)."""
    if not rows:
        return
    dialect = conn.dialect.name
    params = [pg_values(r) for r in rows] if dialect == "postgresql" else rows
    compiled = insert_statement(tables, dialect).compile(dialect=conn.dialect)
    values = operator.itemgetter(*(compiled.positiontup or ()))  # four names at least
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.executemany(str(compiled), list(map(values, params)))
    finally:
        cursor.close()


def insert_rows(conn: Connection, tables: Tables, rows: list[dict[str, Any]], *, fts: bool) -> None:
    """Index rows (PostgreSQL: with ``doc``, so with their GIN entries), and with ``fts``
    (SQLite) their FTS5 entries in one ``INSERT ... SELECT`` after them."""
    if not fts:
        _insert(conn, tables, rows)
        return
    top = conn.execute(top_statement(tables)).scalar_one()
    _insert(conn, tables, rows)
    conn.execute(fts_insert(tables), {"top": top})


def clear_index(conn: Connection, tables: Tables) -> None:
    """Delete every index row (SQLite: and the FTS5 index)."""
    conn.execute(tables.search_text.delete())
    if conn.dialect.name == "sqlite":
        fts = fts_name(tables)
        conn.exec_driver_sql(f"INSERT INTO {fts}({fts}) VALUES ('delete-all')")


def fill_index(conn: Connection, tables: Tables) -> int:
    """Index every stored session, oldest last activity first (so the newest sessions get the
    highest row ids, as appends would have given them); returns the rows written. The index
    must be empty (`clear_index`)."""
    se, ev = tables.sessions.c, tables.session_events.c
    ids = [r[0] for r in conn.execute(sa.select(se.id).order_by(se.updated_at, se.id))]
    by_session = (
        sa.select(ev.seq, ev.type, ev.data)
        .where(ev.session_id == sa.bindparam("sid"), ev.type.in_(sorted(INDEXED_TYPES)))
        .order_by(ev.seq)
    )
    written = 0
    pending: list[dict[str, Any]] = []
    for sid in ids:
        events = conn.execute(by_session, {"sid": sid})
        pending += expected_rows(sid, ((s, t, decode_fast(d)) for s, t, d in events))
        if len(pending) >= FILL_BATCH:
            _insert(conn, tables, pending)
            written, pending = written + len(pending), []
    _insert(conn, tables, pending)
    if conn.dialect.name == "sqlite":  # the triggers kept it; make it exact whatever came before
        fts = fts_name(tables)
        conn.exec_driver_sql(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")
    else:  # fresh statistics for the planner (how common a word is decides the plan)
        table = tables.search_text
        name = table.name if table.schema is None else f'"{table.schema}".{table.name}'
        conn.exec_driver_sql(f"ANALYZE {name}")
    return written + len(pending)


def stored_rows(conn: Connection, tables: Tables, session_id: str) -> list[dict[str, Any]]:
    """The index rows of one session, in seq order (as `expected_rows` gives them)."""
    st = tables.search_text.c
    found = conn.execute(
        sa.select(st.session_id, st.seq, st.kind, st.body)
        .where(st.session_id == session_id)
        .order_by(st.seq, st.id)
    )
    return [dict(r._mapping) for r in found]


def fts_problems(conn: Connection, tables: Tables) -> list[str]:
    """SQLite: FTS5's own check of the index against ``search_text``; what it reports."""
    if conn.dialect.name != "sqlite":
        return []
    fts = fts_name(tables)
    try:
        conn.exec_driver_sql(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")
    except sa.exc.DBAPIError as exc:
        return [
            f"the search index does not match its rows ({exc.orig}): run `todo-sessions reindex`"
        ]
    return []


def replacing_sessions(conn: Connection, tables: Tables, session_ids: Sequence[str]) -> set[str]:
    """Which of these sessions hold a surface replacement (a compaction, a prune, a
    retraction): in the others every event appended to the surface is still on it."""
    if not session_ids:
        return set()
    ev = tables.session_events.c
    found = conn.execute(
        sa.select(ev.session_id)
        .where(
            ev.session_id.in_(list(session_ids)),
            ev.surface_op.is_not(None),
            ev.surface_op != '"append"',
        )
        .distinct()
    )
    return {r[0] for r in found}


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """The session filters of a search (those of `list`)."""

    cwd: str | None = None
    tag: str | None = None
    since: int | None = None
    until: int | None = None


RECENT_ROWS = 20_000
"""PostgreSQL: how many of the newest index rows a search looks through first (`search_page`)."""


def search_page(
    conn: Connection,
    tables: Tables,
    query: SearchQuery,
    kinds: Sequence[str],
    filters: SearchFilters,
    limit: int,
    before: int | None,
) -> list[dict[str, Any]]:
    """One page of hits, newest index row first, below row id ``before``: dicts of ``id,
    session_id, seq, kind, body, title, type, surface_op``.

    PostgreSQL cannot know whether a word is rare (the GIN index finds its few rows at once)
    or everywhere (a backward scan by id stops at the LIMIT), and a wrong guess either way
    costs a scan of the whole index. So it looks through the newest `RECENT_ROWS` rows first
    (bounded whatever the plan), and only if they hold less than a page asks the GIN index for
    the rest (``enable_indexscan`` off for that statement's transaction: a bitmap scan of the
    matches, then the top of them by id)."""
    if conn.dialect.name == "sqlite":
        return _page(conn, tables, query, kinds, filters, limit, before, None)
    # Planned for this query's words, never a generic plan (a prepared statement's generic
    # plan guessed once for all words: a prefix query took seconds). SET LOCAL: this
    # transaction only, PgBouncer-safe.
    conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_custom_plan")
    st = tables.search_text.c
    newest = conn.execute(sa.select(sa.func.max(st.id))).scalar()
    if newest is None:
        return []
    top = newest if before is None else min(newest, before - 1)
    recent = top - RECENT_ROWS
    rows = _page(conn, tables, query, kinds, filters, limit, top + 1, recent)
    if len(rows) < limit and recent > 0:
        conn.exec_driver_sql("SET LOCAL enable_indexscan = off")
        rows += _page(conn, tables, query, kinds, filters, limit - len(rows), recent + 1, None)
        conn.exec_driver_sql("SET LOCAL enable_indexscan = on")
    return rows


def _page(
    conn: Connection,
    tables: Tables,
    query: SearchQuery,
    kinds: Sequence[str],
    filters: SearchFilters,
    limit: int,
    before: int | None,
    after: int | None,
) -> list[dict[str, Any]]:
    """Hits with ids below ``before`` and above ``after`` (None: unbounded)."""
    st, se, ev, tg = (
        tables.search_text.c,
        tables.sessions.c,
        tables.session_events.c,
        tables.session_tags.c,
    )
    if conn.dialect.name == "sqlite":
        # FTS5 walks its matches newest row first and the LIMIT stops it: a common word never
        # collects every match (``id IN (MATCH ...)`` did)
        fts = fts_name(tables)
        index_table = sa.table(fts, sa.column("rowid", sa.Integer))
        page = (
            sa.select(st.id, st.session_id, st.seq, st.kind, st.body)
            .select_from(index_table)
            .join(tables.search_text, st.id == index_table.c.rowid)
            .where(
                sa.text(f"{fts} MATCH :q").bindparams(q=to_fts5(query)), st.kind.in_(list(kinds))
            )
        )
        newest: Any = index_table.c.rowid
    else:
        doc: Any = sa.literal_column(f"{tables.search_text.name}.doc")
        tsquery = sa.func.to_tsquery(_config_call(tables), sa.bindparam("q", to_tsquery(query)))
        page = sa.select(st.id, st.session_id, st.seq, st.kind, st.body).where(
            doc.op("@@")(tsquery), st.kind.in_(list(kinds))
        )
        newest = st.id
    # The page is cut from the index rows first (the session filters as semi-joins), then
    # joined for the title and the event's type: a common word's thousands of matches are
    # never joined row by row before the LIMIT.
    if before is not None:
        page = page.where(newest < before)
    if after is not None:
        page = page.where(newest > after)
    chosen = [
        clause
        for clause in (
            None if filters.cwd is None else se.cwd == filters.cwd,
            None if filters.since is None else se.updated_at >= filters.since,
            None if filters.until is None else se.updated_at < filters.until,
        )
        if clause is not None
    ]
    if chosen:
        page = page.where(st.session_id.in_(sa.select(se.id).where(*chosen)))
    if filters.tag is not None:
        page = page.where(st.session_id.in_(sa.select(tg.session_id).where(tg.tag == filters.tag)))
    hits = page.order_by(newest.desc()).limit(limit).subquery("page")
    statement = (
        sa.select(
            hits.c.id,
            hits.c.session_id,
            hits.c.seq,
            hits.c.kind,
            hits.c.body,
            se.title,
            ev.type,
            ev.surface_op,
        )
        .select_from(hits)
        .join(tables.sessions, se.id == hits.c.session_id)
        .join(
            tables.session_events,
            sa.and_(ev.session_id == hits.c.session_id, ev.seq == hits.c.seq),
        )
        .order_by(hits.c.id.desc())
    )
    return [dict(r._mapping) for r in conn.execute(statement)]
