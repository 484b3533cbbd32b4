"""The PostgreSQL recorder: a SQLAlchemy async engine over asyncpg, hot paths on the driver.

- **Appends** run as one transaction on the asyncpg connection itself. Through SQLAlchemy each
  of the four statements pays Core's per-call work on top of the round trip; on the driver
  they are prepared once per connection. Measured with ``bench/store_bench.py`` (single-event
  appends against plain asyncpg doing the same SQL): 0.63x through Core, 0.77x on the driver.
  The statements are the same Core definitions, compiled once for asyncpg. The stored next
  seq is read under a row lock (``SELECT … FOR UPDATE``); the primary key is the last guard.
- **Reads** run on the driver connection too (asyncpg's records, no per-row Core processing),
  inside one ``REPEATABLE READ READ ONLY`` transaction, except the operations that are
  consistent without one (`reads.WITHOUT_SNAPSHOT`).
- **follow** is woken by ``NOTIFY todo_sessions_appended`` (a trigger sends it on every
  append, from any process; a namespace's trigger on ``todo_sessions_appended_<schema>``).
  All followers of a store share one LISTEN connection of their own (`PgListener`), so they
  never take connections from the pool; a periodic re-check is the safety net. LISTEN needs a
  session of its own: behind a transaction-pooling pooler (``?pgbouncer=true``) it uses the
  store's ``listen_url`` (a direct connection), and without one followers poll every
  ``poll_interval``.
- **Every write** (appends, deletes, leases, checkpoints) runs compiled statements on the
  asyncpg connection, in one driver transaction (`_write`): one write stack.
- **Migrations** run in one transaction holding a transaction-scoped advisory lock
  (`take_migration_lock`, the one place that takes it).
- **Errors**: this driver's half of error translation is `classify_error` (asyncpg's
  exception classes and SQLSTATEs).
- **Lost connections** (a terminated backend, a server restart, a network reset) are never
  reused: the connection is invalidated and the pool's idle connections are dropped with it
  (they usually died together), so the next call connects afresh. A read that hit a dead
  connection is retried once. An append whose connection died is decided by reading the
  session back on a fresh connection (`reads.append_outcome`): the batch stored byte-identical
  → success; not stored → sent once more; something else stored at its seqs →
  `SeqConflictError`. So an append is applied exactly once, or fails with nothing written.
- **Failover** (docs/design.md, "Scaling out"): a write refused by a standby (SQLSTATE 25006)
  is lost the same way, and the store's new connections then ask for a host that takes
  writes (`engine.HostChoice`); calls are retried within ``reconnect_timeout``
  (`retry.until_reachable`), as are connections a server refused for now (too many
  connections, 53300; starting up or shutting down, 57P03: a lost connection's kind). The
  end of each session this store acknowledged is remembered: a stored end behind it is
  `AcknowledgedEventsLostError`, never a seq handed out again.
- **A read replica** (``read_url``) serves the reads in `rows.REPLICA_READS` once it has replayed
  this store's last write to the session (`_on_replica`), else the primary does.

Inside: `driver` (compiled statements, the migration lock, error classification),
`transactions` (the write transactions on the driver), `rows` (reads on the driver, and those
a replica may serve), `listener` (LISTEN), `recorder` (`PostgresRecorder`).
"""

from __future__ import annotations

from .driver import (
    MIGRATION_LOCK,
    classify_error,
    connection_lost,
    is_driver_error,
    lock_host_connection,
    run_locked_on_engine,
    statements,
)
from .recorder import PostgresRecorder

__all__ = [
    "MIGRATION_LOCK",
    "PostgresRecorder",
    "classify_error",
    "connection_lost",
    "is_driver_error",
    "lock_host_connection",
    "run_locked_on_engine",
    "statements",
]
