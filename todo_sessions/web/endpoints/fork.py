"""The one write: ``POST /api/sessions/ID/fork?at=SEQ`` forks the session at SEQ (refused,
403, unless the server allows writes and the request comes from its own page with its token:
`security.check_write`)."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ...errors import SessionExistsError, StructureError
from ..context import path_session_id, query_int, store_of, summary_or_404
from ..render import session_url
from ..responses import JSONResponse
from ..security import check_write

__all__ = ["api_fork"]


async def api_fork(request: Request) -> Response:
    """``201 {id, url, inherited}``; 400 past the end, 409 inside an open turn."""
    await check_write(request)
    session_id = path_session_id(request)
    summary = await summary_or_404(request, session_id)
    at = query_int(request, "at", None)
    if at is not None and at >= summary.next_seq:
        raise HTTPException(400, f"seq {at} is past the end of session {session_id!r}")
    try:
        log = await store_of(request).fork(session_id, at)
    except StructureError as exc:
        raise HTTPException(409, f"{exc}; pick a seq between turns") from None
    except SessionExistsError as exc:
        raise HTTPException(409, str(exc)) from None
    child = log.header.id
    return JSONResponse(
        {"id": child, "url": session_url(child), "inherited": log.header.seed_length},
        status_code=201,
    )
