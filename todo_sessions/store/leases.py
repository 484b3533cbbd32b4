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
The plain store API takes no lease unless asked. This module decides (`acquired`, `renewed`,
`check`); each backend reads and writes the rows with its own compiled statements, under its
write lock (`Recorder.acquire_lease`, ...); what an append checks is
`queries.Queries.lease_state`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from ..errors import LeaseLostError, SessionLeasedError

__all__ = [
    "LEASE_COLUMNS",
    "Lease",
    "LeaseHolder",
    "acquired",
    "check",
    "holder_of",
    "renewed",
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


LEASE_COLUMNS = ("session_id", "owner", "host", "pid", "epoch", "acquired_at", "expires_at")
"""The columns of a lease row, in the order the backends read them."""


def holder_of(row: Any) -> LeaseHolder | None:
    """A stored lease row (`LEASE_COLUMNS` in order), or None."""
    return None if row is None else LeaseHolder(*row)


def acquired(
    current: LeaseHolder | None,
    session_id: str,
    owner: str,
    now: int,
    ttl_ms: int,
    *,
    steal: bool,
) -> tuple[Lease, dict[str, Any]]:
    """What taking the lease writes, given the row read under the write lock: free, expired,
    already ours, or ``steal`` → the lease with the next epoch and the row's new values;
    held by another live owner → `SessionLeasedError`."""
    if current is not None and current.owner != owner and current.live(now) and not steal:
        raise SessionLeasedError(session_id, current.describe(), current.expires_at)
    epoch = 1 if current is None else current.epoch + 1
    values = {
        "session_id": session_id,
        "owner": owner,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "epoch": epoch,
        "acquired_at": now,
        "expires_at": now + ttl_ms,
    }
    return Lease(session_id, owner, epoch, now + ttl_ms), values


def renewed(current: LeaseHolder | None, lease: Lease, now: int, ttl_ms: int) -> Lease:
    """The renewed lease (`LeaseLostError` when it was taken over or ran out meanwhile)."""
    state = None if current is None else (current.owner, current.epoch, current.expires_at)
    check(lease.session_id, state, lease, now)
    return Lease(lease.session_id, lease.owner, lease.epoch, now + ttl_ms)
