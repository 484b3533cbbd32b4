"""JSONL export and import of one session.

Line 1 is a header object ``{"kind": "todo-sessions/session", "formatVersion": 0, "header":
{...}}``; every further line is one event in its wire JSON (docs/format.md, "JSONL files").
Export streams (constant memory for any session size). Import validates every line before
writing anything, then writes the session in one transaction; export → import → export is
byte-identical.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass

from .core.catalog import FORMAT_VERSION, validate_event
from .core.envelope import SessionEvent
from .core.header import SessionHeader
from .core.surface import SurfaceState
from .errors import InvalidEventError
from .store.store import SessionStore

__all__ = ["KIND", "ImportResult", "export_lines", "import_lines", "parse_lines"]

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


def parse_lines(
    lines: Iterable[str], *, progress: Progress | None = None
) -> tuple[SessionHeader, list[SessionEvent]]:
    """Parse and validate a whole JSONL session; a bad line raises with its line number."""
    iterator = iter(lines)
    first = next(iterator, None)
    if first is None:
        raise _fail(1, "empty file: expected a header line")
    first = first.removeprefix("\ufeff")  # a UTF-8 byte order mark from some editors
    try:
        head = json.loads(first)
    except json.JSONDecodeError as exc:
        raise _fail(1, f"header is not JSON: {exc}") from None
    if not isinstance(head, dict) or head.get("kind") != KIND:
        raise _fail(1, f'not a todo-sessions export (expected "kind": "{KIND}")')
    version = head.get("formatVersion")
    if type(version) is not int or version > FORMAT_VERSION:
        raise _fail(1, f"formatVersion {version!r} is not supported (newest: {FORMAT_VERSION})")
    try:
        header = SessionHeader.model_validate(head.get("header"))
    except ValueError as exc:
        raise _fail(1, f"invalid header: {exc}") from None
    events: list[SessionEvent] = []
    surface = SurfaceState(build_messages=False)
    for number, text in enumerate(iterator, start=2):
        if not text.strip():
            continue
        try:
            event = SessionEvent.from_json(text)
            validate_event(event)
            if event.seq != len(events):
                raise _fail(number, f"event has seq {event.seq}, expected {len(events)}")
            surface.apply(event)
        except InvalidEventError as exc:
            if exc.field and exc.field.startswith("line "):
                raise
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
