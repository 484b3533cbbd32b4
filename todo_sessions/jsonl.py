"""JSONL export and import of one session.

Line 1 is a header object ``{"kind": "todo-sessions/session", "formatVersion": 0, "header":
{...}}``; every further line is one event in its wire JSON (docs/format.md, "JSONL files").
Export streams (constant memory for any session size). Import validates every line before
writing anything, then writes the session in one transaction; export → import → export is
byte-identical.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass

from .core.catalog import FORMAT_VERSION, validate_event
from .core.envelope import SessionEvent
from .core.header import SessionHeader, shown
from .core.jsonvalue import LosslessJSONError, decode_json
from .core.structure import StructureChecker
from .core.surface import SurfaceState
from .errors import InvalidEventError, StructureError
from .store.store import SessionStore

__all__ = [
    "KIND",
    "ImportResult",
    "event_lines",
    "export_lines",
    "header_line",
    "import_lines",
    "numbered_lines",
    "parse_header_line",
    "parse_lines",
]

KIND = "todo-sessions/session"

Progress = Callable[[int], None]


def header_line(header: SessionHeader) -> str:
    return json.dumps(
        {"kind": KIND, "formatVersion": header.format_version, "header": header.to_wire()},
        ensure_ascii=False,
        separators=(",", ":"),
    )


async def export_lines(
    store: SessionStore, session_id: str, *, progress: Progress | None = None
) -> AsyncIterator[str]:
    """The JSONL lines (without newlines) of a stored session, read page by page."""
    header = await store.header(session_id)
    yield header_line(header)
    async for event in store.stream(session_id):
        yield event.to_json()
        if progress is not None:
            progress(1)


def _fail(line: int, message: str) -> InvalidEventError:
    return InvalidEventError(f"line {line}: {message}", field=f"line {line}")


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
            validate_event(event)
        except InvalidEventError as exc:
            raise _fail(number, str(exc)) from None
        if expected is not None and event.seq != expected:
            raise _fail(number, f"event has seq {event.seq}, expected {expected}")
        expected = event.seq + 1
        yield number, event


def numbered_lines(lines: Iterable[str | bytes]) -> Iterator[tuple[int, str]]:
    """``(line number, text)``; undecodable input is an `InvalidEventError` naming its line."""
    iterator = iter(lines)
    number = 0
    while True:
        number += 1
        try:
            line = next(iterator)
            if isinstance(line, bytes | bytearray):
                line = bytes(line).decode("utf-8")
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            bad = exc.object[exc.start] if exc.start < len(exc.object) else 0
            problem = f"not UTF-8 text (byte 0x{bad:02x} at column {exc.start + 1})"
            raise _fail(number, problem) from None
        yield number, line


def parse_header_line(text: str) -> SessionHeader:
    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark from some editors
    try:
        head = decode_json(text)
    except LosslessJSONError as exc:
        raise _fail(1, f"header is not JSON: {exc.reason}") from None
    if not isinstance(head, dict) or head.get("kind") != KIND:
        raise _fail(1, f'not a todo-sessions export (expected "kind": "{KIND}")')
    version = head.get("formatVersion")
    if type(version) is not int or version > FORMAT_VERSION:
        raise _fail(
            1, f"formatVersion {shown(version)} is not supported (newest: {FORMAT_VERSION})"
        )
    try:
        return SessionHeader.model_validate(head.get("header"))
    except InvalidEventError as exc:
        raise _fail(1, f"invalid header: {exc}") from None


def parse_lines(
    lines: Iterable[str | bytes], *, progress: Progress | None = None
) -> tuple[SessionHeader, list[SessionEvent]]:
    """Parse and validate a whole JSONL session; a bad line raises `InvalidEventError` with its
    line number. Each event is checked as an append would check it (payload, surface rules)
    and against the turn/step structure, so what imports is what `verify` accepts."""
    numbered = numbered_lines(lines)
    first = next(numbered, None)
    if first is None:
        raise _fail(1, "empty file: expected a header line")
    header = parse_header_line(first[1])
    events: list[SessionEvent] = []
    surface = SurfaceState(build_messages=False)
    structure = StructureChecker()
    for number, event in event_lines(numbered, first_seq=0):
        try:
            surface.apply(event)
            structure.apply(event)
        except (InvalidEventError, StructureError) as exc:
            raise _fail(number, str(exc)) from None
        events.append(event)
        if progress is not None:
            progress(1)
    return header, events


@dataclass(frozen=True)
class ImportResult:
    session_id: str
    events: int
    revision: str


async def import_lines(
    store: SessionStore,
    lines: Iterable[str],
    *,
    as_id: str | None = None,
    progress: Progress | None = None,
) -> ImportResult:
    """Validate every line, then store the session in one transaction.

    Importing an id that already exists is refused (`SessionExistsError`) unless ``as_id``
    gives a new one.
    """
    header, events = parse_lines(lines, progress=progress)
    if as_id is not None:
        header = header.model_copy(update={"id": SessionHeader(id=as_id, created_at=0).id})
    if not events:
        raise InvalidEventError("the export holds no events: nothing to import")
    await store.create(header)
    revision = await store.append(header.id, events)  # validated above: not checked again
    return ImportResult(header.id, len(events), revision)
