"""`SessionStore`: the session log on SQLite or PostgreSQL.

The store is a facade of a backend's recorder (`recorder.Recorder`, the contract: the only
code that talks to the database) with what is the same on every backend, in one module per
concern: lifecycle (`base`), reading and projections (`reading`), the validated append
(`writing`), leases (`leasing`), checkpoints, resume, crash repair and fork (`repair`), paged
streams and follow (`streams`), listing and metadata (`listing`), search (`finding`),
retention (`retention`); the retry on a seq conflict is
`retry`. It returns values (`SessionEvent`, `StoredLog`, `SessionSummary`), never rows or
connections, and translates every driver exception at this boundary (`translate_errors`). See
docs/design.md, "The store contract".
"""

from __future__ import annotations

from .base import default_url, wall_clock_ms
from .children import ChildSession, list_children
from .finding import Finding
from .leasing import Leasing
from .repair import Repair
from .retention import Retention
from .streams import Streams

__all__ = ["ChildSession", "SessionStore", "default_url", "wall_clock_ms"]


class SessionStore(Retention, Finding, Repair, Streams, Leasing):
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

    async def children(self, session_id: str) -> list[ChildSession]:
        """The sub-agent sessions ``session_id`` started (its ``subagent`` calls' sessions,
        imported sub-agent transcripts): each session whose header names it as
        ``parent_session`` and that is not a fork of it, oldest first, with its title, status
        (running, completed, failed, aborted, interrupted) and open todos (`ChildSession`)."""
        return await list_children(self, session_id, self._clock())
