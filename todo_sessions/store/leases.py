"""Session ownership leases: who owns a session live, and fencing of their appends.

A `SessionService` takes a lease on each session it owns (`acquire`), renews it while it holds
it (`renew`) and gives it back when it closes the session (`release`). A lease row holds the
owner id, host, pid, expiry and an ``epoch`` that grows with every new holder. An append made
under a lease (`SessionStore.append(..., lease=...)`) checks owner, epoch and expiry inside its
own write transaction (`check`, run by each backend's append), so a writer whose lease was
taken over or ran out gets `LeaseLostError` and writes nothing. On PostgreSQL the append reads
the lease row ``FOR SHARE`` and a takeover updates it, so the two serialise: every append
acknowledged to the old holder committed before the takeover did.

A lease whose holder is a process of this host that no longer runs (same host name, no
such pid) counts as expired, so a crashed service's sessions are resumed at once on its host.
Times are the store clock's milliseconds of each writer: hosts sharing a database need clocks
that agree to well within a lease's duration (the default is 30 s, renewed every 10 s).
The plain store API takes no lease unless asked. Each function takes the namespace's
``session_leases`` table (`schema.Tables`); what an append checks is `queries.Queries.lease_state`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, select
from sqlalchemy.engine import Connection

from ..errors import LeaseLostError, SessionLeasedError

__all__ = [
    "Lease",
    "LeaseHolder",
    "acquire",
    "check",
    "holders",
    "release",
    "renew",
]


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease held on one session: pass it to `SessionStore.append` to fence the append."""

    session_id: str
    owner: str
    epoch: int
    expires_at: int


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    """Who holds (or last held) a session's lease, as stored."""

    session_id: str
    owner: str
    host: str | None
    pid: int | None
    epoch: int
    acquired_at: int
    expires_at: int

    def live(self, now: int) -> bool:
        """Unexpired at ``now``, and not held by a process of this host that has ended."""
        if self.expires_at <= now:
            return False
        if self.host == socket.gethostname() and self.pid is not None:
            return _running(self.pid)
        return True

    def describe(self) -> str:
        where = f"{self.host or '?'} pid {self.pid if self.pid is not None else '?'}"
        return f"owner {self.owner} ({where})"


def _running(pid: int) -> bool:
    """Whether a process of this host with that pid exists (signal 0 checks, sends nothing)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True  # it exists (or we cannot tell): treat the lease as live
    return True


def check(session_id: str, state: Any, lease: Lease, now: int) -> None:
    """Raise `LeaseLostError` unless ``state`` (``owner, epoch, expires_at`` or None) is still
    ``lease``, unexpired at ``now``."""
    if state is None:
        raise LeaseLostError(session_id, "the lease was released or never taken")
    owner, epoch, expires_at = state
    if owner != lease.owner or epoch != lease.epoch:
        raise LeaseLostError(session_id, f"taken over by {owner} (epoch {epoch})")
    if expires_at <= now:
        raise LeaseLostError(session_id, f"it expired at {expires_at} (now {now})")


def _row(conn: Connection, table: Table, session_id: str) -> LeaseHolder | None:
    found = conn.execute(
        select(table).where(table.c.session_id == session_id).with_for_update()
    ).first()
    return None if found is None else LeaseHolder(**found._asdict())


def acquire(
    conn: Connection,
    table: Table,
    session_id: str,
    owner: str,
    now: int,
    ttl_ms: int,
    *,
    steal: bool,
) -> Lease:
    """Take the lease (in the caller's write transaction): free, expired, already ours, or
    ``steal`` → a new epoch; held by another live owner → `SessionLeasedError`."""
    current = _row(conn, table, session_id)
    le = table.c
    values = {
        "owner": owner,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "acquired_at": now,
        "expires_at": now + ttl_ms,
    }
    if current is None:
        conn.execute(table.insert().values(session_id=session_id, epoch=1, **values))
        return Lease(session_id, owner, 1, now + ttl_ms)
    if current.owner != owner and current.live(now) and not steal:
        raise SessionLeasedError(session_id, current.describe(), current.expires_at)
    epoch = current.epoch + 1
    conn.execute(table.update().where(le.session_id == session_id).values(epoch=epoch, **values))
    return Lease(session_id, owner, epoch, now + ttl_ms)


def renew(conn: Connection, table: Table, lease: Lease, now: int, ttl_ms: int) -> Lease:
    """Extend a lease still held (`LeaseLostError` when it was taken over or ran out)."""
    current = _row(conn, table, lease.session_id)
    state = None if current is None else (current.owner, current.epoch, current.expires_at)
    check(lease.session_id, state, lease, now)
    conn.execute(
        table.update().where(table.c.session_id == lease.session_id).values(expires_at=now + ttl_ms)
    )
    return Lease(lease.session_id, lease.owner, lease.epoch, now + ttl_ms)


def release(conn: Connection, table: Table, lease: Lease) -> bool:
    """Give a lease back; False when it was no longer ours (nothing changed)."""
    le = table.c
    result = conn.execute(
        table.delete().where(
            le.session_id == lease.session_id,
            le.owner == lease.owner,
            le.epoch == lease.epoch,
        )
    )
    return bool(result.rowcount)


def holders(conn: Connection, table: Table, session_ids: list[str]) -> dict[str, LeaseHolder]:
    if not session_ids:
        return {}
    found = conn.execute(select(table).where(table.c.session_id.in_(session_ids)))
    return {row.session_id: LeaseHolder(**row._asdict()) for row in found}
