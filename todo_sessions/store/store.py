"""`SessionStore`: the session log on SQLite or PostgreSQL.

The store is a facade of a backend's recorder (`recorder.Recorder`, the contract: the only
code that talks to the database) with what is the same on every backend. It is composed of
parts it owns, each a plain class in a module of its own, built with the state they share and
the other parts it uses (none inherits from another): the core (`base.StoreCore`: settings,
opening and closing, the recorder and the one way into it), reads and projections
(`reading`), the validated append, create and delete (`writing`), leases (`leasing`),
checkpoints, resume, crash repair and fork (`repair`), paged streams and follow (`streams`),
listing and metadata (`listing`), search (`finding`), retention (`retention`). Each public
method is one call into its part (`operations.StoreOperations`, where they are written and
documented); this module builds the parts. The retry on a seq conflict is `retry`. It returns
values (`SessionEvent`, `StoredLog`, `SessionSummary`), never rows or connections, and
translates every driver exception at this boundary (`translate_errors`). See docs/design.md,
"The store contract".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import TracebackType
from typing import Literal, Self

from sqlalchemy.engine import URL

from .base import StoreCore, default_url, wall_clock_ms
from .children import ChildSession, list_children
from .finding import Finding
from .leasing import Leasing
from .listing import Listing
from .operations import StoreOperations
from .reading import Reading
from .repair import Repair
from .retention import Retention
from .streams import Streams
from .writing import Writing

__all__ = ["ChildSession", "SessionStore", "default_url", "wall_clock_ms"]


class SessionStore(StoreOperations):
    """The append-only session log.

    ``SessionStore(url)`` takes a SQLAlchemy-style URL (``sqlite:///path``,
    ``postgresql://user@host/db``) or a plain file path; with no URL it uses
    ``TODO_SESSIONS_URL`` or an SQLite file in the user's data directory. Use it as an async
    context manager (or call `open` / `aclose`). Opening migrates the database to the newest
    schema unless ``migrate=False``, in which case an unmigrated database raises `SchemaError`.

    SQLite settings: ``journal_mode`` (WAL), ``synchronous`` ("FULL" or "NORMAL"),
    ``busy_timeout_ms`` (5000), ``read_only`` (default: read-only exactly when the file
    exists and this process may not write it or its directory; reads work, appends and
    deletes raise `StoreError`, an old schema is a `SchemaError`). PostgreSQL: ``pool_size``;
    behind PgBouncer in transaction mode add ``?pgbouncer=true`` to the URL (no prepared
    statement outlives its transaction) and give ``listen_url``, a direct connection for
    `follow`'s LISTEN (without it, followers poll). Several hosts (libpq's
    ``postgresql://u@h1:5432,h2:5433/db?target_session_attrs=read-write``,
    ``load_balance_hosts=random``): after a failover the store goes on with the new primary,
    retrying for ``reconnect_timeout`` seconds (default 15 with several hosts, 0 with one).
    ``read_url`` (or the URL's ``?replica=host:port``): a read replica for replay, list and
    follow, still reading this store's own writes (it waits up to ``replica_wait`` seconds
    for the replica, then reads the primary). docs/design.md, "Scaling out". ``clock`` (Unix
    epoch ms, default the wall clock) stamps ``updated_at`` of appends and ``created_at`` of
    forks. ``chain_key`` (a secret the database does not hold) keys the hash chain of the
    events this store appends and verifies (`head`, docs/design.md, "The hash chain");
    without it the chain is a plain hash.

    Namespaces (docs/design.md, "Namespaces"): ``schema="agent"`` (PostgreSQL) puts every
    table, trigger and the version table in that schema, created by the migrations;
    ``table_prefix="agent_"`` (SQLite) prefixes every name. The URL parameters ``?schema=`` /
    ``?table_prefix=`` do the same (the keyword and the URL must agree). A malformed name, or
    the other backend's option, is a `NamespaceError`.

    ``search_index=False`` appends without writing the search index (docs/design.md,
    "Search"): `search` then misses what was appended, `verify` reports the index stale and
    `reindex` rebuilds it.
    """

    def __init__(
        self,
        url: str | URL | os.PathLike[str] | None = None,
        *,
        strict: bool = False,
        migrate: bool = True,
        journal_mode: str = "WAL",
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        busy_timeout_ms: int = 5000,
        pool_size: int = 5,
        page_size: int = 1000,
        clock: Callable[[], int] = wall_clock_ms,
        read_only: bool | None = None,
        listen_url: str | URL | None = None,
        schema: str | None = None,
        table_prefix: str | None = None,
        read_url: str | URL | None = None,
        reconnect_timeout: float | None = None,
        replica_wait: float = 1.0,
        search_index: bool = True,
        chain_key: str | bytes | None = None,
    ) -> None:
        core = StoreCore(
            url,
            strict=strict,
            migrate=migrate,
            journal_mode=journal_mode,
            synchronous=synchronous,
            busy_timeout_ms=busy_timeout_ms,
            pool_size=pool_size,
            page_size=page_size,
            clock=clock,
            read_only=read_only,
            listen_url=listen_url,
            schema=schema,
            table_prefix=table_prefix,
            read_url=read_url,
            reconnect_timeout=reconnect_timeout,
            replica_wait=replica_wait,
            search_index=search_index,
            chain_key=chain_key,
        )
        self._core = core
        """What the parts share (`base.StoreCore`): the settings, the recorder (``_core.recorder``,
        None until opened) and the calls into it. Internal: tests reach the recorder here."""
        self.namespace = core.namespace
        """Where this store's tables are (`Namespace`: a schema, a table prefix, or the
        default)."""
        self.read_only, self.strict, self.page_size = core.read_only, core.strict, core.page_size
        self._reading = reading = Reading(core)
        self._writing = writing = Writing(core, reading)
        self._listing = listing = Listing(core, reading, writing)
        self._finding = Finding(core, reading)
        self._repair = Repair(core, reading, writing)
        self._streams = Streams(core, reading)
        self._leasing = leasing = Leasing(core)
        self._retention = Retention(core, reading, writing, listing, leasing, exported=self)

    @property
    def url(self) -> str:
        """The database URL (password masked)."""
        return self._core.url

    @property
    def keyed(self) -> bool:
        """Whether this store chains (and verifies) its events with a key."""
        return self._core.keyed

    @property
    def dialect(self) -> str:
        return self._core.dialect

    @property
    def store_id(self) -> str:
        """The database's random id (part of every revision token). Empty until opened."""
        return self._core.store_id

    async def open(self) -> Self:
        """Connect, check (and by default migrate) the schema. Idempotent.

        A store works from any thread and event loop (PostgreSQL keeps a pool per loop);
        calls that race to open it wait for the first, each on its own loop."""
        await self._core.open()
        return self

    async def aclose(self) -> None:
        """Finish appends already handed to the database, then close every connection and
        thread of the store. Pending (never appended) creates are forgotten."""
        await self._core.aclose()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def children(self, session_id: str) -> list[ChildSession]:
        """The sub-agent sessions ``session_id`` started (its ``subagent`` calls' sessions,
        imported sub-agent transcripts): each session whose header names it as
        ``parent_session`` and that is not a fork of it, oldest first, with its title, status
        (running, completed, failed, aborted, interrupted) and open todos (`ChildSession`)."""
        return await list_children(self, session_id, self._core.clock())
