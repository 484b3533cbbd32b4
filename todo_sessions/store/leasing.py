"""Session ownership leases through the store (docs/design.md, "Leases")."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.header import check_session_id
from .base import StoreCore
from .leases import Lease, LeaseHolder

__all__ = ["Leasing"]


def _ttl_ms(ttl: float) -> int:
    if not ttl > 0:
        raise ValueError(f"a lease's ttl must be > 0 seconds, got {ttl!r}")
    return max(1, round(ttl * 1000))


class Leasing(StoreCore):
    """Taking, renewing and giving back the lease on a session."""

    async def acquire_lease(
        self, session_id: str, owner: str, *, ttl: float = 30.0, steal: bool = False
    ) -> Lease:
        """Take the ownership lease on a session for ``ttl`` seconds (docs/design.md,
        "Leases"). Free, expired or already ``owner``'s → a new epoch; held by another live
        owner → `SessionLeasedError` naming it and its expiry, unless ``steal``."""
        check_session_id(session_id)
        self._check_writable(f"lease session {session_id!r}")
        ttl_ms = _ttl_ms(ttl)
        return await self._call(
            f"leasing session {session_id!r}",
            lambda r: r.acquire_lease(session_id, owner, self._clock(), ttl_ms, steal=steal),
        )

    async def renew_lease(self, lease: Lease, *, ttl: float = 30.0) -> Lease:
        """Extend a lease still held for ``ttl`` seconds from now; `LeaseLostError` when it
        was taken over or ran out meanwhile."""
        ttl_ms = _ttl_ms(ttl)
        return await self._call(
            f"renewing the lease on session {lease.session_id!r}",
            lambda r: r.renew_lease(lease, self._clock(), ttl_ms),
        )

    async def release_lease(self, lease: Lease) -> bool:
        """Give a lease back. False when it was no longer this holder's (nothing changed)."""
        return await self._call(
            f"releasing the lease on session {lease.session_id!r}",
            lambda r: r.release_lease(lease),
        )

    async def lease_holders(self, session_ids: Iterable[str]) -> dict[str, LeaseHolder]:
        """The stored lease rows of these sessions (live or expired: see `LeaseHolder.live`)."""
        ids = tuple(session_ids)
        if not ids:
            return {}
        return await self._call("reading session leases", lambda r: r.lease_holders(ids))
