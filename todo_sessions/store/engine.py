"""Database URLs and connection settings: what a store URL names, how its connections are set up.

Every SQLite connection gets WAL (except in memory), ``synchronous`` (FULL by default),
``foreign_keys=ON`` and a busy timeout; writes say ``BEGIN IMMEDIATE`` (so two processes never
deadlock upgrading a read lock). A new database file is created 0600, in directories 0700.
"""

from __future__ import annotations

import math
import os
import random
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from .._redact import mask_url
from ..errors import NamespaceError, StoreError
from .connecting import COMMAND_TIMEOUT, HOST_CONNECT_TIMEOUT, Unresponsive, tries_each_host

__all__ = [
    "HostChoice",
    "SQLiteOptions",
    "StoreURL",
    "ensure_private_file",
    "make_pg_engine",
    "parse_url",
    "replica_url",
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
    hosts: tuple[tuple[str, int], ...] = ()
    """PostgreSQL: every ``(host, port)`` of a multi-host URL, in order (libpq's
    ``h1:p1,h2:p2`` or SQLAlchemy's repeated ``?host=``); empty for one host."""
    load_balance: bool = False
    """``load_balance_hosts=random``: each new connection tries the hosts in random order."""
    replica: str | None = None
    """The ``replica`` URL parameter (``host:port[,host:port]``): a read replica's hosts, the
    rest of the URL the same (`replica_url`)."""
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


def mask_password(url: str) -> str:
    """``url`` with its passwords shown as ``***`` (`todo_sessions._redact.mask_url`)."""
    return mask_url(url)


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
        return _plain_path(url, given)
    hosts: tuple[tuple[str, int], ...] = ()
    if isinstance(url, str):
        url, hosts = _split_hosts(url)
    parsed, names = _namespace_parameters(make_url(url))
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_url(parsed, names, given)
    if backend in ("postgresql", "postgres"):
        return _postgres_url(parsed, names, given, hosts)
    raise ValueError(
        f"unsupported database URL {parsed.render_as_string()!r}: use sqlite or postgresql"
    )


def _plain_path(url: str | os.PathLike[str], given: str) -> StoreURL:
    path = Path(os.fspath(url)).expanduser().absolute()
    if _PATH_QUERY.search(path.name) and not path.exists():
        raise ValueError(
            f"{given!r} is a file path with a query string: a plain path takes no "
            "parameters (the file would be named with them); use a sqlite:/// URL"
        )
    return StoreURL(make_url(f"sqlite:///{path}"), "sqlite", path, given=given)


def _sqlite_url(parsed: URL, names: dict[str, str], given: str) -> StoreURL:
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


def _libpq_parameters(query: dict[str, Any]) -> dict[str, Any]:
    """asyncpg's arguments for the libpq parameters of ``query`` (taken out of it)."""
    args: dict[str, Any] = {}
    if "sslmode" in query:  # libpq's name; asyncpg takes the same modes as ``ssl``
        args["ssl"] = query.pop("sslmode")
    if "application_name" in query:
        args["server_settings"] = {"application_name": query.pop("application_name")}
    if "connect_timeout" in query:
        try:
            args["timeout"] = float(query.pop("connect_timeout"))
        except ValueError:
            args["timeout"] = math.nan
        if not 0 < args["timeout"] <= 86_400:  # nan, inf, 0 and below too
            raise ValueError(
                "connect_timeout in the database URL must be seconds above 0, at most 86400"
            )
    return args


def _command_timeout(value: Any) -> float | None:
    """``command_timeout=`` of a multi-host URL: seconds, 0 for none; `COMMAND_TIMEOUT` unset."""
    if value is None:
        return COMMAND_TIMEOUT
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError("command_timeout in the database URL must be a number") from None
    return seconds if seconds > 0 else None


def _postgres_url(
    parsed: URL, names: dict[str, str], given: str, hosts: tuple[tuple[str, int], ...]
) -> StoreURL:
    query = dict(parsed.query)
    args = _libpq_parameters(query)
    parsed, hosts = _query_hosts(parsed, query, hosts)
    if "target_session_attrs" in query:
        args["target_session_attrs"] = _session_attrs(query.pop("target_session_attrs"))
    balance = _load_balance(query.pop("load_balance_hosts", None))
    replica = query.pop("replica", None)
    if replica is not None and not isinstance(replica, str):
        raise ValueError("replica in the database URL is given more than once")
    if hosts:
        args["host"] = [h for h, _ in hosts]
        args["port"] = [p for _, p in hosts]
        # an unresponsive host is given up within bounded times (store/connecting.py)
        args.setdefault("timeout", HOST_CONNECT_TIMEOUT)
        args["command_timeout"] = _command_timeout(query.pop("command_timeout", None))
    pooler = _flag(query.pop("pgbouncer", None), "pgbouncer")
    if pooler:
        # Transaction pooling hands each transaction to any server connection: nothing may
        # rely on a prepared statement outliving its transaction (docs/design.md,
        # "Behind a connection pooler").
        args["statement_cache_size"] = 0
        args["prepared_statement_name_func"] = _unique_statement_name
        query["prepared_statement_cache_size"] = "0"
    return StoreURL(
        parsed.set(drivername="postgresql+asyncpg", query=query),
        "postgresql",
        None,
        args,
        pooler,
        **names,  # type: ignore[arg-type]  # the namespace's two strings
        given=given,
        hosts=hosts,
        load_balance=balance,
        replica=replica,
    )


_NETLOC = re.compile(
    r"^(?P<scheme>[^:/?#]+://)(?P<user>[^@/?#]*@)?(?P<hosts>[^/?#]*)(?P<rest>.*)$", re.S
)
_SESSION_ATTRS = ("any", "read-write", "read-only", "primary", "standby", "prefer-standby")


def _host_port(spec: str, default_port: int = 5432) -> tuple[str, int]:
    """``host[:port]`` (``[v6]:port`` too) as ``(host, port)``."""
    host, port = spec, ""
    if spec.startswith("["):
        host, _, after = spec[1:].partition("]")
        port = after[1:] if after.startswith(":") else ""
    elif spec.count(":") == 1:
        host, port = spec.split(":")
    if not host:
        raise ValueError(f"a host of the database URL is empty ({spec!r})")
    try:
        return host, int(port) if port else default_port
    except ValueError:
        raise ValueError(f"the port of host {host!r} in the database URL is not a number") from None


def _split_hosts(url: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    """libpq's multi-host form (``postgresql://u@h1:5432,h2:5433/db``): the URL with its first
    host only (what SQLAlchemy parses), and every host. One host: the URL unchanged, ()."""
    found = _NETLOC.match(url)
    if found is None or "," not in found["hosts"]:
        return url, ()
    hosts = tuple(_host_port(spec) for spec in found["hosts"].split(","))
    first, port = hosts[0]
    shown = f"[{first}]" if ":" in first else first
    rebuilt = f"{found['scheme']}{found['user'] or ''}{shown}:{port}{found['rest']}"
    return rebuilt, hosts


def _query_hosts(
    parsed: URL, query: dict[str, Any], hosts: tuple[tuple[str, int], ...]
) -> tuple[URL, tuple[tuple[str, int], ...]]:
    """SQLAlchemy's multi-host forms (``?host=h1:p1&host=h2:p2``, ``?host=h1,h2&port=p1,p2``)
    taken out of ``query`` into the host list (the URL's own host then names the first)."""
    given = query.pop("host", None)
    ports = query.pop("port", None)
    if given is None:
        if ports is not None and hosts:  # libpq's h1,h2/db?port=p1,p2
            port_list = list(ports) if isinstance(ports, tuple) else str(ports).split(",")
            if len(port_list) not in (1, len(hosts)):
                raise ValueError("the database URL's hosts and port= list do not match")
            specs = [
                f"{h}:{port_list[min(i, len(port_list) - 1)]}" for i, (h, _) in enumerate(hosts)
            ]
            hosts = tuple(_host_port(spec) for spec in specs)
            return parsed.set(host=hosts[0][0], port=hosts[0][1]), hosts
        if ports is not None:
            query["port"] = ports
        return parsed, hosts
    if hosts:
        raise ValueError("the database URL names hosts twice (h1,h2 and ?host=)")
    specs = list(given) if isinstance(given, tuple) else str(given).split(",")
    if ports is not None:
        port_list = list(ports) if isinstance(ports, tuple) else str(ports).split(",")
        if len(port_list) not in (1, len(specs)) or any(":" in s for s in specs):
            raise ValueError("the database URL's host= and port= lists do not match")
        specs = [f"{h}:{port_list[min(i, len(port_list) - 1)]}" for i, h in enumerate(specs)]
    if len(specs) == 1:  # one host (a socket directory, say): SQLAlchemy's as it was
        query["host"] = given
        if ports is not None:
            query["port"] = ports
        return parsed, hosts
    listed = tuple(_host_port(spec, parsed.port or 5432) for spec in specs)
    first, port = listed[0]
    return parsed.set(host=first, port=port), listed


def _session_attrs(value: Any) -> str:
    if value not in _SESSION_ATTRS:
        raise ValueError(
            f"target_session_attrs in the database URL must be one of {', '.join(_SESSION_ATTRS)}"
            f", got {value!r}"
        )
    return str(value)


def _load_balance(value: Any) -> bool:
    if value is None or value == "disable":
        return False
    if value == "random":
        return True
    raise ValueError(
        f"load_balance_hosts in the database URL must be disable or random, got {value!r}"
    )


def replica_url(target: StoreURL) -> StoreURL | None:
    """The read replica named by ``target``'s ``replica=`` parameter: the same URL (user,
    database, parameters) on the replica's hosts; None without one."""
    if target.replica is None:
        return None
    hosts = tuple(_host_port(spec, 5432) for spec in target.replica.split(","))
    args = {k: v for k, v in target.connect_args.items() if k not in ("host", "port")}
    args.pop("target_session_attrs", None)  # a replica is read from whatever it is
    if len(hosts) > 1:
        args["host"] = [h for h, _ in hosts]
        args["port"] = [p for _, p in hosts]
    url = target.url.set(host=hosts[0][0], port=hosts[0][1])
    shown = ",".join(f"{h}:{p}" for h, p in hosts)
    return StoreURL(
        url,
        "postgresql",
        None,
        args,
        target.pooler,
        schema=target.schema,
        table_prefix=target.table_prefix,
        given=f"{target.render()} (replica {shown})",
        hosts=hosts if len(hosts) > 1 else (),
        load_balance=target.load_balance,
    )


class HostChoice:
    """How one engine picks among a multi-host URL's hosts, per new connection: in random
    order (``load_balance_hosts=random``), and, once a write has reached a standby, only a
    server that takes writes (``target_session_attrs=read-write``; asyncpg then passes over the
    standby to the next host)."""

    __slots__ = ("_several", "_writable_only", "load_balance", "unresponsive")

    def __init__(self, target: StoreURL) -> None:
        self.load_balance = target.load_balance
        self._several = bool(target.hosts)
        self._writable_only = False
        self.unresponsive = Unresponsive()
        """Hosts that timed out lately: tried last (`connecting.Unresponsive`)."""

    @property
    def writable_only(self) -> bool:
        return self._writable_only

    @writable_only.setter
    def writable_only(self, value: bool) -> None:
        # One host: nowhere else to go (its reads still work on a standby)
        self._writable_only = value and self._several

    def apply(self, cparams: dict[str, Any], info: dict[Any, Any] | None = None) -> None:
        hosts, ports = cparams.get("host"), cparams.get("port")
        if self.load_balance and isinstance(hosts, list) and isinstance(ports, list):
            order = random.sample(range(len(hosts)), len(hosts))
            cparams["host"] = [hosts[i] for i in order]
            cparams["port"] = [ports[i] for i in order]
        self.unresponsive.arrange(cparams)
        if self.writable_only and cparams.get("target_session_attrs") in (
            None,
            "any",
            "prefer-standby",
        ):
            cparams["target_session_attrs"] = "read-write"
        if tries_each_host(cparams):  # each host within its own timeout (store/connecting.py)
            cparams["async_creator_fn"] = self.unresponsive.connector(info)


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


def make_pg_engine(
    target: StoreURL,
    *,
    pool_size: int = 5,
    max_overflow: int = 10,
    hosts: HostChoice | None = None,
) -> AsyncEngine:
    """The SQLAlchemy async engine (asyncpg) of a PostgreSQL store; ``hosts`` picks among a
    multi-host URL's hosts for each new connection."""
    engine = create_async_engine(
        target.url,
        connect_args=dict(target.connect_args),
        pool_size=pool_size,
        max_overflow=max_overflow,
        # No pre-ping: it costs three extra round trips per checkout (measured: single
        # appends 0.45x → 0.65x of plain asyncpg without it). A connection that died is
        # invalidated on its first error and replaced, and recycling bounds its age.
        pool_recycle=1800,
    )
    if hosts is not None:
        choice = hosts

        @event.listens_for(engine.sync_engine, "do_connect")
        def _pick_hosts(_dialect: Any, record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
            choice.apply(cparams, None if record is None else record.info)

    return engine
