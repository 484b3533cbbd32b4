"""``--db``: whether a value names a database the command line can use.

The URL itself is read by the store's own parser (`todo_sessions.store.engine.parse_url`, the
one every store and migration uses), so the command line accepts exactly the URLs the library
connects to (libpq's multi-host ``h1:p1,h2:p2``, SQLAlchemy's ``?host=``, ...); the parser's
`ValueError` becomes a one-line usage error. On top of that the command line refuses what
would surprise a user of a command: an in-memory database (gone when the command ends), a
PostgreSQL URL naming no database (libpq would pick one), a directory, a dangling link, and
a typo such as ``sqlite:/x`` that would otherwise become a file of that name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from sqlalchemy.exc import ArgumentError

from .._redact import mask_url, mask_urls
from ..store.engine import StoreURL, parse_url
from ._options import UsageError

__all__ = ["ACCEPTED_DB", "check_db"]

ACCEPTED_DB = (
    "use sqlite:///path/to/file.db, postgresql://user@host/dbname, or a file path with a / "
    "or ending in .db, .sqlite or .sqlite3"
)
_PATH_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
"""What starts a URL (``sqlite:``, ``postgresql+asyncpg:``); one letter is a Windows drive."""
_PATH_QUERY = re.compile(r"\?[A-Za-z_][A-Za-z0-9_]*=[^/]*$")
"""``?name=value`` at the end of a plain path: URL parameters that a path cannot take."""
_BACKENDS = ("sqlite", "postgresql", "postgres")


def check_db(value: str, source: str = "--db") -> str:
    """``value`` if it names a database the command line can use, else a `UsageError` saying
    what was wrong and what is accepted: ``sqlite:///file`` (not in memory),
    ``postgresql://…/dbname`` naming its database (one host or several), or a plain path that
    looks like one (a ``/`` or an SQLite suffix)."""
    shown = mask_url(value)

    def bad(problem: str) -> NoReturn:
        raise UsageError(f"{source} {shown!r} {problem}; {ACCEPTED_DB}")

    if not value.strip():
        raise UsageError(f"{source} is empty; {ACCEPTED_DB}")
    if "://" not in value:
        _check_plain_path(value, bad)
    else:
        scheme = value.partition("://")[0]
        if not _SCHEME.match(scheme + ":"):
            bad("is not a database URL")
        if scheme.partition("+")[0].lower() not in _BACKENDS:
            bad("is an unsupported database URL")
    target = _parsed(value, source, shown, bad)
    if target.dialect == "sqlite":
        _check_sqlite(target, bad)
    else:
        _check_postgresql(target, bad)
    return value


def _parsed(value: str, source: str, shown: str, bad: Callable[[str], NoReturn]) -> StoreURL:
    """`parse_url`'s reading of ``value``; its refusal as a usage error."""
    try:
        return parse_url(value)
    except ArgumentError:
        bad("is not a database URL")
    except ValueError as exc:  # NamespaceError too (a parameter given twice)
        if "int()" in str(exc):  # SQLAlchemy's own reading of a single host's port
            bad("has a port that is not a number")
        raise UsageError(f"{source} {shown!r}: {mask_urls(str(exc))}; {ACCEPTED_DB}") from None


def _check_plain_path(text: str, bad: Callable[[str], NoReturn]) -> None:
    if _SCHEME.match(text):
        bad("is not a database URL (a URL has :// after its scheme)")
    path_like = "/" in text or os.sep in text or text.lower().endswith(_PATH_SUFFIXES)
    query = _PATH_QUERY.search(text)
    if query is not None and (path_like or text[: query.start()].lower().endswith(_PATH_SUFFIXES)):
        bad(
            f"is a file path with a query string ({query.group()!r}): a plain path takes no "
            "parameters (the file would be named with them); drop it, or give a sqlite:/// URL"
        )
    if not path_like:
        bad("is neither a database URL nor a file path")


def _check_sqlite(target: StoreURL, bad: Callable[[str], NoReturn]) -> None:
    if target.url.host:
        bad("has a host: an SQLite URL has three slashes (sqlite:///relative/file.db)")
    if target.path is None:
        bad("is an in-memory database, gone when the command ends")
    _check_path(target.path, bad)


def _check_postgresql(target: StoreURL, bad: Callable[[str], NoReturn]) -> None:
    if not target.url.database:
        bad("names no database")
    port = target.url.port
    ports = [p for _, p in target.hosts] or [5432 if port is None else port]
    if any(not 0 < port < 65536 for port in ports):
        bad("has a port outside 1..65535")


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
