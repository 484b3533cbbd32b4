"""The search index's named operations of the recorder contract (`search`, `reindex`,
`search_config`, `index_problems`, `index_rows`, `pending_index`), written once for every
backend (`IndexOperations`).

Each is a function of `search` / `indexer` (SQLAlchemy Core) run in one transaction on a
connection that only the backend's own package holds (``_on_sa``): no connection crosses the
recorder's seam, and what comes back is typed rows (`IndexRow`, `SearchRow`, `SearchPage`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from sqlalchemy.engine import Connection

from ..core.search import SearchQuery
from ..core.types import ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE
from . import search as index
from .indexer import lock_statement, pending_events
from .namespace import Namespace

__all__ = ["IndexOperations", "IndexRow", "SearchPage", "SearchRow", "index_rows_of"]

T = TypeVar("T")

SURFACE_TYPES = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})
"""Indexed types that are on the surface (the model's history) unless replaced."""


class IndexRow(NamedTuple):
    """One row of the search index: a text of one event, of one kind."""

    session_id: str
    seq: int
    kind: str
    body: str


def index_rows_of(rows: Iterable[dict[str, Any]]) -> list[IndexRow]:
    """`search.expected_rows`' dicts as `IndexRow`, to compare with `index_rows`."""
    return [IndexRow(r["session_id"], r["seq"], r["kind"], r["body"]) for r in rows]


class SearchRow(NamedTuple):
    """One hit of a search page: the index row, its session's title, its event's type and
    surface operation (the stored JSON text, or None)."""

    id: int
    session_id: str
    seq: int
    kind: str
    body: str
    title: str | None
    type: str
    surface_op: str | None


@dataclass(frozen=True, slots=True)
class SearchPage:
    """A page of hits, and which of their sessions ever replaced anything on their surface
    (`search.replacing_sessions`: for the others, a surface event is still on it)."""

    rows: list[SearchRow]
    replacing: frozenset[str]


class IndexOperations:
    """The index's named operations, for a backend that gives ``_on_sa`` (one transaction on
    a SQLAlchemy connection of its own; ``write``: under the write lock) and ``_namespace``."""

    _namespace: Namespace

    async def _on_sa(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        raise NotImplementedError

    async def search(
        self,
        query: SearchQuery,
        kinds: Sequence[str],
        filters: index.SearchFilters,
        limit: int,
        before: int | None,
    ) -> SearchPage:
        """One page of hits, newest index row first, below row id ``before``."""
        tables = self._namespace.tables

        def page(conn: Connection) -> SearchPage:
            found = index.search_page(conn, tables, query, kinds, filters, limit, before)
            rows = [SearchRow(**r) for r in found]
            placed = sorted({r.session_id for r in rows if r.type in SURFACE_TYPES})
            return SearchPage(rows, frozenset(index.replacing_sessions(conn, tables, placed)))

        return await self._on_sa(page, write=False)

    async def reindex(self, search_config: str | None = None) -> int:
        """Rebuild the index from the logs in one transaction (``search_config``: PostgreSQL's
        text search configuration from now on); the rows it holds."""
        tables = self._namespace.tables

        def rebuild(conn: Connection) -> int:
            if conn.dialect.name == "postgresql":  # no catch-up or delete meanwhile
                conn.execute(lock_statement(tables))
            if search_config is not None:
                index.set_search_config(conn, tables, search_config)
            # The marks stay: the fill reads every log after this, and the next catch-up
            # finds their events indexed (idempotent) and clears them. Clearing them here
            # would hold every marked session row (PostgreSQL) for the whole fill.
            index.clear_index(conn, tables)
            return index.fill_index(conn, tables)

        return await self._on_sa(rebuild, write=True)

    async def search_config(self) -> str | None:
        """PostgreSQL: the text search configuration of the index; SQLite: None."""
        tables = self._namespace.tables
        return await self._on_sa(lambda c: index.search_config(c, tables), write=False)

    async def index_problems(self) -> list[str]:
        """The engine's own check of the index against its rows (SQLite's FTS5; none on
        PostgreSQL)."""
        tables = self._namespace.tables
        return await self._on_sa(lambda c: index.fts_problems(c, tables), write=True)

    async def index_rows(self, session_id: str) -> list[IndexRow]:
        """The stored index rows of one session, in seq order."""
        tables = self._namespace.tables

        def rows(conn: Connection) -> list[IndexRow]:
            return index_rows_of(index.stored_rows(conn, tables, session_id))

        return await self._on_sa(rows, write=False)

    async def pending_index(self) -> int:
        """How many stored events wait for the index (0: none)."""
        tables = self._namespace.tables
        return await self._on_sa(lambda c: pending_events(c, tables), write=False)
