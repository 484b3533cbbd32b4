"""HTML from the plain data of `filters`, `timeline` and `seq_state`: Jinja2 templates with
autoescaping on for everything.

Every value a template prints is escaped unless it is marked safe, and nothing here marks
stored text safe: ids, titles, messages, tool arguments and results always render as text.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup, escape

from .filters import ListFilters
from .seq_state import State
from .timeline import Row

__all__ = [
    "api_url",
    "hit_url",
    "list_url",
    "render",
    "render_messages",
    "render_row",
    "render_todos",
    "session_url",
    "when",
]

TEMPLATES = Path(__file__).parent / "templates"


def when(ms: int | None) -> str:
    """Epoch milliseconds as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if ms is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def session_url(session_id: str, at: int | None = None) -> str:
    """``/sessions/ID?at=SEQ`` with the id percent-encoded (an id may hold ``/`` or ``?``)."""
    url = f"/sessions/{quote(session_id, safe='')}"
    return url if at is None else f"{url}?at={at}"


def api_url(session_id: str, what: str, **params: Any) -> str:
    url = f"/api/sessions/{quote(session_id, safe='')}/{what}"
    query = {k: v for k, v in params.items() if v is not None}
    return f"{url}?{urlencode(query)}" if query else url


def list_url(
    filters: ListFilters | None = None,
    *,
    limit: int | None = None,
    before: str | None = None,
    path: str = "/",
) -> str:
    """The session list (``path``: the page, or ``/api/sessions``) with ``filters``, ``limit``
    and ``before`` in its query, percent-encoded."""
    query = dict((filters or ListFilters()).params())
    if limit is not None:
        query["limit"] = str(limit)
    if before is not None:
        query["before"] = before
    return f"{path}?{urlencode(query)}" if query else path


def tag_url(tag: str) -> str:
    """The sessions with this tag."""
    return list_url(ListFilters(tag=tag))


def children_url(session_id: str) -> str:
    """The forks and sub-agent sessions of this session."""
    return list_url(ListFilters(parent=session_id))


def hit_url(session_id: str, seq: int) -> str:
    """The session opened at a search hit's seq, scrolled to its row."""
    return f"{session_url(session_id, at=seq)}#seq-{seq}"


def snippet_html(snippet: str, marks: Any) -> Markup:
    """A search snippet as HTML: every piece escaped, the matched words in ``<mark>``."""
    out, at = [], 0
    for start, end in marks:
        if start < at or end > len(snippet):
            continue
        out += [escape(snippet[at:start]), Markup("<mark>"), escape(snippet[start:end])]
        out.append(Markup("</mark>"))
        at = end
    out.append(escape(snippet[at:]))
    return Markup("").join(out)


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,  # every template, whatever its name
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        session_url=session_url,
        api_url=api_url,
        when=when,
        list_url=list_url,
        tag_url=tag_url,
        children_url=children_url,
        hit_url=hit_url,
        snippet_html=snippet_html,
    )
    return env


ENV = _env()


def render(template: str, **context: Any) -> str:
    return ENV.get_template(template).render(**context)


def render_row(row: Row) -> str:
    return ENV.get_template("_row.html").render(row=row)


def render_todos(state: State) -> str:
    return ENV.get_template("_todos.html").render(state=state)


def render_messages(state: State, shown: int, session_id: str = "") -> str:
    """The message pane: the last ``shown`` messages of the window of ``state.at``."""
    return ENV.get_template("_messages.html").render(
        state=state,
        total=len(state.messages),
        messages=state.messages_json(shown),
        seqs=state.shown_seqs(shown),
        shown=shown,
        window=state.window(),
        session_id=session_id,
    )
