"""The state reads: the live state or the surface as of a seq, from the newest usable
checkpoint and the events after it (`live_state`, `surface_state`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..core.checkpoint import CheckpointError, LiveState
from ..errors import CorruptSessionError, InvalidEventError
from .codec import rows_to_events
from .read_sql import Rows
from .reads import read_events, read_session, seq_bound
from .records import SessionRow

__all__ = ["StateRead", "live_state", "surface_state"]

_CHECKPOINT_CANDIDATES = 3
"""How many of the newest checkpoints a read tries before folding from the start."""


@dataclass(slots=True)
class StateRead:
    """What `live_state` and `surface_state` found: the state, and the checkpoints they had to
    pass over (each with the reason), for the caller to warn about."""

    row: SessionRow
    state: LiveState
    from_checkpoint: int | None
    skipped: list[str]


def _candidates(
    rows: Rows, session_id: str, upto: int, skipped: list[str]
) -> Iterator[LiveState | None]:
    """The newest usable checkpoints at or below ``upto``, each decoded only when the one
    before it was passed over, then None (fold from the start). What cannot be decoded is
    named in ``skipped``, except checkpoints of an obsolete format."""
    params = {"session_id": session_id, "upto": upto, "limit": _CHECKPOINT_CANDIDATES}
    for seq, text in rows.fetch("checkpoints_at_most", params):
        try:
            yield LiveState.decode(text, seq=seq)
        except CheckpointError as exc:
            if not exc.obsolete:  # an older format an upgrade left behind is not news
                skipped.append(str(exc))
    yield None


def live_state(rows: Rows, session_id: str) -> StateRead:
    """The live state at the end of the log: the newest usable checkpoint, then the events
    after it. A checkpoint that does not decode, or that the following events do not continue,
    is passed over (and named in ``skipped``); with none left, the whole log is folded."""
    row = read_session(rows, session_id)
    skipped: list[str] = []
    for state in _candidates(rows, session_id, row.next_seq, skipped):
        if state is None:
            live, origin, events = LiveState.empty(), None, read_events(rows, session_id, 0)[1]
        else:
            live, origin = state, state.next_seq
            events = read_events(rows, session_id, origin - 1)[1]  # and the event it names
            if not state.matches(events[0] if events else None):
                skipped.append(_STALE.format(seq=origin))
                continue
            events = events[1:]
        try:
            live.apply_all(events)
        except (InvalidEventError, CheckpointError) as exc:
            _cannot_continue(session_id, origin, exc, skipped)
            continue
        return StateRead(row, live, origin, skipped)
    raise AssertionError("unreachable: the fold from seq 0 returns or raises")


_STALE = (
    "checkpoint at seq {seq} does not match the log (the event before it differs): stale, "
    "or written for another log"
)


def _cannot_continue(
    session_id: str,
    origin: int | None,
    exc: InvalidEventError | CheckpointError,
    skipped: list[str],
) -> None:
    """The stored events do not apply (or a checkpoint's nodes do not decode): to a
    checkpoint, pass it over; from seq 0, the log itself is damaged."""
    if origin is None:
        seq = exc.seq if isinstance(exc, InvalidEventError) else None
        raise CorruptSessionError(session_id, seq, str(exc)) from None
    skipped.append(f"checkpoint at seq {origin} does not continue with the log: {exc}")


def surface_state(rows: Rows, session_id: str, upto_seq: int | None) -> StateRead:
    """The surface as of ``upto_seq``: the newest usable checkpoint at or below it, then the
    surface rows after it (surface rows only: the partial index)."""
    row = read_session(rows, session_id)
    upto = seq_bound(row.next_seq, upto_seq)
    skipped: list[str] = []
    for state in _candidates(rows, session_id, upto, skipped):
        if state is None:
            live, origin = LiveState.empty(), None
        else:
            live, origin = state, state.next_seq
            named = {"session_id": session_id, "from_seq": origin - 1, "upto": origin}
            previous = rows_to_events(session_id, rows.fetch("events", named), expect_seq=None)
            if not state.matches(previous[0] if previous else None):
                skipped.append(_STALE.format(seq=origin))
                continue
        params = {"session_id": session_id, "from_seq": origin or 0, "upto": upto}
        events = rows_to_events(session_id, rows.fetch("surface", params), expect_seq=None)
        try:
            for event in events:
                live.surface.apply(event)
            live.surface.snapshot()  # decodes a checkpoint's nodes: damage passes it over here
        except (InvalidEventError, CheckpointError) as exc:
            _cannot_continue(session_id, origin, exc, skipped)
            continue
        return StateRead(row, live, origin, skipped)
    raise AssertionError("unreachable: the fold from seq 0 returns or raises")
