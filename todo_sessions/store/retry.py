"""The optimistic retry on a seq conflict, written once: read, compute, append at the stored
next seq; when another writer appended meanwhile, look again."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..errors import SeqConflictError

__all__ = ["ATTEMPTS", "retry_on_conflict"]

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
