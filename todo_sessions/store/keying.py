"""Keyed hash chains and stores without the key (docs/design.md, "The hash chain").

A session's chain is keyed when its events were chained with a key (`core.chain`): nothing
else marks it. A store without that key (a shell without ``$TODO_SESSIONS_CHAIN_KEY``) would
append an unkeyed link that ``verify`` with the key reports at that seq forever, so
`check_append_key` refuses the append (`ChainKeyError`) unless the link before the batch
recomputes with this store's key (or, for a keyed store, without one: a chain begun before
the key was set goes on keyed). It reads that link and the one before it: one small read,
once per session and store: after an append the store remembers the session's next seq
(`remember`), and a batch that starts there needs no read (its predecessor is this store's
own link). `unkeyed_link` tells ``verify`` an unkeyed link from a changed event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.chain import event_text, genesis, link
from ..errors import ChainKeyError, SessionNotFoundError

if TYPE_CHECKING:
    from .base import StoreCore
    from .records import ChainRow, SessionRow

__all__ = ["check_append_key", "remember", "unkeyed_link", "unkeyed_report"]

_REMEMBERED = 4096
"""Sessions whose next seq a store remembers (the oldest are forgotten: one read again)."""


def remember(store: StoreCore, session_id: str, next_seq: int) -> None:
    """After an append through ``store``: the link before ``next_seq`` is its own."""
    known = store.chained_next
    known.pop(session_id, None)
    known[session_id] = next_seq
    if len(known) > _REMEMBERED:
        del known[next(iter(known))]


async def check_append_key(store: StoreCore, session_id: str, first: int) -> None:
    """Refuse (`ChainKeyError`) an append at ``first`` when the link before it was not made
    with ``store``'s key (nor, for a keyed store, without a key). A link that cannot be read
    here (an unknown session, a seq past the end, a row without a chain value) is left to
    the append, which reports it."""
    if first == 0 or store.chained_next.get(session_id) == first:
        return
    start = max(first - 2, 0)
    try:
        row, page = await store.call(
            f"appending to session {session_id!r}",
            lambda r: r.read_chain(session_id, start, first - start),
        )
    except SessionNotFoundError:
        return
    if len(page) != first - start or page[-1].seq != first - 1:
        return
    kept, before = page[-1].chain, page[0].chain
    if kept is None or before is None:
        return
    key = store.chain_key
    keys = (key, b"") if key else (key,)
    for candidate in keys:
        previous = genesis(row._asdict(), candidate) if first == 1 else bytes.fromhex(str(before))
        if link(previous, event_text(page[-1]._asdict()), candidate).hex() == kept:
            return
    raise ChainKeyError(session_id, first - 1, keyed=bool(key))


def unkeyed_link(previous: bytes | int, row: SessionRow, stored: ChainRow) -> bool:
    """Whether the stored chain value of ``stored`` is its unkeyed link after ``previous``
    (the value before it; at seq 0, ``0``: the unkeyed genesis of the session ``row``)."""
    before = genesis(row._asdict()) if isinstance(previous, int) else previous
    return bool(link(before, event_text(stored._asdict())).hex() == stored.chain)


def unkeyed_report(seqs: list[int]) -> tuple[int, str]:
    """`SessionStore.chain_break`'s report of links made without the key (the chain verifies
    with the key everywhere else)."""
    more = f" (and {len(seqs) - 1} later event(s))" if len(seqs) > 1 else ""
    return seqs[0], (
        f"unkeyed link{more}: this event was chained without the chain key, not with it "
        "(an append by a store opened without TODO_SESSIONS_CHAIN_KEY, or a rewrite by someone "
        "who does not hold the key); every other link verifies with the key"
    )
