"""What every append path shares (the SQLite writer, asyncpg, and plain Core)."""

from __future__ import annotations

import uuid
from typing import Any

from ..errors import SeqConflictError

__all__ = ["AppendOutcome", "check_batch_start", "new_session_values"]

AppendOutcome = tuple[str, int, int]
"""``(incarnation, revision, next_seq)`` after a committed append."""


def check_batch_start(session_id: str, first_seq: int, next_seq: int) -> None:
    """A batch must start exactly at the stored next seq."""
    if first_seq != next_seq:
        raise SeqConflictError(session_id, first_seq, next_seq)


def new_session_values(header: dict[str, Any], now: int) -> dict[str, Any]:
    """The ``sessions`` row that materialises a session: a fresh incarnation, revision 0."""
    return {
        **header,
        "incarnation": str(uuid.uuid4()),
        "revision": 0,
        "next_seq": 0,
        "updated_at": now,
    }
