"""Reading opencode's sessions: its SQLite database, strictly read-only, or an ``opencode
export`` file; and writing a session back as ``opencode export`` writes it.

opencode (``opencode-ai``) keeps every session in one SQLite database in WAL mode,
``$XDG_DATA_HOME/opencode/opencode.db`` (``~/.local/share/opencode/opencode.db``, or
``$OPENCODE_DB``): a ``session`` row per session (columns), a ``message`` row per message and a
``part`` row per part of a message (each a ``data`` column of JSON). ``opencode export`` writes
one session as ``{"info": <session>, "messages": [{"info": <message>, "parts": [...]}]}``:
the session built from its row's columns, each message its ``data`` with ``id`` and
``sessionID`` after it, each part its ``data`` with ``id``, ``sessionID`` and ``messageID``.

The database is opened with ``mode=ro`` (never ``immutable``: opencode may be writing) and
read in one read transaction, so one import sees one consistent state of it while opencode
keeps running; nothing is ever written to it.
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

__all__ = [
    "SQLITE_MAGIC",
    "DbReader",
    "Snapshot",
    "default_paths",
    "export_text",
    "read_db_session",
    "read_db_sessions",
    "read_export",
    "session_info",
]

SQLITE_MAGIC = b"SQLite format 3\x00"


def default_paths() -> list[Path]:
    """``$OPENCODE_DB`` when set, else opencode's data directory."""
    configured = os.environ.get("OPENCODE_DB")
    if configured:
        return [Path(configured)]
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return [Path(data) / "opencode"]


@dataclass
class Snapshot:
    """One session as opencode shows it: its info and its messages (``{info, parts}``), and
    the session's row when it was read from a database (None for an export file)."""

    info: dict[str, Any]
    messages: list[dict[str, Any]]
    row: dict[str, Any] | None = None


# -- the database ----------------------------------------------------------------------------


@contextmanager
def _reading(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection inside one read transaction (rolled back, never committed)."""
    uri = f"{path.absolute().as_uri()}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True, isolation_level=None, timeout=10)) as db:
        db.row_factory = sqlite3.Row
        db.execute("BEGIN")
        try:
            yield db
        finally:
            db.execute("ROLLBACK")


_FINGERPRINTS = """
SELECT s.id, s.parent_id,
       s.time_updated || '/' ||
       (SELECT count(*) || ':' || ifnull(max(time_updated), '') FROM message
        WHERE session_id = s.id) || '/' ||
       (SELECT count(*) || ':' || ifnull(max(time_updated), '') FROM part
        WHERE session_id = s.id) AS fingerprint
FROM session s ORDER BY s.time_created, s.id
"""


def read_db_sessions(path: Path) -> list[tuple[str, str | None, str]]:
    """``(id, parent_id, fingerprint)`` of every session in the database, oldest first. The
    fingerprint (the row's and its messages' and parts' counts and latest ``time_updated``)
    changes when opencode writes to the session."""
    with _reading(path) as db:
        rows = db.execute(_FINGERPRINTS)
        return [(row["id"], row["parent_id"], row["fingerprint"]) for row in rows]


def _json_column(value: Any) -> Any:
    if isinstance(value, str | bytes):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _number(value: Any) -> Any:
    """A REAL column as JavaScript has it: integral values are integers."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def session_info(row: dict[str, Any]) -> dict[str, Any]:
    """The session info ``opencode export`` shows for a ``session`` row (its ``fromRow``):
    the same keys in the same order, absent ones left out."""
    r = {k: _json_column(v) if k in _JSON_COLUMNS else _number(v) for k, v in row.items()}
    summary: dict[str, Any] | None = None
    if any(r.get(f"summary_{k}") is not None for k in ("additions", "deletions", "files")):
        summary = {k: r.get(f"summary_{k}") or 0 for k in ("additions", "deletions", "files")}
        if r.get("summary_diffs") is not None:
            summary["diffs"] = r["summary_diffs"]
    model = r.get("model")
    if isinstance(model, dict):
        model = {"id": model.get("id"), "providerID": model.get("providerID")}
        model["variant"] = r["model"].get("variant")
    tokens = {"input": r.get("tokens_input"), "output": r.get("tokens_output")}
    tokens["reasoning"] = r.get("tokens_reasoning")
    tokens["cache"] = {"read": r.get("tokens_cache_read"), "write": r.get("tokens_cache_write")}
    time = {"created": r.get("time_created"), "updated": r.get("time_updated")}
    time.update(compacting=r.get("time_compacting"), archived=r.get("time_archived"))
    info: dict[str, Any] = {
        "id": r["id"],
        "slug": r.get("slug"),
        "projectID": r.get("project_id"),
        "workspaceID": r.get("workspace_id"),
        "directory": r.get("directory"),
        "path": r.get("path"),
        "parentID": r.get("parent_id"),
        "title": r.get("title"),
        "agent": r.get("agent"),
        "model": {k: v for k, v in model.items() if v is not None} if model else None,
        "version": r.get("version"),
        "summary": summary,
        "cost": r.get("cost"),
        "tokens": tokens,
        "share": {"url": r["share_url"]} if r.get("share_url") else None,
        "metadata": r.get("metadata"),
        "revert": r.get("revert"),
        "permission": r.get("permission"),
        "time": {k: v for k, v in time.items() if v is not None},
    }
    return {k: v for k, v in info.items() if v is not None}


_JSON_COLUMNS = frozenset({"summary_diffs", "metadata", "revert", "permission", "model"})


def _with_ids(data: str, **ids: str) -> dict[str, Any]:
    parsed = json.loads(data)
    if not isinstance(parsed, dict):
        raise ValueError(f"not a JSON object: {data[:80]!r}")
    for key in ids:
        parsed.pop(key, None)
    return {**parsed, **ids}


def read_db_session(path: Path, session_id: str) -> Snapshot | None:
    """One session of the database as ``opencode export`` would show it, read in one read
    transaction; None when the database has no such session."""
    with _reading(path) as db:
        return _snapshot(db, session_id)


class DbReader:
    """`read_db_session` over one connection, for many sessions of one database: each
    session still read in a read transaction of its own (rolled back), one at a time (a
    lock: the threads of `asyncio.to_thread` share it). A new connection reads the database's
    schema before its first query, which cost more than reading a small session."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def read(self, session_id: str) -> Snapshot | None:
        with self._lock:
            if self._db is None:
                uri = f"{self.path.absolute().as_uri()}?mode=ro"
                self._db = sqlite3.connect(
                    uri, uri=True, isolation_level=None, timeout=10, check_same_thread=False
                )
                self._db.row_factory = sqlite3.Row
            self._db.execute("BEGIN")
            try:
                return _snapshot(self._db, session_id)
            finally:
                self._db.execute("ROLLBACK")

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def _snapshot(db: sqlite3.Connection, session_id: str) -> Snapshot | None:
    found = db.execute("SELECT * FROM session WHERE id = ?", (session_id,)).fetchone()
    if found is None:
        return None
    row = dict(found)
    messages: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    query = "SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id"
    for message in db.execute(query, (session_id,)):
        info = _with_ids(message["data"], id=message["id"], sessionID=session_id)
        entry: dict[str, Any] = {"info": info, "parts": []}
        messages.append(entry)
        by_id[message["id"]] = entry
    query = "SELECT id, message_id, data FROM part WHERE session_id = ? ORDER BY message_id, id"
    for part in db.execute(query, (session_id,)):
        owner = by_id.get(part["message_id"])
        if owner is not None:
            ids = {"id": part["id"], "sessionID": session_id, "messageID": part["message_id"]}
            owner["parts"].append(_with_ids(part["data"], **ids))
    return Snapshot(session_info(row), messages, {k: _number(v) for k, v in row.items()})


# -- an export file --------------------------------------------------------------------------


def read_export(path: Path) -> Snapshot:
    """The session of an ``opencode export`` file; ``ValueError`` when it is not one."""
    data = json.loads(path.read_bytes().decode("utf-8"))
    problem = export_problem(data)
    if problem:
        raise ValueError(problem)
    return Snapshot(data["info"], data["messages"])


def export_problem(data: Any) -> str | None:
    """Why ``data`` is not the JSON of ``opencode export``, or None."""
    if not isinstance(data, dict) or not isinstance(data.get("info"), dict):
        return "not an opencode export (no session info)"
    if not isinstance(data["info"].get("id"), str) or not data["info"]["id"]:
        return "not an opencode export (the session info has no id)"
    messages = data.get("messages")
    if not isinstance(messages, list) or not all(
        isinstance(m, dict)
        and isinstance(m.get("info"), dict)
        and isinstance(m["info"].get("id"), str)
        and isinstance(m.get("parts"), list)
        for m in messages
    ):
        return "not an opencode export (messages are not a list of {info, parts})"
    return None


# -- writing as opencode export does ---------------------------------------------------------


def _js_number(value: float) -> str:
    """A float as JavaScript's ``String(number)`` writes it (``JSON.stringify``)."""
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    sign, digits_t, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digits_t))
    k, n = len(digits), len(digits) + exponent
    out = ""
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        out = "0." + "0" * -n + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        out = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return ("-" if sign else "") + out


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _string(value: str) -> str:
    """A string as ``JSON.stringify`` writes it: non-ASCII characters as they are, a lone
    surrogate escaped (``\\udc80``)."""
    return _LONE_SURROGATE.sub(
        lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False)
    )


def _write(value: Any, indent: str, out: list[str]) -> None:
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = indent + "  "
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            out.append(("," if i else "") + "\n" + inner + _string(key))
            out.append(": ")
            _write(item, inner, out)
        out.append("\n" + indent + "}")
    elif isinstance(value, list):
        if not value:
            out.append("[]")
            return
        inner = indent + "  "
        out.append("[")
        for i, item in enumerate(value):
            out.append(("," if i else "") + "\n" + inner)
            _write(item, inner, out)
        out.append("\n" + indent + "]")
    elif isinstance(value, float):
        out.append(_js_number(value))
    else:
        out.append(_string(value) if isinstance(value, str) else json.dumps(value))


def export_text(info: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    """``{info, messages}`` as ``opencode export`` prints it: ``JSON.stringify(…, null, 2)``
    and a newline."""
    out: list[str] = []
    _write({"info": info, "messages": messages}, "", out)
    return "".join(out) + "\n"
