"""Session ownership leases through the store (docs/design.md, "Leases"): a part of
`SessionStore`."""

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


class Leasing:
    """Taking, renewing and giving back the lease on a session (`SessionStore`'s methods,
    documented there)."""

    def __init__(self, core: StoreCore) -> None:
        self._call, self._clock, self._check_writable = core.call, core.clock, core.check_writable

    async def acquire_lease(
        self, session_id: str, owner: str, *, ttl: float = 30.0, steal: bool = False
    ) -> Lease:
        check_session_id(session_id)
        self._check_writable(f"lease session {session_id!r}")
        ttl_ms = _ttl_ms(ttl)
        return await self._call(
            f"leasing session {session_id!r}",
            lambda r: r.acquire_lease(session_id, owner, self._clock(), ttl_ms, steal=steal),
        )

    async def renew_lease(self, lease: Lease, *, ttl: float = 30.0) -> Lease:
        ttl_ms = _ttl_ms(ttl)
        return await self._call(
            f"renewing the lease on session {lease.session_id!r}",
            lambda r: r.renew_lease(lease, self._clock(), ttl_ms),
        )

    async def release_lease(self, lease: Lease) -> bool:
        return await self._call(
            f"releasing the lease on session {lease.session_id!r}",
            lambda r: r.release_lease(lease),
        )

    async def lease_holders(self, session_ids: Iterable[str]) -> dict[str, LeaseHolder]:
        ids = tuple(session_ids)
        if not ids:
            return {}
        return await self._call("reading session leases", lambda r: r.lease_holders(ids))
