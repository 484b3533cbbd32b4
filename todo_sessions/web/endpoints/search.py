"""Search: ``/search?q=QUERY`` (a page) and ``/api/search`` (JSON), over
`SessionStore.search`, narrowed by ``cwd`` and ``tag``, a page at a time (``limit``,
``before``: the index id of the last hit of the page before).

Any web page can send a search to a viewer on the default port, without a token, so the
viewer bounds what one request costs: at most `MAX_SEARCH_LIMIT` hits a page, and a query of
at most `MAX_SEARCH_TERMS` terms of which at most `MAX_PREFIX_TERMS` are prefixes (a longer one
is refused, 400, before anything is read). The library and the command line take more.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from ...core.search import parse_query
from ...errors import SearchQueryError
from ...store.results import SearchHit
from ..context import query_int, store_of
from ..filters import FilterError, parse_filters
from ..render import hit_url
from ..responses import JSONResponse, page

__all__ = [
    "MAX_PREFIX_TERMS",
    "MAX_SEARCH_LIMIT",
    "MAX_SEARCH_TERMS",
    "SEARCH_LIMIT",
    "api_search",
    "check_query",
    "search_page",
]

SEARCH_LIMIT = 20
"""Hits per page unless ``limit`` says otherwise."""
MAX_SEARCH_LIMIT = 100
"""A larger ``limit`` is taken as this (each hit's snippet is built from its whole text)."""
MAX_SEARCH_TERMS = 8
"""The most terms (words, phrases, prefixes, exclusions) a viewer's query may have."""
MAX_PREFIX_TERMS = 4
"""The most prefix terms (``word*``) among them: each expands to every indexed word it
begins."""


@dataclass(frozen=True)
class SearchResult:
    """A search request's query and filters, its page of hits and the next page's URL."""

    query: str
    filters: dict[str, str]
    hits: list[SearchHit]
    more: str | None


def check_query(query: str) -> None:
    """Refuses (`SearchQueryError`) a query the viewer does not run: one the library refuses,
    or one over `MAX_SEARCH_TERMS` terms or `MAX_PREFIX_TERMS` prefixes."""
    terms = parse_query(query).terms
    if len(terms) > MAX_SEARCH_TERMS:
        problem = f"{len(terms)} terms: the viewer searches at most {MAX_SEARCH_TERMS}"
        raise SearchQueryError(query, problem)
    prefixes = sum(1 for term in terms if term.prefix)
    if prefixes > MAX_PREFIX_TERMS:
        problem = f"{prefixes} prefix terms: the viewer searches at most {MAX_PREFIX_TERMS}"
        raise SearchQueryError(query, problem)


async def run_search(request: Request) -> SearchResult:
    """The page of hits a search request asks for. A malformed or too large query is a
    `SearchQueryError`, a bad ``cwd`` or ``tag`` a `FilterError` (the callers show the
    message); a bad ``limit`` or ``before`` is a 400."""
    params = request.query_params
    query = params.get("q", "")
    chosen = parse_filters({n: params.getlist(n) for n in ("cwd", "tag")})
    filters = {k: v for k, v in chosen.params().items() if k in ("cwd", "tag")}
    limit = query_int(request, "limit", SEARCH_LIMIT, low=1) or SEARCH_LIMIT
    limit = min(limit, MAX_SEARCH_LIMIT)
    before_id = query_int(request, "before", None, low=1)
    before = None if before_id is None else SearchHit("", None, 0, "", "", "", (), None, before_id)
    check_query(query)
    hits = await store_of(request).search(
        query, limit=limit, before=before, cwd=chosen.cwd, tag=chosen.tag
    )
    more = None
    if len(hits) == limit:
        more = "/search?" + urlencode({"q": query, **filters, "before": hits[-1].index_id})
    return SearchResult(query, filters, hits, more)


async def search_page(request: Request) -> Response:
    """``GET /search``: the hits as a page (400 with the problem for a malformed query)."""
    try:
        found = await run_search(request)
    except (SearchQueryError, FilterError) as exc:
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
    return {**hit.to_dict(), "url": hit_url(hit.session_id, hit.seq)}


async def api_search(request: Request) -> Response:
    """``GET /api/search``: ``{hits, next}`` (400 ``{error}`` for a malformed query)."""
    try:
        found = await run_search(request)
    except (SearchQueryError, FilterError) as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse({"hits": [hit_json(h) for h in found.hits], "next": found.more})
