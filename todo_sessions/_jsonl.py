"""JSONL export and import of one session.

Line 1 is a header object ``{"kind": "todo-sessions/session", "formatVersion": 0, "header":
{...}}``; every further line is one event in its wire JSON (docs/format.md, "JSONL files").
Import also reads the reference harness's session files (header ``{"type": "session",
"version": 0, ...}``, chunk runs packed into ``text-chunks``, ``reasoning-chunks`` and
``tool-call-chunks`` rows), and `reference_lines` writes one (docs/format.md, "Exchanging files
with the reference").
Export streams (constant memory for any session size). Import validates every line before
writing anything, then writes the session in one transaction; export → import → export is
byte-identical.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ._filecheck import (
    MAX_BYTES,
    MAX_EVENTS,
    MAX_LINE_BYTES,
    check_file_chain,
    declared_chain,
    file_chain,
    file_chain_problem,
    numbered_lines,
)
from ._filecheck import line_error as _fail
from ._vocabularies import known
from .core.catalog import FORMAT_VERSION, validate_event
from .core.envelope import SessionEvent
from .core.header import KIND, SessionHeader, header_line, shown
from .core.jsonvalue import LosslessJSONError, canonical_json, decode_json
from .core.request_header import is_legacy_request_header, upcast_request_header
from .core.types import ASSISTANT_CHUNK, REQUEST_HEADER
from .core.verify import LogChecker, Problem, errors_of
from .errors import ImportLimitError, InvalidEventError
from .store.exporting import chain_key_of, export_lines
from .store.store import SessionStore

__all__ = [
    "KIND",
    "MAX_BYTES",
    "MAX_EVENTS",
    "MAX_LINE_BYTES",
    "REFERENCE_HEADER_TYPE",
    "ImportResult",
    "check_file_chain",
    "declared_chain",
    "event_lines",
    "export_lines",
    "file_chain",
    "file_chain_problem",
    "header_line",
    "import_lines",
    "numbered_lines",
    "parse_header_line",
    "parse_lines",
    "reference_header_line",
    "reference_lines",
]

REFERENCE_HEADER_TYPE = "session"
"""``type`` of the reference harness's header line."""
_CHUNK_ROWS = {
    "text-chunks": "text-delta",
    "reasoning-chunks": "reasoning-delta",
    "tool-call-chunks": "tool-call-delta",
}
"""The reference's packed chunk rows: the chunk type each row's members have."""
_MIN_RUN = 3
"""Fewest chunk events the reference packs into one row (fewer stay event lines)."""
_REFERENCE_HEADER_KEYS = {
    "id": "id",
    "createdAt": "created_at",
    "cwd": "cwd",
    "parentSession": "parent_session",
    "seedLength": "seed_length",
    "origin": "origin",
    "delegationDepth": "delegation_depth",
}

Progress = Callable[[int], None]


def event_lines(
    numbered: Iterable[tuple[int, str]], *, first_seq: int | None
) -> Iterator[tuple[int, SessionEvent]]:
    """``(line number, event)`` of the event lines that follow a header, blank lines skipped:
    each parsed and validated as an append would validate it, the seqs contiguous from
    ``first_seq`` (None: from the first line's). A bad line is an `InvalidEventError` naming
    it."""
    expected = first_seq
    for number, text in numbered:
        if not text.strip():
            continue
        try:
            event = SessionEvent.from_json(text)
            known(event.type)  # an unregistered type: every installed vocabulary loads once
            validate_event(event)
        except InvalidEventError as exc:
            raise _fail(number, str(exc), exc) from None
        if expected is not None and event.seq != expected:
            raise _fail(number, f"event has seq {event.seq}, expected {expected}")
        expected = event.seq + 1
        yield number, event


def parse_header_line(text: str) -> SessionHeader:
    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark from some editors
    try:
        head = decode_json(text)
    except LosslessJSONError as exc:
        raise _fail(1, f"header is not JSON: {exc.reason}") from None
    if isinstance(head, dict) and head.get("type") == REFERENCE_HEADER_TYPE and "kind" not in head:
        return _reference_header(head)
    if not isinstance(head, dict) or head.get("kind") != KIND:
        raise _fail(
            1,
            f'not a todo-sessions export (expected "kind": "{KIND}") nor a reference session '
            'file (expected "type": "session")',
        )
    version = head.get("formatVersion")
    if type(version) is not int or version > FORMAT_VERSION:
        raise _fail(
            1, f"formatVersion {shown(version)} is not supported (newest: {FORMAT_VERSION})"
        )
    try:
        return SessionHeader.model_validate(head.get("header"))
    except InvalidEventError as exc:
        raise _fail(1, f"invalid header: {exc}") from None


def _reference_header(head: dict[str, Any]) -> SessionHeader:
    """Our header for the reference's header line (format version 0 only, as its loader)."""
    version = head.get("version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise _fail(
            1, f"reference session file version {shown(version)} is not supported (reads 0)"
        )
    unknown = sorted(set(head) - {"type", "version", *_REFERENCE_HEADER_KEYS})
    if unknown:  # e.g. agentPreset: our header has no place for it, and nothing is dropped
        raise _fail(1, f"reference session header keys {unknown} are not kept by todo-sessions")
    fields = {
        ours: head[theirs] for theirs, ours in _REFERENCE_HEADER_KEYS.items() if theirs in head
    }
    try:
        return SessionHeader(**fields)
    except InvalidEventError as exc:
        raise _fail(1, f"invalid header: {exc}") from None


def _unpacked(
    numbered: Iterable[tuple[int, str]], max_events: int | None = None
) -> Iterator[tuple[int, str]]:
    """The event lines of a reference file, each packed chunk row replaced by the lines of the
    ``assistant/chunk`` events it stands for (all with the row's line number). A row that
    may stand for more than ``max_events`` events (two commas a member, four allowed) is
    refused before it is decoded: a few KB of gzip can hold one of millions."""
    for number, text in numbered:
        if "-chunks" not in text:  # (cheap: most lines are plain events)
            yield number, text
            continue
        if max_events is not None and text.count(",") > 4 * max_events + 64:
            detail = f"line {number}: a packed chunk row stands for more than {max_events} events"
            raise ImportLimitError("max_events", max_events, detail)
        try:
            row = decode_json(text)
        except LosslessJSONError:
            yield number, text  # event_lines names the problem
            continue
        if not isinstance(row, dict) or row.get("type") not in _CHUNK_ROWS:
            yield number, text
            continue
        try:
            for wire in _expand_row(row):
                yield number, canonical_json(wire)
        except (KeyError, TypeError, ValueError) as exc:
            raise _fail(number, f"malformed {row.get('type')} row: {exc}") from None


def _expand_row(row: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if set(row) != {"type", "seq0", "time0", "data"}:
        raise ValueError(f"keys {sorted(row)}")
    kind, data = _CHUNK_ROWS[row["type"]], row["data"]
    seq, time = row["seq0"], row["time0"]
    parts = data["args"] if kind == "tool-call-delta" else data["texts"]
    gaps = data["dt"]
    if type(seq) is not int or type(time) is not int or not isinstance(parts, list):
        raise ValueError("seq0, time0 must be integers and the members a list")
    if not isinstance(gaps, list) or len(gaps) != len(parts) - 1 or not parts:
        raise ValueError(f"{len(parts)} members need {max(len(parts) - 1, 0)} gaps in dt")
    for k, part in enumerate(parts):
        if k:
            gap = gaps[k - 1]
            if type(gap) is not int:
                raise ValueError(f"dt[{k - 1}] is not an integer")
            time += gap
        chunk: dict[str, Any] = {"type": kind, "index": data["index"]}
        if kind == "tool-call-delta":
            chunk["id"] = data["id"]
            if "name" in data:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = part
        else:
            chunk["text"] = part
        yield {
            "type": ASSISTANT_CHUNK,
            "seq": seq + k,
            "time": time,
            "data": {"turn": data["turn"], "step": data["step"], "chunk": chunk},
        }


def _refused(line: int, event: SessionEvent, problem: Problem) -> InvalidEventError:
    """The error of a line whose event `verify` would refuse, naming the line, type and seq."""
    return InvalidEventError(
        f"line {line}: {problem.message}",
        event_type=event.type,
        seq=event.seq if problem.seq is None else problem.seq,
        field=f"line {line}",
    )


def parse_lines(
    lines: Iterable[str | bytes],
    *,
    progress: Progress | None = None,
    max_line_bytes: int | None = MAX_LINE_BYTES,
    max_bytes: int | None = MAX_BYTES,
    max_events: int | None = MAX_EVENTS,
    chain_of: SessionStore | None = None,
) -> tuple[SessionHeader, list[SessionEvent]]:
    """Parse and validate a whole JSONL session; a bad line raises `InvalidEventError` with its
    line number. Each event is checked by the rules `verify` applies (`core.verify.LogChecker`:
    payload, turn/step structure, every tool call answered when its turn closes, surface
    rules), so what imports is exactly what `verify` accepts (a last turn left open is both:
    `load` closes it). A line over ``max_line_bytes`` is refused before it is parsed; more
    than ``max_bytes`` of lines in all or more than ``max_events`` events is an
    `ImportLimitError` (each: None, no limit). ``chain_of``: a store whose chain key the
    file's chain value is checked with (`check_file_chain`), as `import_lines` does."""
    numbered = numbered_lines(lines, max_line_bytes, max_bytes)
    first = next(numbered, None)
    if first is None:
        raise _fail(1, "empty file: expected a header line")
    header = parse_header_line(first[1])
    if _is_reference_header(first[1]):
        numbered = _unpacked(numbered, max_events)
    events: list[SessionEvent] = []
    log = LogChecker()
    for number, event in event_lines(numbered, first_seq=0):
        if max_events is not None and len(events) >= max_events:
            detail = f"line {number}: the file holds more than {max_events} events"
            raise ImportLimitError("max_events", max_events, detail)
        errors = errors_of(log.check(event, validated=True))
        if errors:
            raise _refused(number, event, errors[0])
        events.append(event)
        if progress is not None:
            progress(1)
    if chain_of is not None:
        check_file_chain(first[1], header, events, chain_key_of(chain_of))
    return header, events


@dataclass(frozen=True)
class ImportResult:
    session_id: str
    events: int
    revision: str


async def import_lines(
    store: SessionStore,
    lines: Iterable[str | bytes],
    *,
    as_id: str | None = None,
    progress: Progress | None = None,
    max_line_bytes: int | None = MAX_LINE_BYTES,
    max_bytes: int | None = MAX_BYTES,
    max_events: int | None = MAX_EVENTS,
) -> ImportResult:
    """Validate every line, and the chain value the header line carries against the events
    with the store's chain key (`check_file_chain`), then store the session in one
    transaction.

    Importing an id that already exists is refused (`SessionExistsError`) unless ``as_id``
    gives a new one; a line longer than ``max_line_bytes`` (default 64 MiB), more than
    ``max_bytes`` in all (64 MiB) or ``max_events`` events (200,000) is refused with nothing
    written (`InvalidEventError` naming the line, `ImportLimitError` naming the limit; None:
    no limit).
    """
    header, events = parse_lines(
        lines,
        progress=progress,
        max_line_bytes=max_line_bytes,
        max_bytes=max_bytes,
        max_events=max_events,
        chain_of=store,
    )
    if as_id is not None:
        header = header.model_copy(update={"id": SessionHeader(id=as_id, created_at=0).id})
    if not events:
        raise InvalidEventError("the export holds no events: nothing to import")
    await store.create(header)
    revision = await store.append(header.id, events)  # validated above: not checked again
    return ImportResult(header.id, len(events), revision)


def _is_reference_header(text: str) -> bool:
    try:
        head = decode_json(text.removeprefix("\ufeff"))
    except LosslessJSONError:
        return False
    return isinstance(head, dict) and head.get("type") == REFERENCE_HEADER_TYPE


# -- the reference's format -------------------------------------------------------------------


def reference_header_line(header: SessionHeader) -> str:
    """The reference's header line for ``header`` (our ``title`` has no place there)."""
    head: dict[str, Any] = {"type": REFERENCE_HEADER_TYPE, "version": header.format_version}
    for theirs, ours in _REFERENCE_HEADER_KEYS.items():
        value = getattr(header, ours)
        if value is not None:
            head[theirs] = value
    return canonical_json(head)


def _reference_event(event: SessionEvent, headers_seen: int) -> str:
    """One event as the reference reads it: a request/header in our earlier shape upcast, a
    type the reference does not know (our session/meta, an embedder's) marked ignorable."""
    from .core.vocabulary import REFERENCE_EVENT_TYPES

    if event.type == REQUEST_HEADER and is_legacy_request_header(event.data):
        reason = "initial" if headers_seen == 0 else "change"
        data = upcast_request_header(event.data, reason=reason)
        return event.replace(data=data).to_json()
    if event.type not in REFERENCE_EVENT_TYPES and not event.ignorable:
        return event.replace(ignorable=True).to_json()
    return event.to_json()


def _packable(event: SessionEvent) -> str | None:
    """The chunk type of an ``assistant/chunk`` the reference would pack, else None."""
    if event.type != ASSISTANT_CHUNK or event.surface_op is not None or event.ignorable:
        return None
    data = event.data
    if set(data) != {"turn", "step", "chunk"} or type(data["turn"]) is not int:
        return None
    chunk = data["chunk"]
    if type(data["step"]) is not int or not isinstance(chunk, dict):
        return None
    kind, index = chunk.get("type"), chunk.get("index")
    if type(index) is not int:
        return None
    if kind in ("text-delta", "reasoning-delta"):
        ok = set(chunk) == {"type", "index", "text"} and isinstance(chunk["text"], str)
    elif kind == "tool-call-delta":
        keys = set(chunk)
        ok = (
            keys
            in (
                {"type", "index", "id", "argumentsDelta"},
                {"type", "index", "id", "name", "argumentsDelta"},
            )
            and isinstance(chunk["id"], str)
            and isinstance(chunk["argumentsDelta"], str)
            and isinstance(chunk.get("name", ""), str)
        )
    else:
        ok = False
    return kind if ok else None


def _run_key(event: SessionEvent) -> tuple[Any, ...]:
    chunk = event.data["chunk"]
    call = (chunk.get("id"), "name" in chunk, chunk.get("name"))
    return (event.data["turn"], event.data["step"], chunk["index"], chunk["type"], call)


def _row(run: list[SessionEvent]) -> str:
    first = run[0]
    chunk = first.data["chunk"]
    data: dict[str, Any] = {
        "turn": first.data["turn"],
        "step": first.data["step"],
        "index": chunk["index"],
        "dt": [b.time - a.time for a, b in itertools.pairwise(run)],
    }
    kind = chunk["type"]
    if kind == "tool-call-delta":
        data["id"] = chunk["id"]
        if "name" in chunk:
            data["name"] = chunk["name"]
        data["args"] = [e.data["chunk"]["argumentsDelta"] for e in run]
        tag = "tool-call-chunks"
    else:
        data["texts"] = [e.data["chunk"]["text"] for e in run]
        tag = "text-chunks" if kind == "text-delta" else "reasoning-chunks"
    row = {"type": tag, "seq0": first.seq, "time0": first.time, "data": data}
    return canonical_json(row)


async def reference_lines(
    store: SessionStore,
    session_id: str,
    *,
    pack_chunks: bool = True,
    progress: Progress | None = None,
) -> AsyncIterator[str]:
    """The session as the reference harness's session file: its header line, then its event
    lines, runs of 3 or more chunk deltas of one block packed into rows as the reference
    packs them (``pack_chunks=False``: one line per event). Streams, like `export_lines`."""
    header = await store.header(session_id)
    yield reference_header_line(header)
    run: list[SessionEvent] = []
    headers_seen = 0

    def flush() -> Iterator[str]:
        if len(run) >= _MIN_RUN:
            yield _row(run)
        else:
            yield from (e.to_json() for e in run)
        run.clear()

    async for event in store.stream(session_id):
        if progress is not None:
            progress(1)
        if pack_chunks and _packable(event) is not None:
            if run and (_run_key(run[-1]) != _run_key(event) or event.seq != run[-1].seq + 1):
                for line in flush():
                    yield line
            run.append(event)
            continue
        for line in flush():
            yield line
        yield _reference_event(event, headers_seen)
        if event.type == REQUEST_HEADER:
            headers_seen += 1
    for line in flush():
        yield line
