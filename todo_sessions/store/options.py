"""The options of each backend, one object per backend: `engine.SQLiteOptions` (per-connection
settings of a SQLite database) and `PostgresOptions` (the pool, LISTEN, failover and replica of
a PostgreSQL store). `SessionStore`'s keyword arguments build them (docs/design.md,
"Backends"); `backends.open_recorder` hands each backend its own."""

from __future__ import annotations

from dataclasses import dataclass

from .engine import StoreURL

__all__ = ["PostgresOptions"]


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    """How a PostgreSQL store connects (`SessionStore`'s ``pool_size``, ``listen_url``,
    ``reconnect_timeout``, ``read_url`` and ``replica_wait``)."""

    pool_size: int = 5
    max_overflow: int = 10
    listen: StoreURL | None = None
    """A direct connection for LISTEN (behind a transaction pooler); None: the store's own
    URL, or polling behind a pooler."""
    reconnect_timeout: float = 0.0
    """Seconds a call is retried while no host takes it (a failover)."""
    replica: StoreURL | None = None
    """A read replica (`SessionStore`'s ``read_url``)."""
    replica_wait: float = 1.0
    """Seconds a read waits for the replica to replay this store's writes."""

    def __post_init__(self) -> None:
        if self.reconnect_timeout < 0 or self.replica_wait < 0:
            raise ValueError("reconnect_timeout and replica_wait must be >= 0")
