"""Retries written once: the optimistic retry on a seq conflict (read, compute, append at the
stored next seq; when another writer appended meanwhile, look again), and the retry of a call
while the database is unreachable (`until_reachable`: a lost connection, a failover)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..errors import SeqConflictError

__all__ = ["ATTEMPTS", "retry_on_conflict", "until_reachable"]

T = TypeVar("T")

ATTEMPTS = 5
"""How often an operation is tried before its `SeqConflictError` is raised."""


async def retry_on_conflict(session_id: str, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
    """``await attempt()``, again while it raises `SeqConflictError` (another writer appended
    first), at most `ATTEMPTS` times; then a `SeqConflictError` saying ``what`` kept racing."""
    for _ in range(ATTEMPTS):
        try:
            return await attempt()
        except SeqConflictError:
            continue  # another writer appended meanwhile: look again
    raise SeqConflictError(
        session_id, -1, None, detail=f"{what} kept racing other writers ({ATTEMPTS} tries)"
    )


_FIRST_PAUSE = 0.02
_MAX_PAUSE = 0.5


async def until_reachable(
    within: float,
    attempt: Callable[[], Awaitable[T]],
    transient: Callable[[BaseException], bool],
) -> T:
    """``await attempt()``, again with backoff while it raises what ``transient`` accepts (a
    lost connection, a standby after a failover), until ``within`` seconds have passed; then
    the last error. Always tried once, so ``within=0`` is one more try."""
    deadline = time.monotonic() + within
    pause = _FIRST_PAUSE
    while True:
        try:
            return await attempt()
        except Exception as exc:
            if not transient(exc) or time.monotonic() + pause > deadline:
                raise
        await asyncio.sleep(pause)
        pause = min(pause * 2, _MAX_PAUSE)
