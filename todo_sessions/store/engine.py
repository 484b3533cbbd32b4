"""Database URLs and connection settings: what a store URL names, how its connections are set up.

Every SQLite connection gets WAL (except in memory), ``synchronous`` (FULL by default),
``foreign_keys=ON`` and a busy timeout; writes say ``BEGIN IMMEDIATE`` (so two processes never
deadlock upgrading a read lock). A new database file is created 0600, in directories 0700.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ..errors import NamespaceError, StoreError

__all__ = [
    "SQLiteOptions",
    "StoreURL",
    "ensure_private_file",
    "make_pg_engine",
    "parse_url",
    "sqlite_pragmas",
]


@dataclass(frozen=True, slots=True)
class SQLiteOptions:
    """Per-connection SQLite settings (docs/design.md, "Backends")."""

    journal_mode: str = "WAL"
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    busy_timeout_ms: int = 5000
    read_only: bool = False
    """Open the file with ``mode=ro``: reads work on a file (or directory) we cannot write."""

    def __post_init__(self) -> None:
        if self.synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"sqlite synchronous must be FULL or NORMAL, got {self.synchronous!r}")
        if self.journal_mode.upper() not in ("WAL", "DELETE", "TRUNCATE", "PERSIST", "MEMORY"):
            raise ValueError(f"unsupported sqlite journal mode {self.journal_mode!r}")
        if not isinstance(self.busy_timeout_ms, int) or self.busy_timeout_ms < 0:
            raise ValueError("busy_timeout_ms must be a non-negative integer")


@dataclass(frozen=True, slots=True)
class StoreURL:
    """A database URL normalised to an async driver, and what kind of database it names."""

    url: URL
    dialect: Literal["sqlite", "postgresql"]
    path: Path | None
    """The SQLite file, or None for an in-memory database or PostgreSQL."""
    connect_args: Mapping[str, Any] = field(default_factory=dict)
    """Driver arguments taken out of the URL's query (libpq spellings → asyncpg's)."""
    pooler: bool = False
    """PostgreSQL behind a transaction-pooling connection pooler (``?pgbouncer=true``)."""
    schema: str | None = None
    """The URL's ``schema`` parameter (a namespace: `namespace.resolve`), taken out of it."""
    table_prefix: str | None = None
    """The URL's ``table_prefix`` parameter, taken out of it."""
    given: str = ""
    """The URL (or path) as the caller wrote it, password masked: what messages show."""
    read_only: bool = False
    """An SQLite URL with ``?mode=ro``: open the file read-only (it must exist)."""

    @property
    def memory(self) -> bool:
        return self.dialect == "sqlite" and self.path is None

    def render(self) -> str:
        """The URL as given, with any password masked (in the user part and in a
        ``password`` parameter), for messages."""
        if self.given:
            return self.given
        url = self.url
        if self.schema is not None:
            url = url.update_query_dict({"schema": self.schema})
        if self.table_prefix is not None:
            url = url.update_query_dict({"table_prefix": self.table_prefix})
        return url.render_as_string(hide_password=True)


_USER_PASSWORD = re.compile(r"(://[^:/@?#]*:)[^@/?#]*@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def mask_password(url: str) -> str:
    """``url`` with the password of its user part and of a ``password=`` parameter shown as
    ``***``."""
    return _QUERY_PASSWORD.sub(r"\1***", _USER_PASSWORD.sub(r"\1***@", url))


def _given(url: str | URL | os.PathLike[str]) -> str:
    if isinstance(url, URL):
        return mask_password(url.render_as_string(hide_password=False))
    return mask_password(os.fspath(url))


_PATH_QUERY = re.compile(r"\?[A-Za-z_][A-Za-z0-9_]*=[^/]*$")
"""``?name=value`` ending a plain path: URL parameters, which a path cannot take."""

NAMESPACE_PARAMETERS = ("schema", "table_prefix")
"""URL parameters that name a namespace (docs/design.md, "Namespaces"), never the driver's."""


def _namespace_parameters(parsed: URL) -> tuple[URL, dict[str, str]]:
    """The URL without ``schema`` / ``table_prefix``, and their values (one each)."""
    found: dict[str, str] = {}
    for name in NAMESPACE_PARAMETERS:
        value = parsed.query.get(name)
        if value is None:
            continue
        if not isinstance(value, str):  # given twice: ('a', 'b')
            raise NamespaceError(
                f"the database URL gives {name} more than once", option=name, value=value
            )
        found[name] = value
    return (parsed.difference_update_query(found) if found else parsed), found


def parse_url(url: str | URL | os.PathLike[str]) -> StoreURL:
    """Accept ``sqlite:///file`` (any SQLite driver name: the store uses its own ``sqlite3``
    connections), ``postgresql://…`` or a plain path.

    The ``schema`` and ``table_prefix`` URL parameters name a namespace; they are taken out
    of the URL into `StoreURL.schema` / `StoreURL.table_prefix` (checked by
    `namespace.resolve` when a store or migration uses them)."""
    given = _given(url)
    if isinstance(url, os.PathLike) or (isinstance(url, str) and "://" not in url):
        path = Path(os.fspath(url)).expanduser().absolute()
        if _PATH_QUERY.search(path.name) and not path.exists():
            raise ValueError(
                f"{given!r} is a file path with a query string: a plain path takes no "
                "parameters (the file would be named with them); use a sqlite:/// URL"
            )
        return StoreURL(make_url(f"sqlite:///{path}"), "sqlite", path, given=given)
    parsed, names = _namespace_parameters(make_url(url))
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        database = parsed.database
        if not database or database == ":memory:" or parsed.query.get("mode") == "memory":
            return StoreURL(parsed, "sqlite", None, **names, given=given)  # type: ignore[arg-type]
        path = Path(database).expanduser().absolute()
        mode = parsed.query.get("mode")
        if mode not in (None, "ro", "rw", "rwc"):
            raise ValueError(f"mode={mode} in an SQLite URL: use ro, rw or rwc (or memory)")
        return StoreURL(
            parsed.set(database=str(path)),
            "sqlite",
            path,
            **names,  # type: ignore[arg-type]
            given=given,
            read_only=mode == "ro",
        )
    if backend in ("postgresql", "postgres"):
        query = dict(parsed.query)
        args: dict[str, Any] = {}
        if "sslmode" in query:  # libpq's name; asyncpg takes the same modes as ``ssl``
            args["ssl"] = query.pop("sslmode")
        if "application_name" in query:
            args["server_settings"] = {"application_name": query.pop("application_name")}
        if "connect_timeout" in query:
            try:
                args["timeout"] = float(query.pop("connect_timeout"))  # type: ignore[arg-type]
            except ValueError:
                raise ValueError("connect_timeout in the database URL must be a number") from None
        pooler = _flag(query.pop("pgbouncer", None), "pgbouncer")
        if pooler:
            # Transaction pooling hands each transaction to any server connection: nothing may
            # rely on a prepared statement outliving its transaction (docs/design.md,
            # "Behind a connection pooler").
            args["statement_cache_size"] = 0
            args["prepared_statement_name_func"] = _unique_statement_name
            query["prepared_statement_cache_size"] = "0"
        url_ = parsed.set(drivername="postgresql+asyncpg", query=query)
        return StoreURL(url_, "postgresql", None, args, pooler, **names, given=given)  # type: ignore[arg-type]
    raise ValueError(
        f"unsupported database URL {parsed.render_as_string()!r}: use sqlite or postgresql"
    )


def _flag(value: Any, name: str) -> bool:
    if value is None:
        return False
    text = str(value).lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} in the database URL must be true or false, got {value!r}")


def _unique_statement_name() -> str:
    """Names of SQLAlchemy's prepared statements behind a pooler: never reused, so two
    clients sharing a server connection never collide."""
    return f"__todo_sessions_{uuid.uuid4().hex}__"


def sqlite_pragmas(options: SQLiteOptions, *, memory: bool) -> list[str]:
    """The statements that configure one SQLite connection, busy timeout first."""
    pragmas = [f"PRAGMA busy_timeout = {int(options.busy_timeout_ms)}"]
    if not memory and not options.read_only:  # a read-only file keeps the mode it has
        pragmas.append(f"PRAGMA journal_mode = {options.journal_mode.upper()}")
    pragmas += [f"PRAGMA synchronous = {options.synchronous}", "PRAGMA foreign_keys = ON"]
    return pragmas


def ensure_private_file(path: Path) -> None:
    """Create the database file with mode 0600 (and missing directories with 0700)."""
    if path.exists():
        return
    try:
        missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
        for directory in reversed(missing):  # each new directory private, not just the last
            directory.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        if path.exists():
            return  # another process created it first
        raise StoreError(
            f"cannot create the database file {path}: a parent path is not a directory"
        ) from None
    except OSError as exc:
        raise StoreError(f"cannot create the database file {path}: {exc.strerror}") from exc
    os.close(fd)


def make_pg_engine(target: StoreURL, *, pool_size: int = 5, max_overflow: int = 10) -> AsyncEngine:
    """The SQLAlchemy async engine (asyncpg) of a PostgreSQL store."""
    return create_async_engine(
        target.url,
        connect_args=dict(target.connect_args),
        pool_size=pool_size,
        max_overflow=max_overflow,
        # No pre-ping: it costs three extra round trips per checkout (measured: single
        # appends 0.45x → 0.65x of plain asyncpg without it). A connection that died is
        # invalidated on its first error and replaced, and recycling bounds its age.
        pool_recycle=1800,
    )
