"""Every read the store does, written once as a plain function over a `Rows` source.

A read operation (``read_events``, ``latest_todos``, ``surface_state``, ``list_sessions``, ...)
takes a `Rows` and does its queries and decoding synchronously, inside one read transaction
that its recorder opens: on SQLite in a reader thread on a plain ``sqlite3`` connection, on
PostgreSQL on the asyncpg connection. Both run the same SQLAlchemy Core statements
(`read_sql.read_statements`), compiled once per driver and namespace
(`read_sql.compile_reads`); the state reads that start from a checkpoint are `folds`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.envelope import SessionEvent
from ..core.jsonvalue import decode_fast, decode_json
from ..core.todos import TodoItem, todos_from_payload
from ..core.types import ASSISTANT_MESSAGE, TODO_WRITE
from ..errors import CorruptSessionError, InvalidEventError, SessionNotFoundError
from .batch import AppendBatch, AppendOutcome, check_batch_start
from .codec import check_format_version, rows_to_events
from .leases import LeaseHolder, holder_of
from .read_sql import Rows, list_statement
from .records import (
    ChainRow,
    CheckpointInfo,
    CheckpointText,
    EventsRead,
    SessionRow,
    SummaryRow,
    UsagePayload,
)

# -- operations ---------------------------------------------------------------------------------


def check_from_seq(from_seq: int) -> None:
    """A read's starting seq: a non-negative int."""
    if type(from_seq) is not int:
        raise TypeError(f"from_seq must be an int, got {type(from_seq).__name__}")
    if from_seq < 0:
        raise ValueError(f"from_seq must be >= 0, got {from_seq}")


def find_session(rows: Rows, session_id: str) -> SessionRow | None:
    """The ``sessions`` row, or None."""
    found = rows.fetch("session", {"session_id": session_id})
    return SessionRow(*found[0]) if found else None


def read_session(rows: Rows, session_id: str, *, check_format: bool = True) -> SessionRow:
    """The ``sessions`` row; unknown id → `SessionNotFoundError`; a newer format →
    `FormatUnsupportedError` (unless ``check_format=False``: counting needs no decoding)."""
    row = find_session(rows, session_id)
    if row is None:
        raise SessionNotFoundError(session_id)
    if check_format:
        check_format_version(session_id, row.format_version)
    return row


@dataclass(frozen=True, slots=True)
class ListFilters:
    """The conditions of a `list` page (None: not filtered on). See `SessionStore.list`."""

    cwd: str | None = None
    tag: str | None = None
    since: int | None = None
    until: int | None = None
    parent: str | None = None
    has_open_todos: bool | None = None
    text: str | None = None


def _like_pattern(text: str) -> str:
    """``%text%`` for ``LIKE ... ESCAPE '\\'`` on the casefolded title."""
    escaped = text.casefold().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def list_sessions(
    rows: Rows, limit: int, before: tuple[int, str] | None, filters: ListFilters | None = None
) -> list[SummaryRow]:
    """One page of ``sessions`` rows, newest activity first, after ``(updated_at, id)``,
    matching every condition of ``filters``."""
    params: dict[str, Any] = {"limit": limit}
    used: set[str] = set()
    if before is not None:
        used.add("before")
        params["b_updated_at"], params["b_id"] = before
    if filters is not None:
        for name, value in (
            ("cwd", filters.cwd),
            ("tag", filters.tag),
            ("since", filters.since),
            ("until", filters.until),
            ("parent", filters.parent),
        ):
            if value is not None:
                used.add(name)
                params[f"f_{name}"] = value
        if filters.has_open_todos is not None:
            used.add("open" if filters.has_open_todos else "closed")
        if filters.text is not None:
            used.add("text")
            params["f_text"] = _like_pattern(filters.text)
    if used <= {"before"}:  # the two statements compiled at import
        name = "summaries_before" if used else "summaries"
    else:
        name = list_statement(frozenset(used))
    found = rows.fetch(name, params)
    return [SummaryRow(*row) for row in found]


def read_summary(rows: Rows, session_id: str) -> SummaryRow:
    """The `SessionSummary` columns of one session; unknown id → `SessionNotFoundError`."""
    found = rows.fetch("summary", {"session_id": session_id})
    if not found:
        raise SessionNotFoundError(session_id)
    return SummaryRow(*found[0])


def usage_payloads(rows: Rows, session_id: str) -> list[UsagePayload]:
    """``(seq, decoded data)`` of each ``assistant/message`` (through the type index)."""
    row = read_session(rows, session_id)
    params = {"session_id": session_id, "type": ASSISTANT_MESSAGE, "upto": row.next_seq}
    found = rows.fetch("all_of_type", params)
    out = []
    for seq, text in found:
        try:
            out.append(UsagePayload(seq, decode_json(text, strict=False)))
        except ValueError as exc:
            raise CorruptSessionError(session_id, seq, f"stored assistant/message: {exc}") from None
    return out


def session_ids(rows: Rows, table: str, after: str, limit: int) -> list[str]:
    """One page of session ids after ``after``, from the ``sessions`` table or (``table ==
    "events"``) from the events themselves."""
    name = "ids_of_events" if table == "events" else "ids_of_sessions"
    return [row[0] for row in rows.fetch(name, {"after": after, "limit": limit})]


def chain_rows(
    rows: Rows, session_id: str, from_seq: int, limit: int
) -> tuple[SessionRow, list[ChainRow]]:
    """The session row and the stored text and chain value of its events from ``from_seq``
    (at most ``limit``, below its next seq), undecoded: `verify` recomputes the chain."""
    row = read_session(rows, session_id, check_format=False)
    upto = min(row.next_seq, from_seq + limit)
    if from_seq >= upto:
        return row, []
    found = rows.fetch("chain_rows", {"session_id": session_id, "from_seq": from_seq, "upto": upto})
    # the stored bytes as the hex every caller compares
    return row, [ChainRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], _hex(r[7])) for r in found]


def _hex(value: Any) -> str | None:
    """A stored chain value (bytes; None when written outside todo_sessions) as hex."""
    return None if value is None else bytes(value).hex()


def chain_head(rows: Rows, session_id: str) -> tuple[int, str | None] | None:
    """``(seq, chain value)`` of the session's last event (None: it has none)."""
    last = read_session(rows, session_id, check_format=False).next_seq - 1
    if last < 0:
        return None
    found = rows.fetch("chain_at", {"session_id": session_id, "seq": last})
    return last, (_hex(found[0][0]) if found else None)


def seqs_past_end(rows: Rows, session_id: str, limit: int) -> list[int]:
    """Seqs of rows at or after the session's stored next seq (none in a healthy log)."""
    row = read_session(rows, session_id, check_format=False)
    found = rows.fetch(
        "past_end", {"session_id": session_id, "from_seq": row.next_seq, "limit": limit}
    )
    return [r[0] for r in found]


def lease_holders(rows: Rows, session_ids: tuple[str, ...]) -> dict[str, LeaseHolder]:
    """The stored lease row of each of ``session_ids`` that has one."""
    found = {}
    for session_id in dict.fromkeys(session_ids):
        holder = holder_of(next(iter(rows.fetch("lease_holder", {"session_id": session_id})), None))
        if holder is not None:
            found[session_id] = holder
    return found


def read_store_id(rows: Rows) -> str | None:
    """The database's random id (``store_state``), or None when it has none."""
    found = rows.fetch("store_id", {})
    return found[0][0] if found else None


def seq_bound(next_seq: int, upto_seq: int | None) -> int:
    """Exclusive upper seq bound: the session's next seq, or ``upto_seq`` (inclusive)."""
    return next_seq if upto_seq is None else min(next_seq, upto_seq + 1)


def read_events(rows: Rows, session_id: str, from_seq: int, limit: int | None = None) -> EventsRead:
    """The session row and its events from ``from_seq`` (at most ``limit``).

    Events are bounded by the next seq read in the same transaction, so the result is
    consistent with the row even where each statement sees a newer snapshot (PostgreSQL READ
    COMMITTED). A missing seq below that bound is a `CorruptSessionError`.
    """
    row = read_session(rows, session_id)
    next_seq = row.next_seq
    upto = next_seq if limit is None else min(next_seq, from_seq + limit)
    if from_seq >= upto:
        return EventsRead(row, [])
    found = rows.fetch("events", {"session_id": session_id, "from_seq": from_seq, "upto": upto})
    events = rows_to_events(session_id, found, expect_seq=from_seq)
    if len(events) != upto - from_seq:
        missing = from_seq + len(events)
        raise CorruptSessionError(
            session_id, missing, f"seq {missing} is missing (the session's next seq is {next_seq})"
        )
    return EventsRead(row, events)


MAX_SEQ_BOUND = 2**63 - 1
"""An exclusive seq bound past every seq (the session's end bounds the read anyway)."""


def latest_todos(rows: Rows, session_id: str, upto_seq: int | None) -> list[TodoItem] | None:
    """The list of the latest ``todo/write``, or None: one statement (the session's format and
    end, and the one indexed row), so one snapshot without a transaction of its own
    (`ONE_STATEMENT`)."""
    found = rows.fetch(
        "session_and_latest_of_type",
        {
            "session_id": session_id,
            "type": TODO_WRITE,
            "upto": MAX_SEQ_BOUND if upto_seq is None else min(upto_seq + 1, MAX_SEQ_BOUND),
        },
    )
    if not found:
        raise SessionNotFoundError(session_id)
    format_version, seq, data_text = found[0]
    check_format_version(session_id, format_version)
    if seq is None:
        return None
    try:
        return todos_from_payload(decode_fast(data_text), seq=seq)
    except (ValueError, InvalidEventError) as exc:
        raise CorruptSessionError(session_id, seq, f"stored todo/write: {exc}") from None


ONE_STATEMENT = frozenset({latest_todos})
"""Reads that are one statement: a backend may run them without opening a transaction."""


def latest_event(
    rows: Rows, session_id: str, types: tuple[str, ...], upto_seq: int | None
) -> SessionEvent | None:
    """The latest event of one of ``types`` at or before ``upto_seq``, or None: one indexed
    row per type."""
    upto = seq_bound(read_session(rows, session_id).next_seq, upto_seq)
    latest: SessionEvent | None = None
    for type_ in types:
        params = {"session_id": session_id, "type": type_, "upto": upto}
        found = rows_to_events(
            session_id, rows.fetch("latest_event_of_type", params), expect_seq=None
        )
        if found and (latest is None or found[0].seq > latest.seq):
            latest = found[0]
    return latest


def checkpoint_list(rows: Rows, session_id: str) -> list[CheckpointInfo]:
    """``(seq, format_version, created_at, size of the state text)`` of each checkpoint."""
    read_session(rows, session_id, check_format=False)
    found = rows.fetch("checkpoint_list", {"session_id": session_id})
    return [CheckpointInfo(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in found]


def checkpoint_texts(rows: Rows, session_id: str) -> list[CheckpointText]:
    """``(seq, state text)`` of each checkpoint, oldest first (for `verify`)."""
    return [
        CheckpointText(r[0], r[1])
        for r in rows.fetch("checkpoint_texts", {"session_id": session_id})
    ]


def count_of_type(rows: Rows, session_id: str, event_type: str | None) -> int:
    row = read_session(rows, session_id, check_format=False)
    if event_type is None:
        return int(row.next_seq)
    found = rows.fetch("count_of_type", {"session_id": session_id, "type": event_type})
    return int(found[0][0])


_STORED_FIELDS = ("seq", "type", "time", "data", "surface_op", "source_event_seqs", "ignorable")


def append_outcome(rows: Rows, batch: AppendBatch) -> AppendOutcome | None:
    """What became of an append (`recorder.AppendBatch`) whose commit was never confirmed.

    None: the batch is not stored (the session does not exist yet, or ends before the batch's
    first seq). The batch's rows stored byte-identical: the append happened; returns its outcome
    ``(incarnation, revision, next_seq)`` (the revision is the session's current one: later
    appends by others may have advanced it). Other rows at those seqs: `SeqConflictError`.
    """
    session_id, first = batch.session_id, batch.first_seq
    row = find_session(rows, session_id)
    if row is None or row.next_seq <= first:
        if row is not None:
            check_batch_start(session_id, first, row.next_seq)  # a gap is a conflict
        return None
    end = first + len(batch.rows)
    found = rows.fetch("events", {"session_id": session_id, "from_seq": first, "upto": end})
    wanted = [tuple(r[f] for f in _STORED_FIELDS) for r in batch.rows]
    stored = [(*r[:6], bool(r[6])) for r in found]
    if stored != [(*w[:6], bool(w[6])) for w in wanted]:
        check_batch_start(session_id, first, row.next_seq)  # raises: others were first
    return row.incarnation, row.revision, row.next_seq


WITHOUT_SNAPSHOT: frozenset[Callable[..., Any]] = frozenset(
    {
        find_session,
        read_session,
        list_sessions,
        read_summary,
        read_store_id,
        latest_todos,
        count_of_type,
        session_ids,
    }
)
"""Operations that are consistent without a snapshot of their own: one statement, or a second
statement bounded by the first's immutable prefix (rows below next_seq never change). On
PostgreSQL they skip the REPEATABLE READ transaction and save two round trips."""
