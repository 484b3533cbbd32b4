"""``session/delete`` and ``session/fork`` on the store (the agent's lifecycle helpers)."""

from __future__ import annotations

import contextlib

from .._service import SessionService
from ..errors import StructureError, TodoSessionsError
from . import _sdk
from .client_errors import client_errors

__all__ = ["delete_session", "fork_session"]


async def delete_session(service: SessionService, session_id: str) -> None:
    """Delete a session through `SessionStore.delete` (the only deletion path), under this
    service's lease, so nothing is deleted under another live owner (``invalid_request``)."""
    store = service.store
    lease = None
    if service.leases:
        with client_errors(session_id):
            lease = await store.acquire_lease(session_id, service.owner, ttl=service.lease_ttl)
    try:
        with client_errors(session_id):
            await store.delete(session_id)
    except BaseException:
        if lease is not None:
            with contextlib.suppress(TodoSessionsError):
                await store.release_lease(lease)
        raise


async def fork_session(
    service: SessionService, session_id: str, title: str | None, open_turn: int | None
) -> str:
    """Fork at the end of the stored log, or before ``open_turn`` (the seq of an open last
    turn's start); the new session's id. ``invalid_params`` when there is nothing to fork."""
    boundary = None if open_turn is None else open_turn - 1
    if boundary is not None and boundary < 0:
        raise _sdk.RequestError.invalid_params(
            {"message": f"session {session_id!r} has no closed turn to fork at"}
        )
    try:
        with client_errors(session_id):
            log = await service.store.fork(session_id, boundary, title=title)
    except (StructureError, ValueError) as exc:
        raise _sdk.RequestError.invalid_params({"message": str(exc)}) from None
    return log.header.id
