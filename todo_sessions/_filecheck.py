"""Checks of a JSONL file before it is imported, and its lines: the chain value its header
line carries against the events it holds (docs/format.md, "The hash chain"), and the limits
that keep a hostile file (a gzip bomb, a packed reference row standing for millions of
events, a truncated stream) from taking unbounded memory or failing obscurely. Used by
`todo_sessions._jsonl` (which re-exports these names), ``import`` and ``verify --against``."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterable, Iterator

from .core.chain import chain_values
from .core.envelope import SessionEvent
from .core.header import SessionHeader
from .core.jsonvalue import LosslessJSONError, decode_json
from .errors import ImportLimitError, InvalidEventError, StructureError
from .store.codec import event_row, header_row

__all__ = [
    "MAX_BYTES",
    "MAX_EVENTS",
    "MAX_LINE_BYTES",
    "check_file_chain",
    "declared_chain",
    "file_chain",
    "file_chain_problem",
    "line_error",
    "numbered_lines",
]


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
    its header, were edited after the export), that it holds no event to compare, or None."""
    if not computed:
        return "the file holds no events: nothing compared"
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


def check_file_chain(
    first_line: str, header: SessionHeader, events: list[SessionEvent], key: bytes
) -> None:
    """Refuse (`InvalidEventError`, field ``chain``) a file whose events do not lead to the
    chain value its header line carries, computed with ``key`` (`core.chain.derive_key`; empty:
    unkeyed): it was edited after its export, or the export was chained with another key (or
    none). A file whose header line carries no chain value (a reference file, an export of an
    earlier version), or that holds no events (nothing to import), is not checked."""
    declared = declared_chain(first_line)
    if declared is None or not events:
        return
    seq, value = declared
    rows = (event_row(header.id, e) for e in events)
    computed = None
    for position, found in enumerate(chain_values(header_row(header), rows, key)):
        if position == seq:
            computed = found
            break
    if computed == value and len(events) == seq + 1:
        return
    if computed == value:
        problem = f"the file holds events past seq {seq}, the last its export carried"
    else:
        held = "this store's chain key" if key else "no chain key"
        problem = (
            f"the file's events do not lead to the chain value its header line carries for "
            f"seq {seq}, computed with {held}: the file was edited after the export, or it "
            "was exported with another key (or none): import it with the chain_key of the "
            "store it came from (the command line reads TODO_SESSIONS_CHAIN_KEY)"
        )
    raise InvalidEventError(f"{problem}; nothing imported", field="chain")


def line_error(
    line: int, message: str, cause: InvalidEventError | StructureError | None = None
) -> InvalidEventError:
    """The error of a bad line: ``field`` is the line; the event's type and seq are kept from
    the refusal of the event it holds (``cause``)."""
    return InvalidEventError(
        f"line {line}: {message}",
        event_type=getattr(cause, "event_type", None),
        seq=None if cause is None else cause.seq,
        field=f"line {line}",
    )


MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line `import_lines` / `parse_lines` take by default (64 MiB of UTF-8), as the
CLI's ``import --max-line-bytes``."""

MAX_BYTES = 64 * 1024 * 1024
"""The most (decompressed) bytes of UTF-8 `import_lines` / `parse_lines` read by default
(64 MiB): a file that expands past it is refused (`ImportLimitError`) before memory grows
further. Import holds a whole session in memory before it writes it (one transaction),
about twice its size: the limit keeps a refused import's peak memory near 250 MB."""

MAX_EVENTS = 200_000
"""The most events `import_lines` / `parse_lines` take from one file by default (about 200 MB
of memory while they are validated): beyond, `ImportLimitError`, so that a small file whose
packed reference chunk rows stand for millions of events is refused early."""

_DAMAGED = (EOFError, zlib.error, gzip.BadGzipFile)
"""What reading a truncated or damaged gzip stream raises."""


def _too_long(line: str | bytes, limit: int) -> bool:
    """Whether ``line`` holds more than ``limit`` bytes of UTF-8, its line ending aside."""
    size = len(line)
    if isinstance(line, str):
        if size * 4 <= limit + 2:  # at most 4 bytes a character: no need to encode
            return False
        line = line.encode("utf-8", "surrogatepass")
    ending = 2 if line.endswith(b"\r\n") else 1 if line.endswith(b"\n") else 0
    return len(line) - ending > limit


def _size(line: str | bytes) -> int:
    """Bytes of UTF-8 in ``line``."""
    if isinstance(line, str) and not line.isascii():
        return len(line.encode("utf-8", "surrogatepass"))
    return len(line)


def _next_line(iterator: Iterator[str | bytes], number: int) -> str | bytes:
    """The next line (StopIteration at the end); a compressed stream that is truncated or
    damaged is an `InvalidEventError` naming the line."""
    try:
        return next(iterator)
    except _DAMAGED as exc:
        raise line_error(number, f"the compressed file is truncated or damaged ({exc})") from None


def numbered_lines(
    lines: Iterable[str | bytes],
    max_line_bytes: int | None = None,
    max_bytes: int | None = None,
) -> Iterator[tuple[int, str]]:
    """``(line number, text)``; undecodable input, a line longer than ``max_line_bytes``
    (UTF-8, its newline aside), or a truncated compressed stream is an `InvalidEventError`
    naming its line; more than ``max_bytes`` in all is an `ImportLimitError`."""
    iterator = iter(lines)
    number = 0
    total = 0
    while True:
        number += 1
        try:
            line = _next_line(iterator, number)
            if max_line_bytes is not None and _too_long(line, max_line_bytes):
                raise line_error(
                    number,
                    f"the line is longer than {max_line_bytes} bytes (the limit: "
                    "max_line_bytes), nothing imported",
                )
            if max_bytes is not None:
                total += _size(line)
                if total > max_bytes:
                    detail = f"line {number}: the file holds more than {max_bytes} bytes"
                    raise ImportLimitError("max_bytes", max_bytes, detail)
            if isinstance(line, bytes | bytearray):
                line = bytes(line).decode("utf-8")
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            bad = exc.object[exc.start] if exc.start < len(exc.object) else 0
            problem = f"not UTF-8 text (byte 0x{bad:02x} at column {exc.start + 1})"
            raise line_error(number, problem) from None
        yield number, line
