"""`PlannedWrites`: the recorder operations that are one write plan each (`store.plans`), and
the schema revision steps, written once for both backends. A backend's recorder supplies how a
plan runs (`_write`: on the SQLite writer thread, or on an asyncpg connection) and how a
SQLAlchemy connection is had (`_on_sa`, `run_locked`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from . import plans, revisions
from .checkpoints import CheckpointWrite
from .leases import Lease
from .namespace import Namespace

__all__ = ["PlannedWrites"]

T = TypeVar("T")


class PlannedWrites:
    """Deletes, leases, checkpoints and migrations as plans run by the backend's driver."""

    _namespace: Namespace

    async def _write(self, fn: Callable[..., plans.Plan[T]], *args: Any) -> T:
        raise NotImplementedError

    async def _on_sa(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        raise NotImplementedError

    async def run_locked(self, fn: Callable[[Connection], T]) -> T:
        raise NotImplementedError

    async def delete(self, session_id: str) -> bool:
        return await self._write(plans.delete_session, session_id)

    async def acquire_lease(
        self, session_id: str, owner: str, now: int, ttl_ms: int, *, steal: bool
    ) -> Lease:
        return await self._write(plans.acquire_lease, session_id, owner, now, ttl_ms, steal)

    async def renew_lease(self, lease: Lease, now: int, ttl_ms: int) -> Lease:
        return await self._write(plans.renew_lease, lease, now, ttl_ms)

    async def release_lease(self, lease: Lease) -> bool:
        return await self._write(plans.release_lease, lease)

    async def write_checkpoint(self, checkpoint: CheckpointWrite) -> bool:
        return await self._write(plans.write_checkpoint, checkpoint)

    async def delete_checkpoints(self, session_id: str) -> int:
        return await self._write(plans.delete_checkpoints, session_id)

    async def thin_checkpoints(self, session_id: str, keep: int) -> int:
        return await self._write(plans.thin_checkpoints, session_id, keep)

    async def schema_revision(self) -> str | None:
        namespace = self._namespace
        return await self._on_sa(lambda c: revisions.schema_revision(c, namespace), write=False)

    async def migrate(self, revision: str, *, downgrade: bool = False) -> str | None:
        namespace = self._namespace
        return await self.run_locked(lambda c: revisions.step(c, revision, downgrade, namespace))
