"""Full-text search of every session, and the index behind it (`search`, `reindex`): a part of
`SessionStore`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Sequence

from ..core.envelope import SessionEvent
from ..core.search import DEFAULT_KINDS, KINDS, SearchQuery, parse_query, snippet
from ..errors import SessionNotFoundError
from . import search as index
from .base import StoreCore
from .index_ops import SURFACE_TYPES, SearchRow, index_rows_of
from .listing import check_filters
from .reading import Reading
from .results import SearchHit
from .translate import translate_errors

__all__ = ["Finding"]

MAX_SEARCH_LIMIT = 1000


def _check_kinds(kinds: Iterable[str] | None) -> tuple[str, ...]:
    if kinds is None:
        return DEFAULT_KINDS
    if isinstance(kinds, str):
        kinds = (kinds,)
    chosen = tuple(dict.fromkeys(kinds))
    unknown = [k for k in chosen if k not in KINDS]
    if unknown or not chosen:
        raise ValueError(f"kinds must be among {', '.join(KINDS)}; got {list(chosen)!r}")
    return chosen


INLINE_SNIPPET_CHARS = 200_000
"""A page whose bodies hold more characters than this has its snippets built in a worker
thread, not on the event loop (a page of long bodies takes a second: a server sharing the
loop would stop answering meanwhile); one such page at a time in the process, so that the
loop's thread competes for the interpreter with one builder, however many searches run."""
_BUILDING = threading.Lock()


async def _snippets(
    rows: Sequence[SearchRow], query: SearchQuery
) -> list[tuple[str, tuple[tuple[int, int], ...]]]:
    def build() -> list[tuple[str, tuple[tuple[int, int], ...]]]:
        return [snippet(row.body, query) for row in rows]

    def build_alone() -> list[tuple[str, tuple[tuple[int, int], ...]]]:
        with _BUILDING:
            return build()

    if sum(len(row.body) for row in rows) <= INLINE_SNIPPET_CHARS:
        return build()
    return await asyncio.to_thread(build_alone)


class Finding:
    """`search`, `reindex` and the index's own check (`search_index_problems`) of
    `SessionStore` (documented there)."""

    def __init__(self, core: StoreCore, reading: Reading) -> None:
        self._reading = reading
        # the core's members the search uses
        self.read_only, self.dialect, self._skipped = core.read_only, core.dialect, core.skipped
        self._ready, self._call, self._check_writable = core.ready, core.call, core.check_writable

    async def _index_caught_up(self) -> None:
        """Bring the search index up to every append committed so far, from any process
        (`Recorder.catch_up_index`): what was acknowledged before a search is found by it. A
        read-only store cannot write the index: it reads it as the writers left it."""
        if self.read_only:
            return
        recorder = await self._ready()
        with translate_errors("bringing the search index up to date"):
            await recorder.catch_up_index()

    async def search(
        self,
        query: str,
        *,
        cwd: str | None = None,
        tag: str | None = None,
        since: int | None = None,
        until: int | None = None,
        kinds: Iterable[str] | None = None,
        limit: int = 20,
        before: SearchHit | None = None,
    ) -> list[SearchHit]:
        parsed = parse_query(query)
        chosen = _check_kinds(kinds)
        if type(limit) is not int or not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise ValueError(f"limit must be an int from 1 to {MAX_SEARCH_LIMIT}, got {limit!r}")
        check_filters(since, until, cwd=cwd, tag=tag)
        if before is not None and not isinstance(before, SearchHit):
            raise TypeError(f"before must be a SearchHit, got {type(before).__name__}")
        filters = index.SearchFilters(cwd, tag, since, until)
        after = None if before is None else before.index_id
        await self._index_caught_up()
        found = await self._call(
            "searching sessions", lambda r: r.search(parsed, chosen, filters, limit, after)
        )
        replacing = found.replacing
        snippets = await _snippets(found.rows, parsed)
        surfaces: dict[str, frozenset[int]] = {}
        hits: list[SearchHit] = []
        for row in found.rows:
            sid = row.session_id
            in_history: bool | None = None
            if row.type in SURFACE_TYPES:
                # appended to the surface, and nothing in the session ever replaced anything:
                # still on it; else the surface says (folded once per session of the page)
                in_history = row.surface_op is not None
                if in_history and sid in replacing:
                    if sid not in surfaces:
                        surfaces[sid] = await self._surface_seqs(sid)
                    in_history = row.seq in surfaces[sid]
            text, marks = snippets[len(hits)]
            hits.append(
                SearchHit(
                    sid, row.title, row.seq, row.kind, row.type, text, marks, in_history, row.id
                )
            )
        return hits

    async def _surface_seqs(self, session_id: str) -> frozenset[int]:
        try:
            found = await self._call(
                f"reading the surface of session {session_id!r}",
                lambda r: r.read_surface_state(session_id, None),
            )
        except SessionNotFoundError:  # deleted since the page was read
            return frozenset()
        self._skipped(session_id, found.skipped)
        return frozenset(found.state.surface.seqs)

    async def reindex(self, *, search_config: str | None = None) -> int:
        self._check_writable("rebuild the search index")
        if search_config is not None:
            index.check_config_backend(self.dialect, search_config)
        rows = await self._call(
            "rebuilding the search index", lambda r: r.reindex(search_config=search_config)
        )
        # The rebuild leaves the appends' marks (`Recorder.reindex`): the catch-up finds their
        # events indexed, writes nothing and clears them.
        await self._index_caught_up()
        return rows

    async def search_config(self) -> str | None:
        return await self._call("reading the search configuration", lambda r: r.search_config())

    async def search_index_problems(
        self, session_id: str | None = None, events: Sequence[SessionEvent] | None = None
    ) -> list[str]:
        await self._index_caught_up()
        if session_id is None:
            return await self._call("checking the search index", lambda r: r.index_problems())
        if events is None:
            events = list((await self._reading.read(session_id)).events)
        expected = index_rows_of(
            index.expected_rows(session_id, ((e.seq, e.type, e.payload) for e in events))
        )
        stored = await self._call(
            f"reading the search index of session {session_id!r}",
            lambda r: r.index_rows(session_id),
        )
        if stored == expected:
            return []
        return [
            f"the search index is stale ({len(stored)} row(s) stored, {len(expected)} expected "
            "from the log): run `todo-sessions reindex`"
        ]
