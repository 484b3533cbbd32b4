"""Writing and pruning projection checkpoints (`core.checkpoint`), in a write transaction.

Checkpoints are derived data, the only rows the library deletes and rewrites: a checkpoint is
written for a seq at or below the stored end of its session (the events it folds are stored),
replacing any earlier one at that seq, and only the newest ``keep`` of a session are kept.
Reading them is `reads.live_state` / `reads.surface_state`. Both functions take the
namespace's tables (`schema.Tables`).
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from ..core.checkpoint import CHECKPOINT_FORMAT
from ..errors import SessionNotFoundError
from .schema import Tables

__all__ = ["delete_all", "write"]


def write(
    conn: Connection,
    tables: Tables,
    session_id: str,
    seq: int,
    text: str,
    now: int,
    keep: int,
) -> bool:
    """Store the checkpoint text for ``seq``; False (nothing written) when the session's
    stored log ends before ``seq`` (its events are not all stored yet)."""
    sessions, session_checkpoints = tables.sessions, tables.session_checkpoints
    cp = session_checkpoints.c
    next_seq = conn.execute(
        select(sessions.c.next_seq).where(sessions.c.id == session_id)
    ).scalar_one_or_none()
    if next_seq is None:
        raise SessionNotFoundError(session_id)
    if seq > next_seq:
        return False
    conn.execute(delete(session_checkpoints).where(cp.session_id == session_id, cp.seq == seq))
    conn.execute(
        session_checkpoints.insert().values(
            session_id=session_id,
            seq=seq,
            format_version=CHECKPOINT_FORMAT,
            state=text,
            created_at=now,
        )
    )
    oldest_kept = conn.execute(
        select(cp.seq)
        .where(cp.session_id == session_id)
        .order_by(cp.seq.desc())
        .limit(1)
        .offset(keep - 1)
    ).scalar_one_or_none()
    if oldest_kept is not None:
        conn.execute(
            delete(session_checkpoints).where(cp.session_id == session_id, cp.seq < oldest_kept)
        )
    return True


def delete_all(conn: Connection, tables: Tables, session_id: str) -> int:
    """Delete every checkpoint of a session (changes nothing but speed)."""
    session_checkpoints = tables.session_checkpoints
    cp = session_checkpoints.c
    result = conn.execute(delete(session_checkpoints).where(cp.session_id == session_id))
    return int(result.rowcount)
