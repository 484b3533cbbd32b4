"""The Starlette application: pages, the JSON API the pages use, live updates and export.

Routes (``ID`` is the percent-encoded session id; ids may contain ``/``):

- ``GET /``: the session list (``?limit=N&before=ID``: the page after session ID), narrowed
  by the filters ``cwd``, ``tag``, ``text``, ``parent``, ``open_todos`` (yes, no, any),
  ``since`` and ``until`` (a date, a time or a duration ago; see `views.parse_filters`).
- ``GET /open?id=ID``: redirects to the session page.
- ``GET /sessions/ID?at=SEQ``: the session page at SEQ (default: the end).
- ``GET /api/sessions?limit=N&before=ID``: the list as JSON (the same filters).
- ``GET /api/sessions/ID/state?at=SEQ``: todo list (with changes) as of SEQ, and the messages
  of the window that holds SEQ (the surface events of its timeline page, up to SEQ: bounded
  work, whatever the session's length; ``window`` says which seqs, and the ``at`` of the
  windows before and after); ``&html=1`` adds the panes as HTML and leaves the messages list
  out.
- ``GET /api/sessions/ID/timeline?at=SEQ``: the timeline page that holds SEQ, as HTML.
- ``GET /api/sessions/ID/events?from=SEQ``: server-sent events, one per appended event.
- ``GET /api/sessions/ID/export``: the JSONL export, as a download.
- ``GET /api/sessions/ID/message?seq=SEQ``: the full text of the event at SEQ (what a page
  shows cut when it is longer than ``message_limit`` bytes), as plain text.
- ``POST /api/sessions/ID/fork?at=SEQ``: fork at SEQ; refused (403) unless writes are allowed.

The server is read-only unless ``allow_writes``: the only write is fork. Every request's
``Host`` header must be one of ``allowed_hosts`` (DNS rebinding: a foreign page that resolves
its own name to this server is refused, 400). A write must also come from the page itself: a
same-origin ``Origin`` header or ``Sec-Fetch-Site: same-origin`` (a request with neither, or a
cross-site one, is refused, 403), and it must carry the server's token (``fork_token`` in the
form body, a random value made when the app is created and written into the session page).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.responses import JSONResponse as StarletteJSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import (
    InvalidEventError,
    SearchQueryError,
    SessionExistsError,
    SessionNotFoundError,
    StructureError,
    TodoSessionsError,
)
from ..jsonl import export_lines
from ..jsonout import dumps, escape_controls
from ..redact import mask_url
from ..store.results import SearchHit, SessionSummary
from ..store.store import SessionStore
from . import views
from .render import (
    api_url,
    hit_url,
    list_url,
    render,
    render_messages,
    render_row,
    render_todos,
    session_url,
)

__all__ = ["FORK_TOKEN_FIELD", "LOCAL_HOSTS", "create_app", "host_name"]

STATIC = Path(__file__).parent / "static"

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")

LIST_LIMIT = 50
MAX_LIST_LIMIT = 500
SEARCH_LIMIT = 20

HEARTBEAT_SECONDS = 15.0
"""A comment line on an idle event stream, so a closed browser tab is noticed."""

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""Nothing from the network, no inline script: even a missed escape could not run code."""


class _SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class JSONResponse(StarletteJSONResponse):
    """Starlette's JSON response with DEL and the C1 controls escaped (`jsonout`)."""

    def render(self, content: Any) -> bytes:
        return dumps(content, allow_nan=False, separators=(",", ":")).encode("utf-8")


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port, lower case, without a final dot:
    ``[::1]:8765`` → ``::1``, ``Example.COM.:80`` → ``example.com``."""
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


class _HostCheck:
    """Refuses (400) a request whose ``Host`` header is not one of ``names`` (DNS
    rebinding). Names are compared as `host_name` gives them; IPv6 with or without
    brackets."""

    def __init__(self, app: ASGIApp, names: Sequence[str]) -> None:
        self.app = app
        self.names = frozenset(host_name(n) for n in names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope.get("headers") or [])
            host = headers.get(b"host", b"").decode("latin-1")
            if host_name(host) not in self.names:
                response = PlainTextResponse("Invalid host header", status_code=400)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


_SEQ_TEXT = re.compile(r"[0-9]{1,18}")
"""A ``Last-Event-ID`` we sent: ASCII digits (``str.isdigit`` also takes ``²``)."""

FORK_TOKEN_FIELD = "fork_token"
"""The form field a fork request carries the server's token in."""

MAX_FORM_BYTES = 4096


def _same_origin(request: Request) -> bool:
    """Whether a request comes from this server's own page: ``Sec-Fetch-Site: same-origin``
    (browsers send it), else an ``Origin`` naming this server's scheme and host."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return False
    parts = urlsplit(origin)
    return parts.scheme == request.url.scheme and parts.netloc == request.headers.get("host")


async def _form_token(request: Request) -> str | None:
    """The ``fork_token`` of a url-encoded form body (None when absent or malformed)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    try:
        values = parse_qs(body.decode("ascii"), strict_parsing=False).get(FORK_TOKEN_FIELD)
    except (UnicodeDecodeError, ValueError):
        return None
    return values[0] if values and len(values) == 1 else None


def _int(request: Request, name: str, default: int | None, *, low: int = 0) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"{name} must be an integer, got {raw!r}") from None
    if value < low:
        raise HTTPException(400, f"{name} must be >= {low}, got {value}")
    return value


def _session_id(request: Request) -> str:
    value: str = request.path_params["session_id"]
    return value


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def create_app(
    store: SessionStore | str,
    *,
    allow_writes: bool = False,
    allowed_hosts: Sequence[str] | None = LOCAL_HOSTS,
    database: str | None = None,
    own_store: bool | None = None,
    message_limit: int = views.MESSAGE_LIMIT,
) -> Starlette:
    """The web application over ``store`` (a `SessionStore`, or a URL to open one).

    The app opens the store when it starts and closes it when it stops if it opened it.
    ``allowed_hosts``: the ``Host`` names accepted, without ports (``None``: any, only for an
    app behind a proxy that checks ``Host`` itself; `server.serve` never passes it).
    ``database``: what the page header shows (default: the store's URL), every password
    masked.
    ``own_store``: close the store when the app stops (default: only a store it opened).
    ``message_limit``: the most bytes of one text a page shows (longer: cut, with a link to
    ``/api/sessions/ID/message?seq=SEQ``).
    """
    if message_limit < 1:
        raise ValueError(f"message_limit must be >= 1, got {message_limit}")
    owned = not isinstance(store, SessionStore) if own_store is None else own_store
    the_store = SessionStore(store) if isinstance(store, str) else store
    shown_db = mask_url(database if database is not None else the_store.url)
    fork_token = secrets.token_urlsafe(32) if allow_writes else ""
    base = {"database": shown_db, "writes": allow_writes, "fork_token": fork_token}

    def full_url(session_id: str) -> Callable[[int], str]:
        return lambda seq: api_url(session_id, "message", seq=seq)

    def page(template: str, code: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(render(template, **base, **context), status_code=code)

    async def summary_or_404(session_id: str) -> SessionSummary:
        try:
            return await the_store.summary(session_id)
        except SessionNotFoundError:
            raise HTTPException(404, f"no session {session_id!r}") from None
        except InvalidEventError as exc:  # not a valid id at all
            raise HTTPException(404, str(exc)) from None

    async def list_request(
        request: Request,
    ) -> tuple[views.ListFilters, int, str | None, list[views.ListEntry], str | None]:
        """The filters, limit and ``before`` of a list request (400 when one is bad, 404 for
        an unknown ``before``), and the page they give with the next page's ``before``."""
        limit = min(_int(request, "limit", LIST_LIMIT, low=1) or LIST_LIMIT, MAX_LIST_LIMIT)
        query = request.query_params
        try:
            filters = views.parse_filters({n: query.getlist(n) for n in views.FILTER_NAMES})
        except views.FilterError as exc:
            raise HTTPException(400, str(exc)) from None
        before = query.get("before") or None
        if before is not None:
            await summary_or_404(before)
        entries, more = await views.list_page(
            the_store, limit=limit, before=before, filters=filters
        )
        return filters, limit, before, entries, more

    def shown_limit(limit: int) -> int | None:
        return None if limit == LIST_LIMIT else limit

    # -- pages ------------------------------------------------------------------------------

    async def sessions_page(request: Request) -> Response:
        filters, limit, before, entries, more = await list_request(request)
        keep = shown_limit(limit)
        return page(
            "sessions.html",
            entries=entries,
            limit=limit,
            before=before,
            filters=filters,
            kept_limit=keep,
            next_url=None if more is None else list_url(filters, limit=keep, before=more),
            first_url=list_url(filters, limit=keep),
        )

    async def search_hits(
        request: Request,
    ) -> tuple[str, dict[str, str], list[SearchHit], str | None]:
        """The query, filters and page of a search request, and the next page's URL; a
        malformed query is a `SearchQueryError` (the callers show its message)."""
        params = request.query_params
        query = params.get("q", "")
        filters = {k: params[k] for k in ("cwd", "tag") if params.get(k)}
        limit = min(_int(request, "limit", SEARCH_LIMIT, low=1) or SEARCH_LIMIT, MAX_LIST_LIMIT)
        before_id = _int(request, "before", None, low=1)
        before = (
            None if before_id is None else SearchHit("", None, 0, "", "", "", (), None, before_id)
        )
        hits = await the_store.search(
            query, limit=limit, before=before, cwd=filters.get("cwd"), tag=filters.get("tag")
        )
        more = None
        if len(hits) == limit:
            more = "/search?" + urlencode({"q": query, **filters, "before": hits[-1].index_id})
        return query, filters, hits, more

    async def search_page(request: Request) -> Response:
        try:
            query, filters, hits, more = await search_hits(request)
        except SearchQueryError as exc:
            params = request.query_params
            return page(
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
            "search.html",
            query=query,
            hits=hits,
            error=None,
            next_url=more,
            cwd=filters.get("cwd"),
            tag=filters.get("tag"),
        )

    async def api_search(request: Request) -> Response:
        try:
            _, _, hits, more = await search_hits(request)
        except SearchQueryError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        found = [
            {
                "sessionId": h.session_id,
                "title": h.title,
                "seq": h.seq,
                "kind": h.kind,
                "type": h.event_type,
                "snippet": h.snippet,
                "marks": [list(m) for m in h.marks],
                "inHistory": h.in_history,
                "indexId": h.index_id,
                "url": hit_url(h.session_id, h.seq),
            }
            for h in hits
        ]
        return JSONResponse({"hits": found, "next": more})

    async def open_session(request: Request) -> Response:
        session_id = request.query_params.get("id", "").strip()
        if not session_id:
            return RedirectResponse("/", status_code=303)
        return RedirectResponse(session_url(session_id), status_code=303)

    async def session_page(request: Request) -> Response:
        session_id = _session_id(request)
        summary = await summary_or_404(session_id)
        last = summary.next_seq - 1
        at = views.clamp(_int(request, "at", None), last)
        start = views.page_start(at)
        # independent reads: the store runs them side by side (SQLite: two reader threads)
        header, turns, state, rows = await asyncio.gather(
            the_store.header(session_id),
            the_store.count(session_id, type="turn/start"),
            views.load_state(the_store, session_id, at, last, limit=message_limit),
            views.load_timeline(
                the_store, session_id, start, full_url=full_url(session_id), limit=message_limit
            ),
        )
        data = views.SessionPage(header.model_dump(), summary, turns, state, start, rows)
        return page(
            "session.html",
            page=data,
            state=state,
            start=start,
            rows=rows,
            session_id=session_id,
            next_seq=summary.next_seq,
            page_size=views.TIMELINE_PAGE,
            shown=views.MESSAGES_SHOWN,
            total=len(state.messages),
            messages=state.messages_json(views.MESSAGES_SHOWN),
            seqs=state.shown_seqs(views.MESSAGES_SHOWN),
            window=state.window(),
            metadata_json=dumps(dict(summary.metadata), indent=2),
        )

    # -- the JSON API --------------------------------------------------------------------------

    async def api_sessions(request: Request) -> Response:
        filters, limit, _, entries, more = await list_request(request)
        next_url = None
        if more is not None:
            keep = shown_limit(limit)
            next_url = list_url(filters, limit=keep, before=more, path="/api/sessions")
        return JSONResponse(
            {"sessions": [e.to_json() for e in entries], "next": more, "nextUrl": next_url}
        )

    async def api_state(request: Request) -> Response:
        session_id = _session_id(request)
        summary = await summary_or_404(session_id)
        last = summary.next_seq - 1
        at = views.clamp(_int(request, "at", None), last)
        state = await views.load_state(the_store, session_id, at, last, limit=message_limit)
        with_html = request.query_params.get("html") == "1"
        body = {"session": session_id, **state.to_json(with_messages=not with_html)}
        if with_html:
            body["html"] = {
                "todos": render_todos(state),
                "messages": render_messages(state, views.MESSAGES_SHOWN, session_id),
            }
        return JSONResponse(body)

    async def api_timeline(request: Request) -> Response:
        session_id = _session_id(request)
        summary = await summary_or_404(session_id)
        at = views.clamp(_int(request, "at", None), summary.next_seq - 1)
        start = views.page_start(at)
        rows = await views.load_timeline(
            the_store, session_id, start, full_url=full_url(session_id), limit=message_limit
        )
        html = render(
            "_timeline.html",
            session_id=session_id,
            start=start,
            rows=rows,
            next_seq=summary.next_seq,
            page_size=views.TIMELINE_PAGE,
        )
        return JSONResponse(
            {"session": session_id, "start": start, "next": summary.next_seq, "html": html}
        )

    async def api_events(request: Request) -> Response:
        session_id = _session_id(request)
        summary = await summary_or_404(session_id)
        from_seq = _int(request, "from", summary.next_seq)
        assert from_seq is not None
        resumed = request.headers.get("last-event-id", "").strip()
        if _SEQ_TEXT.fullmatch(resumed):  # a browser reconnecting: on after the last it had
            from_seq = int(resumed) + 1
        return StreamingResponse(
            _event_stream(the_store, session_id, from_seq, full_url(session_id), message_limit),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def api_message(request: Request) -> Response:
        session_id = _session_id(request)
        summary = await summary_or_404(session_id)
        seq = _int(request, "seq", None)
        if seq is None or seq >= summary.next_seq:
            raise HTTPException(404, f"no event at seq {seq} in session {session_id!r}")
        found = []
        async with views.closing(the_store.stream(session_id, seq, page_size=1)) as events:
            async for one in events:
                found.append(one)
                break
        event = found[0] if found else None
        if event is None or event.seq != seq:
            raise HTTPException(404, f"no event at seq {seq} in session {session_id!r}")
        text = views.full_text(event)
        return Response(text, media_type="text/plain; charset=utf-8")

    async def api_export(request: Request) -> Response:
        session_id = _session_id(request)
        await summary_or_404(session_id)

        async def lines() -> AsyncIterator[bytes]:
            async with views.closing(export_lines(the_store, session_id)) as exported:
                async for line in exported:
                    yield (escape_controls(line) + "\n").encode()

        filename = quote(f"{session_id}.jsonl", safe="")
        return StreamingResponse(
            lines(),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f"attachment; filename*=UTF-8''{filename}"},
        )

    async def api_fork(request: Request) -> Response:
        if not allow_writes:
            raise HTTPException(
                403, "this server is read-only: start it with --allow-writes to fork sessions"
            )
        if not _same_origin(request):
            raise HTTPException(403, "a fork must come from this server's own page")
        token = await _form_token(request)
        if token is None or not hmac.compare_digest(token.encode(), fork_token.encode()):
            raise HTTPException(403, "a fork needs this server's token: reload the page")
        session_id = _session_id(request)
        summary = await summary_or_404(session_id)
        at = _int(request, "at", None)
        if at is not None and at >= summary.next_seq:
            raise HTTPException(400, f"seq {at} is past the end of session {session_id!r}")
        try:
            log = await the_store.fork(session_id, at)
        except StructureError as exc:
            raise HTTPException(409, f"{exc}; pick a seq between turns") from None
        except SessionExistsError as exc:
            raise HTTPException(409, str(exc)) from None
        child = log.header.id
        return JSONResponse(
            {"id": child, "url": session_url(child), "inherited": log.header.seed_length},
            status_code=201,
        )

    # -- errors -----------------------------------------------------------------------------

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if _wants_json(request):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
        return page("error.html", exc.status_code, status=exc.status_code, message=exc.detail)

    async def library_error(request: Request, exc: Exception) -> Response:
        message = str(exc)
        if _wants_json(request):
            return JSONResponse({"error": message}, status_code=500)
        return page("error.html", 500, status=500, message=message)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await the_store.open()
        try:
            yield
        finally:
            if owned:
                await the_store.aclose()

    async def no_icon(request: Request) -> Response:
        return Response(status_code=204)

    routes = [
        Route("/", sessions_page),
        Route("/favicon.ico", no_icon),
        Route("/open", open_session),
        Route("/search", search_page),
        Route("/api/search", api_search),
        Route("/api/sessions", api_sessions),
        Route("/api/sessions/{session_id:path}/state", api_state),
        Route("/api/sessions/{session_id:path}/timeline", api_timeline),
        Route("/api/sessions/{session_id:path}/events", api_events),
        Route("/api/sessions/{session_id:path}/export", api_export),
        Route("/api/sessions/{session_id:path}/message", api_message),
        Route("/api/sessions/{session_id:path}/fork", api_fork, methods=["POST"]),
        Route("/sessions/{session_id:path}", session_page),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    middleware = [Middleware(_SecurityHeaders)]
    if allowed_hosts is not None:
        middleware.append(Middleware(_HostCheck, names=list(allowed_hosts)))
    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        HTTPException: http_error,
        TodoSessionsError: library_error,
    }
    app = Starlette(
        routes=routes, middleware=middleware, exception_handlers=handlers, lifespan=lifespan
    )
    app.state.store = the_store
    app.state.allow_writes = allow_writes
    app.state.fork_token = fork_token
    return app


async def _event_stream(
    store: SessionStore,
    session_id: str,
    from_seq: int,
    full_url: Callable[[int], str],
    limit: int,
) -> AsyncIterator[str]:
    """Server-sent events: ``append`` with ``{seq, type, next, html}`` for each event appended
    from ``from_seq`` on (read with `SessionStore.follow`), and a comment line when idle."""
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=1000)
    done = object()

    async def pump() -> None:
        try:
            async with views.closing(
                store.follow(session_id, from_seq, poll_interval=0.1)
            ) as events:
                async for event in events:
                    await queue.put(event)
        except SessionNotFoundError:
            pass
        finally:
            await queue.put(done)

    task = asyncio.create_task(pump())
    calls: dict[str, str] = {}
    try:
        yield ": following\n\n"
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), HEARTBEAT_SECONDS)
            except TimeoutError:
                yield ": idle\n\n"
                continue
            if item is done:
                yield "event: gone\ndata: {}\n\n"
                return
            row = views.cut_row(views.event_row(item, calls), full_url(item.seq), limit)
            payload = {
                "seq": item.seq,
                "type": item.type,
                "time": item.time,
                "updated": views.when(item.time),
                "html": render_row(row),
            }
            yield f"event: append\nid: {item.seq}\ndata: {json.dumps(payload)}\n\n"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
