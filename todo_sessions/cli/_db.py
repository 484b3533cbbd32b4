"""``--db``: whether a value names a database the command line can use."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from ..redact import mask_url
from ._options import UsageError

__all__ = ["ACCEPTED_DB", "check_db"]

ACCEPTED_DB = (
    "use sqlite:///path/to/file.db, postgresql://user@host/dbname, or a file path with a / "
    "or ending in .db, .sqlite or .sqlite3"
)
_PATH_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
"""What starts a URL (``sqlite:``, ``postgresql+asyncpg:``); one letter is a Windows drive."""


def check_db(value: str, source: str = "--db") -> str:
    """``value`` if it names a database the command line can use, else a `UsageError` saying
    what was wrong and what is accepted.

    Accepted: ``sqlite:///file`` (not in memory: the data would be gone when the command
    ends), ``postgresql://…/dbname`` naming its database (libpq's defaults would otherwise pick
    one), or a plain path that looks like one (a ``/`` or an SQLite suffix), so that a typo such
    as ``sqlite:/x`` never becomes a file of that name."""
    text = value
    shown = mask_url(text)

    def bad(problem: str) -> NoReturn:
        raise UsageError(f"{source} {shown!r} {problem}; {ACCEPTED_DB}")

    if not text.strip():
        raise UsageError(f"{source} is empty; {ACCEPTED_DB}")
    if "://" not in text:
        if _SCHEME.match(text):
            bad("is not a database URL (a URL has :// after its scheme)")
        path_like = "/" in text or os.sep in text or text.lower().endswith(_PATH_SUFFIXES)
        query = _PATH_QUERY.search(text)
        if query is not None and (
            path_like or text[: query.start()].lower().endswith(_PATH_SUFFIXES)
        ):
            bad(
                f"is a file path with a query string ({query.group()!r}): a plain path takes no "
                "parameters (the file would be named with them); drop it, or give a sqlite:/// "
                "URL"
            )
        if path_like:
            _check_path(Path(text).expanduser(), bad)
            return text
        bad("is neither a database URL nor a file path")
    try:
        url = make_url(text)
    except (ValueError, ArgumentError) as exc:
        if "int()" in str(exc):
            bad("has a port that is not a number")
        bad("is not a database URL")
    if url.port is not None and not 0 < url.port < 65536:
        bad("has a port outside 1..65535")
    backend = url.get_backend_name()
    if backend == "sqlite":
        database = url.database or ""
        if url.host:
            bad("has a host: an SQLite URL has three slashes (sqlite:///relative/file.db)")
        if not database or ":memory:" in database or url.query.get("mode") == "memory":
            bad("is an in-memory database, gone when the command ends")
    elif backend in ("postgresql", "postgres"):
        if not url.database:
            bad("names no database")
    else:
        bad("is an unsupported database URL")
    if backend == "sqlite":
        _check_path(Path(url.database or "").expanduser(), bad)
    return text


_PATH_QUERY = re.compile(r"\?[A-Za-z_][A-Za-z0-9_]*=[^/]*$")
"""``?name=value`` at the end of a plain path: URL parameters that a path cannot take."""


def _check_path(path: Path, bad: Callable[[str], NoReturn]) -> None:
    """A directory, or a symbolic link to nothing, is not a database file."""
    if path.is_dir():
        bad("is a directory")
    if path.is_symlink() and not path.exists():
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        bad(f"is a symbolic link to {target!r}, which does not exist")
