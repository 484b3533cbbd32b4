"""Search: ``/search?q=QUERY`` (a page) and ``/api/search`` (JSON), over
`SessionStore.search`, narrowed by ``cwd`` and ``tag``, a page at a time (``limit``,
``before``: the index id of the last hit of the page before)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from ...errors import SearchQueryError
from ...store.results import SearchHit
from ..context import query_int, store_of
from ..render import hit_url
from ..responses import JSONResponse, page
from .listing import MAX_LIST_LIMIT

__all__ = ["SEARCH_LIMIT", "api_search", "search_page"]

SEARCH_LIMIT = 20
"""Hits per page unless ``limit`` says otherwise."""


@dataclass(frozen=True)
class SearchResult:
    """A search request's query and filters, its page of hits and the next page's URL."""

    query: str
    filters: dict[str, str]
    hits: list[SearchHit]
    more: str | None


async def run_search(request: Request) -> SearchResult:
    """The page of hits a search request asks for; a malformed query is a `SearchQueryError`
    (the callers show its message)."""
    params = request.query_params
    query = params.get("q", "")
    filters = {k: params[k] for k in ("cwd", "tag") if params.get(k)}
    limit = min(query_int(request, "limit", SEARCH_LIMIT, low=1) or SEARCH_LIMIT, MAX_LIST_LIMIT)
    before_id = query_int(request, "before", None, low=1)
    before = None if before_id is None else SearchHit("", None, 0, "", "", "", (), None, before_id)
    hits = await store_of(request).search(
        query, limit=limit, before=before, cwd=filters.get("cwd"), tag=filters.get("tag")
    )
    more = None
    if len(hits) == limit:
        more = "/search?" + urlencode({"q": query, **filters, "before": hits[-1].index_id})
    return SearchResult(query, filters, hits, more)


async def search_page(request: Request) -> Response:
    """``GET /search``: the hits as a page (400 with the problem for a malformed query)."""
    try:
        found = await run_search(request)
    except SearchQueryError as exc:
        params = request.query_params
        return page(
            request,
            "search.html",
            400,
            query=params.get("q", ""),
            error=str(exc),
            hits=[],
            cwd=params.get("cwd"),
            tag=params.get("tag"),
            next_url=None,
        )
    return page(
        request,
        "search.html",
        query=found.query,
        hits=found.hits,
        error=None,
        next_url=found.more,
        cwd=found.filters.get("cwd"),
        tag=found.filters.get("tag"),
    )


def hit_json(hit: SearchHit) -> dict[str, object]:
    """One hit as ``/api/search`` answers it."""
    return {
        "sessionId": hit.session_id,
        "title": hit.title,
        "seq": hit.seq,
        "kind": hit.kind,
        "type": hit.event_type,
        "snippet": hit.snippet,
        "marks": [list(m) for m in hit.marks],
        "inHistory": hit.in_history,
        "indexId": hit.index_id,
        "url": hit_url(hit.session_id, hit.seq),
    }


async def api_search(request: Request) -> Response:
    """``GET /api/search``: ``{hits, next}`` (400 ``{error}`` for a malformed query)."""
    try:
        found = await run_search(request)
    except SearchQueryError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse({"hits": [hit_json(h) for h in found.hits], "next": found.more})
