"""The viewer's responses: JSON with every control character escaped, HTML pages with the
header every page shows, and the error handlers (a page, or ``{"error": ...}`` under
``/api/``)."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.responses import JSONResponse as StarletteJSONResponse

from .._jsonout import dumps
from .context import allow_writes, fork_token, shown_database, wants_json
from .render import render

__all__ = ["JSONResponse", "http_error", "library_error", "page", "page_context"]


class JSONResponse(StarletteJSONResponse):
    """Starlette's JSON response with DEL and the C1 controls escaped (`jsonout`)."""

    def render(self, content: Any) -> bytes:
        return dumps(content, allow_nan=False, separators=(",", ":")).encode("utf-8")


def page_context(request: Request) -> dict[str, Any]:
    """What every page's header and scripts need: the database shown, whether writes are
    allowed and the token a fork sends back."""
    writes = allow_writes(request)
    return {
        "database": shown_database(request),
        "writes": writes,
        "fork_token": fork_token(request) if writes else "",
    }


def page(request: Request, template: str, code: int = 200, **context: Any) -> HTMLResponse:
    """The page ``template`` rendered with ``context`` and the header's values."""
    html = render(template, **page_context(request), **context)
    return HTMLResponse(html, status_code=code)


async def http_error(request: Request, exc: Exception) -> Response:
    """An `HTTPException` (a bad parameter, an unknown session, a refused fork)."""
    assert isinstance(exc, HTTPException)
    if wants_json(request):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
    return page(request, "error.html", exc.status_code, status=exc.status_code, message=exc.detail)


async def library_error(request: Request, exc: Exception) -> Response:
    """A `TodoSessionsError` an endpoint did not expect (a corrupt row, a busy database):
    500 with its one-line message."""
    message = str(exc)
    if wants_json(request):
        return JSONResponse({"error": message}, status_code=500)
    return page(request, "error.html", 500, status=500, message=message)
