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
import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from .core.catalog import FORMAT_VERSION, validate_event
from .core.chain import chain_values
from .core.envelope import SessionEvent
from .core.header import SessionHeader, shown
from .core.jsonvalue import LosslessJSONError, decode_json
from .core.request_header import is_legacy_request_header, upcast_request_header
from .core.verify import LogChecker, errors_of
from .errors import InvalidEventError
from .store.codec import event_row, header_row
from .store.store import SessionStore

__all__ = [
    "KIND",
    "MAX_LINE_BYTES",
    "REFERENCE_HEADER_TYPE",
    "ImportResult",
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

KIND = "todo-sessions/session"
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


def header_line(header: SessionHeader, chain: tuple[int, str | None] | None = None) -> str:
    """The header line; ``chain``: ``(seq, value)`` of the last event's hash chain value
    (`SessionStore.chain_head`), carried as ``"chain": {"seq": ..., "head": ...}``."""
    head: dict[str, Any] = {
        "kind": KIND,
        "formatVersion": header.format_version,
        "header": header.to_wire(),
    }
    if chain is not None:
        head["chain"] = {"seq": chain[0], "head": chain[1]}
    return json.dumps(head, ensure_ascii=False, separators=(",", ":"))


async def export_lines(
    store: SessionStore, session_id: str, *, progress: Progress | None = None
) -> AsyncIterator[str]:
    """The JSONL lines (without newlines) of a stored session, read page by page: the header
    line carries the chain value of the last event exported (docs/format.md, "The hash
    chain"); events appended meanwhile are not exported."""
    header = await store.header(session_id)
    chain = await store.chain_head(session_id)
    yield header_line(header, chain)
    if chain is None:
        return
    last = chain[0]
    events = store.stream(session_id)
    async with aclosing(events):  # type: ignore[type-var]  # an async generator
        async for event in events:
            yield event.to_json()
            if progress is not None:
                progress(1)
            if event.seq >= last:
                break


def file_chain(
    header: SessionHeader, events: Iterable[SessionEvent], key: bytes = b""
) -> dict[int, str]:
    """The hash chain value of each event of a file, by seq, computed from its lines (`key`:
    `core.chain.derive_key` of the secret the database's chain was keyed with)."""
    rows = (event_row(header.id, e) for e in events)
    return dict(enumerate(chain_values(header_row(header), rows, key)))


def declared_chain(text: str) -> tuple[int, str | None] | None:
    """``(seq, value)`` that an export's header line carries, or None (an older export, a
    reference file, a session without events)."""
    try:
        head = decode_json(text.removeprefix("\ufeff"))
    except LosslessJSONError:
        return None
    chain = head.get("chain") if isinstance(head, dict) else None
    if not isinstance(chain, dict) or type(chain.get("seq")) is not int:
        return None
    value = chain.get("head")
    return chain["seq"], value if isinstance(value, str) else None


def file_chain_problem(
    declared: tuple[int, str | None] | None, computed: dict[int, str]
) -> str | None:
    """Why a file's events do not lead to the chain head its header line carries (they, or
    its header, were edited after the export), or None."""
    if declared is None:
        return None
    seq, value = declared
    if computed.get(seq) != value:
        return (
            f"the file's events do not lead to the chain value its header line carries for "
            f"seq {seq}: the file was edited after the export (or chained with another key)"
        )
    if max(computed, default=-1) > seq:
        return f"the file holds events past seq {seq}, the last its export carried"
    return None


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


MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line `import_lines` / `parse_lines` take by default (64 MiB of UTF-8), as the
CLI's ``import --max-line-bytes``."""


def _too_long(line: str | bytes, limit: int) -> bool:
    """Whether ``line`` holds more than ``limit`` bytes of UTF-8, its line ending aside."""
    size = len(line)
    if isinstance(line, str):
        if size * 4 <= limit + 2:  # at most 4 bytes a character: no need to encode
            return False
        line = line.encode("utf-8", "surrogatepass")
    ending = 2 if line.endswith(b"\r\n") else 1 if line.endswith(b"\n") else 0
    return len(line) - ending > limit


def numbered_lines(
    lines: Iterable[str | bytes], max_line_bytes: int | None = None
) -> Iterator[tuple[int, str]]:
    """``(line number, text)``; undecodable input, or a line longer than ``max_line_bytes``
    (UTF-8, its newline aside), is an `InvalidEventError` naming its line."""
    iterator = iter(lines)
    number = 0
    while True:
        number += 1
        try:
            line = next(iterator)
            if max_line_bytes is not None and _too_long(line, max_line_bytes):
                raise _fail(
                    number,
                    f"the line is longer than {max_line_bytes} bytes (the limit: "
                    "max_line_bytes), nothing imported",
                )
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


def _unpacked(numbered: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """The event lines of a reference file, each packed chunk row replaced by the lines of the
    ``assistant/chunk`` events it stands for (all with the row's line number)."""
    for number, text in numbered:
        if "-chunks" not in text:  # (cheap: most lines are plain events)
            yield number, text
            continue
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
                yield number, json.dumps(wire, ensure_ascii=False, separators=(",", ":"))
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
            "type": "assistant/chunk",
            "seq": seq + k,
            "time": time,
            "data": {"turn": data["turn"], "step": data["step"], "chunk": chunk},
        }


def parse_lines(
    lines: Iterable[str | bytes],
    *,
    progress: Progress | None = None,
    max_line_bytes: int | None = MAX_LINE_BYTES,
) -> tuple[SessionHeader, list[SessionEvent]]:
    """Parse and validate a whole JSONL session; a bad line raises `InvalidEventError` with its
    line number. Each event is checked by the rules `verify` applies (`core.verify.LogChecker`:
    payload, turn/step structure, every tool call answered when its turn closes, surface
    rules), so what imports is exactly what `verify` accepts (a last turn left open is both:
    `load` closes it). A line over ``max_line_bytes`` (None: no limit) is refused before it is
    parsed."""
    numbered = numbered_lines(lines, max_line_bytes)
    first = next(numbered, None)
    if first is None:
        raise _fail(1, "empty file: expected a header line")
    header = parse_header_line(first[1])
    if _is_reference_header(first[1]):
        numbered = _unpacked(numbered)
    events: list[SessionEvent] = []
    log = LogChecker()
    for number, event in event_lines(numbered, first_seq=0):
        errors = errors_of(log.check(event, validated=True))
        if errors:
            raise _fail(number, errors[0].message)
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
    max_line_bytes: int | None = MAX_LINE_BYTES,
) -> ImportResult:
    """Validate every line, then store the session in one transaction.

    Importing an id that already exists is refused (`SessionExistsError`) unless ``as_id``
    gives a new one; a line longer than ``max_line_bytes`` (default 64 MiB; None: no limit)
    is refused with nothing written (`InvalidEventError` naming it).
    """
    header, events = parse_lines(lines, progress=progress, max_line_bytes=max_line_bytes)
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
    return json.dumps(head, ensure_ascii=False, separators=(",", ":"))


def _reference_event(event: SessionEvent, headers_seen: int) -> str:
    """One event as the reference reads it: a request/header in our earlier shape upcast, a
    type the reference does not know (our session/meta, an embedder's) marked ignorable."""
    from .core.vocabulary import REFERENCE_EVENT_TYPES

    if event.type == "request/header" and is_legacy_request_header(event.data):
        reason = "initial" if headers_seen == 0 else "change"
        data = upcast_request_header(event.data, reason=reason)
        return event.replace(data=data).to_json()
    if event.type not in REFERENCE_EVENT_TYPES and not event.ignorable:
        return event.replace(ignorable=True).to_json()
    return event.to_json()


def _packable(event: SessionEvent) -> str | None:
    """The chunk type of an ``assistant/chunk`` the reference would pack, else None."""
    if event.type != "assistant/chunk" or event.surface_op is not None or event.ignorable:
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
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


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
        if event.type == "request/header":
            headers_seen += 1
    for line in flush():
        yield line
