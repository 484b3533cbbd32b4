"""``session/list`` pieces: cursors, timestamps and `SessionInfo` entries. Pure: no I/O.

- A cursor is the keyset position of a page's last session, ``(updated_at, id)``, with the
  store's id, as unpadded base64url JSON: opaque to the client, stable while sessions are
  appended (a session with new activity moves to the front, never into a later page twice).
  `decode_cursor` raises `CursorError` for anything malformed or from another store.
- `session_info`: one store summary as the schema's `SessionInfo`; ``title`` is the
  summary's, else the first line of the session's first user message (`first_line`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..core.envelope import MAX_INT
from ..core.header import check_session_id
from ..errors import InvalidEventError
from ..store.results import SessionSummary
from . import _sdk

__all__ = [
    "TITLE_LIMIT",
    "CursorError",
    "check_cwd",
    "decode_cursor",
    "encode_cursor",
    "first_line",
    "iso_time",
    "session_info",
]

TITLE_LIMIT = 120
"""A title taken from a user message is cut to its first line and at most this many chars."""

_CURSOR_VERSION = 1


class CursorError(ValueError):
    """A ``session/list`` cursor this agent did not hand out (malformed, or another store's)."""


def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC, e.g. ``2026-12-01T20:56:35.120Z``."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def encode_cursor(store_id: str, updated_at: int, session_id: str) -> str:
    """The cursor of the page that follows the session ``(updated_at, session_id)``."""
    payload = {"v": _CURSOR_VERSION, "store": store_id, "u": updated_at, "id": session_id}
    raw = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, store_id: str) -> tuple[int, str]:
    """``(updated_at, session_id)`` of a cursor from `encode_cursor` for this store."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        payload = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise CursorError("the cursor is not one this agent handed out") from None
    if not isinstance(payload, dict) or payload.get("v") != _CURSOR_VERSION:
        raise CursorError("the cursor is not one this agent handed out")
    updated_at, session_id = payload.get("u"), payload.get("id")
    if type(updated_at) is not int or not 0 <= updated_at <= MAX_INT:
        raise CursorError("the cursor is not one this agent handed out")
    try:
        checked = check_session_id(session_id)
    except InvalidEventError:  # too long, empty, control characters, lone surrogates
        raise CursorError("the cursor is not one this agent handed out") from None
    if payload.get("store") != store_id:
        raise CursorError("the cursor comes from another session store")
    return updated_at, checked


def check_cwd(cwd: Any) -> str | None:
    """A ``session/list`` ``cwd`` filter as the store can take it, else `CursorError`'s
    sibling `ValueError` naming the field: a string of at most 4,096 characters with no NUL
    and no lone surrogate (which no database stores), or None."""
    if cwd is None:
        return None
    if not isinstance(cwd, str) or len(cwd) > 4096 or "\x00" in cwd:
        raise ValueError("cwd must be a path of at most 4096 characters without NUL")
    try:
        cwd.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("cwd must be valid Unicode (it holds a lone surrogate)") from None
    return cwd


def cursor_position(updated_at: int, session_id: str) -> SessionSummary:
    """A summary carrying only the keyset position, for ``store.list(before=...)``."""
    return SessionSummary(
        id=session_id, created_at=0, updated_at=updated_at, cwd=None, title=None, next_seq=0,
        revision="",
    )  # fmt: skip


def first_line(message: Mapping[str, Any]) -> str | None:
    """The first non-empty line of a ``user/message`` payload's text, cut to `TITLE_LIMIT`."""
    content = message.get("content")
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list):
        texts = [
            block["text"]
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
            if isinstance(block.get("text"), str)
        ]
    else:
        return None
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            if line:
                return line if len(line) <= TITLE_LIMIT else line[: TITLE_LIMIT - 1] + "…"
    return None


def session_info(summary: SessionSummary, title: str | None) -> _sdk.SessionInfo:
    """The `SessionInfo` of a listed session (``title`` as `session_title` chose it).

    ``_meta``: ``tags``, ``eventCount`` (the session's events), ``openTodos`` (the todo list
    has an item pending or in progress) and, for a fork or a sub-agent's session,
    ``parentSessionId``.
    """
    meta: dict[str, Any] = {
        "tags": list(summary.tags),
        "eventCount": summary.next_seq,
        "openTodos": summary.open_todos,
    }
    if summary.parent is not None:
        meta["parentSessionId"] = summary.parent
    return _sdk.SessionInfo(
        session_id=summary.id,
        cwd=summary.cwd or "",
        title=title,
        updated_at=iso_time(summary.updated_at),
        field_meta=meta,
    )
