"""Rows to values and back: events and headers as the tables hold them.

Reading is strict: a row that cannot be decoded raises `CorruptSessionError` naming the session
and seq; an unregistered event type not marked ignorable raises `FormatUnsupportedError`
(once every installed vocabulary is loaded: `todo_sessions._vocabularies`);
a stored ``todo/write`` must still satisfy the todo rules. Nothing is ever skipped silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .._vocabularies import known
from ..core.catalog import EVENT_TYPES, FORMAT_VERSION
from ..core.envelope import MAX_INT, SessionEvent, SurfaceOp, parse_surface_op
from ..core.header import SessionHeader
from ..core.jsonvalue import canonical_json, decode_fast
from ..core.todos import todo_list_problem
from ..core.types import TODO_WRITE
from ..errors import CorruptSessionError, FormatUnsupportedError, InvalidEventError
from .records import SessionRow

__all__ = [
    "check_format_version",
    "event_row",
    "header_from_row",
    "header_row",
    "rows_to_events",
]


def event_row(session_id: str, event: SessionEvent) -> dict[str, Any]:
    """The ``session_events`` row of an event (JSON columns as canonical text)."""
    op = event.surface_op
    return {
        "session_id": session_id,
        "seq": event.seq,
        "type": event.type,
        "time": event.time,
        "data": event.data_json,
        "surface_op": None
        if op is None
        else '"append"'
        if op == "append"
        else canonical_json(op.to_wire()),
        "source_event_seqs": None
        if event.source_event_seqs is None
        else canonical_json(list(event.source_event_seqs)),
        "ignorable": event.ignorable,
    }


def header_row(header: SessionHeader) -> dict[str, Any]:
    return {
        "id": header.id,
        "format_version": header.format_version,
        "created_at": header.created_at,
        "cwd": header.cwd,
        "parent_session": header.parent_session,
        "seed_length": header.seed_length,
        "origin": header.origin,
        "delegation_depth": header.delegation_depth,
        "title": header.title,
    }


def check_format_version(session_id: str, version: int) -> None:
    if version > FORMAT_VERSION:
        raise FormatUnsupportedError(
            f"session {session_id!r} was written by a newer version of todo_sessions "
            f"(log format {version}; this version reads format {FORMAT_VERSION} and older)",
            session_id=session_id,
        )


def header_from_row(row: SessionRow) -> SessionHeader:
    """A header from a ``sessions`` row."""
    check_format_version(row.id, row.format_version)
    try:
        return SessionHeader(
            id=row.id,
            created_at=row.created_at,
            cwd=row.cwd,
            parent_session=row.parent_session,
            seed_length=row.seed_length,
            origin=row.origin,
            delegation_depth=row.delegation_depth,
            title=row.title,
            format_version=row.format_version,
        )
    except InvalidEventError as exc:
        raise CorruptSessionError(row.id, None, f"stored header is invalid: {exc}") from None


def _surface_op(text: str) -> SurfaceOp:
    if text == '"append"':  # what `event_row` writes for every appended surface row
        return "append"
    op = parse_surface_op(decode_fast(text))  # InvalidEventError is a ValueError
    if op is None:
        raise ValueError(f"surface_op {text!r} is not a surface op")
    return op


def _source_seqs(text: str) -> tuple[int, ...]:
    value = decode_fast(text)
    if not isinstance(value, list) or not all(type(s) is int and 0 <= s <= MAX_INT for s in value):
        raise ValueError(f"source_event_seqs {text!r} is not a list of seqs")
    return tuple(value)


def rows_to_events(
    session_id: str, rows: Iterable[Sequence[Any]], *, expect_seq: int | None
) -> list[SessionEvent]:
    """Decode ``(seq, type, time, data, surface_op, source_event_seqs, ignorable)`` rows.

    Rows must run contiguously from ``expect_seq``; a gap raises `CorruptSessionError`.
    ``expect_seq=None`` reads a sparse selection (surface rows) without that check.
    """
    events: list[SessionEvent] = []
    append = events.append
    trusted = SessionEvent._trusted
    registry = EVENT_TYPES
    seq = expect_seq
    for row in rows:
        row_seq, kind, time, data_text, op_text, seqs_text, ignorable = row
        if seq is not None and row_seq != seq:
            detail = f"seq {seq} is missing (next stored row has seq {row_seq})"
            raise CorruptSessionError(session_id, seq, detail)
        try:
            data = decode_fast(data_text)
            op = None if op_text is None else _surface_op(op_text)
            seqs = None if seqs_text is None else _source_seqs(seqs_text)
            if type(time) is not int:
                raise ValueError(f"time {time!r} is not an integer")
        except (ValueError, TypeError) as exc:
            raise CorruptSessionError(
                session_id, row_seq, f"{kind!r} row cannot be decoded: {exc}"
            ) from None
        ignorable = bool(ignorable)
        if kind not in registry and not known(kind):  # loads every installed vocabulary once
            if not ignorable:
                raise FormatUnsupportedError(
                    f"session {session_id!r}: event type {kind!r} (seq {row_seq}) is not known "
                    "to this version and is not marked ignorable",
                    session_id=session_id,
                    seq=row_seq,
                )
        elif kind == TODO_WRITE:
            problem = (
                todo_list_problem(data.get("todos"))
                if isinstance(data, dict)
                else "data is not an object"
            )
            if problem:
                raise CorruptSessionError(
                    session_id, row_seq, f"stored todo/write is invalid: {problem}"
                )
        append(trusted(kind, row_seq, time, data, data_text, op, seqs, ignorable))
        if seq is not None:
            seq += 1
    return events
