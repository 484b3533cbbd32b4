"""The session list: ``/`` (a page) and ``/api/sessions`` (JSON), narrowed by the filters of
`filters.parse_filters`, a page at a time (``limit``, ``before``)."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..context import query_int, store_of, summary_or_404
from ..filters import FILTER_NAMES, FilterError, ListEntry, ListFilters, list_page, parse_filters
from ..render import list_url
from ..responses import JSONResponse, page

__all__ = ["LIST_LIMIT", "MAX_LIST_LIMIT", "api_sessions", "sessions_page"]

LIST_LIMIT = 50
"""Sessions per page unless ``limit`` says otherwise."""
MAX_LIST_LIMIT = 500
"""A larger ``limit`` is taken as this."""


@dataclass(frozen=True)
class ListRequest:
    """A list request's filters, limit and ``before``, the page they give and the next page's
    ``before`` (None on the last page)."""

    filters: ListFilters
    limit: int
    before: str | None
    entries: list[ListEntry]
    more: str | None

    @property
    def kept_limit(self) -> int | None:
        """The limit as the links carry it (None: the default, left out)."""
        return None if self.limit == LIST_LIMIT else self.limit


async def read_list(request: Request) -> ListRequest:
    """The page a list request asks for (400 when a parameter is bad, 404 for an unknown
    ``before``)."""
    limit = min(query_int(request, "limit", LIST_LIMIT, low=1) or LIST_LIMIT, MAX_LIST_LIMIT)
    query = request.query_params
    try:
        filters = parse_filters({n: query.getlist(n) for n in FILTER_NAMES})
    except FilterError as exc:
        raise HTTPException(400, str(exc)) from None
    before = query.get("before") or None
    if before is not None:
        await summary_or_404(request, before)
    store = store_of(request)
    entries, more = await list_page(store, limit=limit, before=before, filters=filters)
    return ListRequest(filters, limit, before, entries, more)


async def sessions_page(request: Request) -> Response:
    """``GET /``: the session list."""
    found = await read_list(request)
    keep = found.kept_limit
    next_url = (
        None if found.more is None else list_url(found.filters, limit=keep, before=found.more)
    )
    return page(
        request,
        "sessions.html",
        entries=found.entries,
        limit=found.limit,
        before=found.before,
        filters=found.filters,
        kept_limit=keep,
        next_url=next_url,
        first_url=list_url(found.filters, limit=keep),
    )


async def api_sessions(request: Request) -> Response:
    """``GET /api/sessions``: the session list as JSON, with the next page's URL."""
    found = await read_list(request)
    next_url = None
    if found.more is not None:
        keep = found.kept_limit
        next_url = list_url(found.filters, limit=keep, before=found.more, path="/api/sessions")
    sessions = [e.to_json() for e in found.entries]
    return JSONResponse({"sessions": sessions, "next": found.more, "nextUrl": next_url})
