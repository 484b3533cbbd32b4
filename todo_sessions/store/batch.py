"""An append prepared for the database (`AppendBatch`), and the steps of the append
transaction that are the same on every backend (`check_batch_start`, `chain_rows`,
`new_session_values`, `after_append`). Each backend writes the transaction itself once, on
its own driver.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

from ..core.chain import CHAIN_SIZE, event_text, genesis
from ..core.jsonvalue import canonical_json
from ..core.meta import MetaChange, fold_title
from ..errors import CorruptSessionError, SeqConflictError
from .leases import Lease

__all__ = [
    "AppendBatch",
    "AppendOutcome",
    "Projection",
    "after_append",
    "chain_rows",
    "check_batch_start",
    "new_session_values",
    "projection_of",
]

AppendOutcome = tuple[str, int, int]
"""``(incarnation, revision, next_seq)`` after a committed append."""


@dataclass(frozen=True, slots=True)
class Projection:
    """What an append changes of the session's projected columns (from its batch's
    ``session/meta`` and ``todo/write`` events, `core.meta.batch_change`), computed before the
    transaction: ``params`` of `queries.update_projection`, and the new tags when they change
    (``session_tags`` is then replaced)."""

    params: dict[str, Any]
    tags: tuple[str, ...] | None


def projection_of(session_id: str, change: MetaChange) -> Projection:
    """The column values of a batch's change (tags and metadata as JSON text, NULL when
    empty; the title with its casefold)."""
    tags, metadata = change.tags, change.metadata
    return Projection(
        {
            "p_id": session_id,
            "p_set_title": change.title_set,
            "p_title": change.title,
            "p_title_folded": fold_title(change.title),
            "p_set_tags": tags is not None,
            "p_tags": canonical_json(list(tags)) if tags else None,
            "p_set_metadata": metadata is not None,
            "p_metadata": canonical_json(metadata) if metadata else None,
            "p_set_open": change.open_todos is not None,
            "p_open_todos": bool(change.open_todos),
        },
        tags,
    )


@dataclass(frozen=True, slots=True)
class AppendBatch:
    """One append, ready for the database: rows of contiguous events of one session.

    ``rows`` are ``session_events`` rows as dicts (see `codec.event_row`); ``header`` is the
    ``sessions`` row of a pending (created, never appended) session, or None; ``now`` is the
    store clock's time for ``updated_at``; ``lease``, when given, is checked inside the append
    transaction (`leases.check`); ``projection``, when given, is applied after the events are
    inserted (a batch without ``session/meta`` or ``todo/write`` events has none); ``index``:
    the append marks its events for the search index (`indexer`); ``chain_key`` keys the hash chain
    (`core.chain.derive_key`; empty: a plain hash).
    """

    session_id: str
    rows: Sequence[dict[str, Any]]
    header: dict[str, Any] | None
    now: int
    lease: Lease | None = None
    projection: Projection | None = None
    index: bool = False
    """Whether the search index takes these events (the session row's mark, `indexer`)."""
    chain_key: bytes = b""

    @property
    def first_seq(self) -> int:
        return int(self.rows[0]["seq"])


def check_batch_start(session_id: str, first_seq: int, next_seq: int) -> None:
    """A batch must start exactly at the stored next seq."""
    if first_seq != next_seq:
        raise SeqConflictError(session_id, first_seq, next_seq)


_PLAIN = blake2b(digest_size=CHAIN_SIZE)
"""The unkeyed hash, set up once: each link is a copy of it (a third cheaper than a new one)."""


def chain_rows(batch: AppendBatch, previous: bytes | None) -> None:
    """Set each row's ``chain`` (`core.chain`: its 32 bytes, as the column holds them), inside
    the append transaction: ``previous`` is the stored chain value of the event before the
    batch (read with the next seq); a batch at seq 0 starts from its header. A predecessor
    without one (written outside todo_sessions) is refused: the chain cannot go on from it."""
    key, rows = batch.chain_key, batch.rows
    first = rows[0]["seq"]
    if first == 0:
        if batch.header is None:
            raise CorruptSessionError(
                batch.session_id, 0, "the session row exists without events; cannot chain"
            )
        value = genesis(batch.header, key)
    elif previous is None:
        raise CorruptSessionError(
            batch.session_id,
            first - 1,
            "the stored event has no chain value; it was written outside todo_sessions (run "
            "`todo-sessions verify`)",
        )
    else:
        value = bytes(previous)
    start = blake2b(digest_size=CHAIN_SIZE, key=key) if key else _PLAIN
    for row in rows:  # link(value, event_text(row), key), the set-up hash copied
        digest = start.copy()
        digest.update(value)
        digest.update(event_text(row))
        value = digest.digest()
        row["chain"] = value


def new_session_values(header: dict[str, Any], now: int) -> dict[str, Any]:
    """The ``sessions`` row that materialises a session: a fresh incarnation, revision 0."""
    title = header.get("title")
    return {
        **header,
        "incarnation": str(uuid.uuid4()),
        "revision": 0,
        "next_seq": 0,
        "updated_at": now,
        "title_folded": fold_title(title),
        "tags": None,
        "metadata": None,
        "open_todos": False,
        "index_from": None,
    }


def after_append(
    next_seq: int, revision: int, count: int, now: int, session_id: str
) -> dict[str, Any]:
    """Parameters of the ``sessions`` update that ends an append of ``count`` events."""
    return {
        "b_next_seq": next_seq + count,
        "b_revision": revision + 1,
        "b_updated_at": now,
        "b_id": session_id,
    }
