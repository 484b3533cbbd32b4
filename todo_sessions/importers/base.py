"""The importer protocol and the engine that runs an importer over an agent's session files.

An `Importer` knows one agent's files: where they are (`discover`), which lines are in its
format, and how a line maps onto typed events (`map_entry`, on the `Batch` / `LogState` the SDK
adapters use). The engine does the rest, the same for every agent (docs/format.md, "Imported
sessions"):

- Each complete source line becomes one ignorable ``<agent>/entry`` event holding the parsed
  line, followed, when the event's canonical text (compact JSON, as Claude Code and Codex
  write it) is not the line's exact text, by an ignorable ``import/verbatim`` event holding
  that text, then by the typed events of the mapping. Export writes each line back from them.
- The position reached (bytes, lines, and the SHA-256 of the bytes read) is kept in the
  session's metadata under ``import``, written by the ``session/meta`` event that ends the
  same append: a session's new events land in one append or not at all.
- A re-import verifies that the file still starts with the bytes read before; if it does not
  (rewritten, truncated) the file is reported and left alone, never merged.
- A line that is not UTF-8 JSON in the agent's format is skipped with a warning naming the
  file and line; one whose JSON or typed events cannot be stored is kept as text only (an
  ``import/verbatim`` event of its own) with a warning; a last line without its newline is
  left for the next import (an agent still writing it, or killed mid-write) with a warning.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from ..core.envelope import SessionEvent
from ..core.header import SessionHeader
from ..core.types import SESSION_META
from ..errors import InvalidEventError, SeqConflictError, SessionExistsError, SessionNotFoundError
from ..integrations._common import Batch, LogState, iso_ms, now_ms
from ..store.store import SessionStore
from ._vocabulary import VERBATIM_TYPE, register_entry_type

__all__ = [
    "IMPORT_KEY",
    "MAX_LINE_BYTES",
    "VERBATIM_TYPE",
    "Batch",
    "FileResult",
    "Importer",
    "LogState",
    "SourceFile",
    "export_lines",
    "import_file",
    "register_entry_type",
]

IMPORT_KEY = "import"
"""The key of a session's metadata the engine owns: ``{agent, path, offset, lines, sha256}``."""
MAX_TRIES = 10
MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest source line imported by default (64 MiB); a longer one is skipped, reported."""


@dataclass(frozen=True)
class SourceFile:
    """One session file an importer found: the file, the store session it maps to, and its
    parent session (a sub-agent's transcript) when it has one."""

    path: Path
    session_id: str
    parent: str | None = None
    key: Mapping[str, Any] = field(default_factory=dict)
    """What the importer needs to know about the file (a Claude project key, ...)."""


@dataclass
class FileResult:
    """What importing one file did. ``status``: ``created``, ``appended``, ``unchanged``,
    ``rewritten`` (the file no longer starts with what was imported; left alone),
    ``conflict`` (the session exists and was not imported from this agent's file) or
    ``error`` (the file cannot be read, or no line of it is in the agent's format; ``message``
    says which)."""

    path: Path
    session_id: str
    status: str = "unchanged"
    lines: int = 0
    """Source lines imported by this run."""
    events: int = 0
    warnings: list[str] = field(default_factory=list)
    unknown_kinds: dict[str, int] = field(default_factory=dict)
    """Entry kinds the mapping does not know, each with the first line it was seen on: kept
    whole, imported as ignorable."""
    message: str | None = None


class Importer(Protocol):
    """One agent's session files (see the module docstring)."""

    name: str
    """The agent's name in commands and tags: ``claude-code``, ``codex``."""
    entry_type: str
    """The event type that keeps a source line whole."""

    def default_paths(self) -> list[Path]:
        """Where the agent keeps its sessions when no path is given."""
        ...

    def discover(self, paths: Sequence[Path]) -> list[SourceFile]:
        """The session files under ``paths`` (files or directories), parents before children."""
        ...

    def new_state(self) -> LogState:
        """An empty fold of a session's log for `map_entry`."""
        ...

    def line_problem(self, entry: Any) -> str | None:
        """Why a parsed line is not in the agent's format, or None."""
        ...

    def kind_known(self, entry: Mapping[str, Any]) -> tuple[str, bool]:
        """The line's kind, and whether the mapping knows it."""
        ...

    def header(self, source: SourceFile, entries: Sequence[Mapping[str, Any]]) -> SessionHeader:
        """The header of a new session whose first lines are ``entries``."""
        ...

    def map_entry(self, batch: Batch, state: LogState, entry: dict[str, Any]) -> None:
        """Add the typed events of one line (its entry event is in the batch already)."""
        ...

    def meta(
        self, state: LogState, source: SourceFile, fresh: Sequence[dict[str, Any]]
    ) -> dict[str, Any]:
        """``session/meta`` fields after ``fresh`` lines: ``metadata`` (the agent's own key;
        the engine adds ``import``), ``tags``, ``title``. Only changed fields are written."""
        ...


def compact_json(entry: Any) -> str:
    """JSON as ``JSON.stringify`` and ``serde_json`` write it, and as an event's canonical text
    is: compact, non-ASCII characters as they are."""
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":"))


# -- reading a file from a position -----------------------------------------------------------


@dataclass
class _Read:
    lines: list[tuple[int, bytes]]
    """``(line number, bytes without the newline)`` of the complete new lines."""
    end: int
    sha: Any
    partial: int | None
    """The number of a last line without its newline, left for the next import."""


def _read_from(path: Path, position: Mapping[str, Any] | None) -> _Read | None:
    """The complete lines after ``position``; None when the file no longer starts with the
    bytes hashed there."""
    offset = int(position["offset"]) if position else 0
    number = int(position["lines"]) if position else 0
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        left = offset
        while left:
            chunk = handle.read(min(left, 1 << 20))
            if not chunk:
                return None  # shorter than before
            sha.update(chunk)
            left -= len(chunk)
        if position and sha.hexdigest() != position["sha256"]:
            return None
        rest = handle.read()
    pieces = rest.split(b"\n")
    tail = pieces.pop()  # b"" when the data ends with a newline
    lines = [(number + i + 1, piece) for i, piece in enumerate(pieces)]
    consumed = len(rest) - len(tail)
    sha.update(rest[:consumed])
    return _Read(lines, offset + consumed, sha, number + len(lines) + 1 if tail else None)


# -- building one append ----------------------------------------------------------------------


def _parse(importer: Importer, raw: bytes) -> tuple[Any, str | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 ({exc.reason} at byte {exc.start})"
    try:
        # orjson parses what it reads as the stdlib does, faster; what it refuses (NaN, an
        # integer past 64 bits, a lone surrogate, bad JSON) the stdlib reads or names
        entry = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            entry = json.loads(text)
        except ValueError as exc:
            return None, f"not JSON ({exc})"
    problem = importer.line_problem(entry)
    return (None, problem) if problem else ((entry, text), None)


@dataclass
class _Plan:
    """The parsed lines of one import: ``(number, entry, text)``, and lines found bad."""

    good: list[tuple[int, dict[str, Any], str]]
    bad: dict[int, str]
    known: int = 0
    """How many good lines are of a kind the mapping knows."""
    text_only: dict[int, str] = field(default_factory=dict)
    """Lines whose JSON (a lone surrogate, ``-0.0``, ``NaN``) or typed events cannot be
    stored: kept as text only, in an ``import/verbatim`` event of their own."""


def _plan(importer: Importer, read: _Read, result: FileResult, max_line: int) -> _Plan:
    plan = _Plan([], {})
    for number, raw in read.lines:
        if len(raw) > max_line:
            plan.bad[number] = f"longer than {max_line:,} bytes ({len(raw):,})"
            continue
        parsed, problem = _parse(importer, raw)
        if problem is not None:
            plan.bad[number] = problem
            continue
        entry, text = parsed
        kind, known = importer.kind_known(entry)
        if not known:
            result.unknown_kinds.setdefault(kind, number)
        else:
            plan.known += 1
        plan.good.append((number, entry, text))
    return plan


def _build(
    importer: Importer,
    state: LogState,
    source: SourceFile,
    plan: _Plan,
    position: dict[str, Any],
) -> tuple[Batch, dict[int, int]]:
    """The batch of ``plan``'s good lines on ``state`` (a copy), and each event's line."""
    batch = Batch(state, now_ms())
    line_of: dict[int, int] = {}
    fresh: list[dict[str, Any]] = []
    for number, entry, text in plan.good:
        first = len(batch.events)
        batch.time = iso_ms(entry.get("timestamp"), batch.time)
        kept = _add_line(importer, batch, state, (number, entry, text), plan)
        if kept is not None:
            fresh.append(kept)
        for event in batch.events[first:]:
            line_of[event.seq] = number
    meta = importer.meta(state, source, fresh) if fresh else {}
    metadata = {**state.metadata, **meta.pop("metadata", {}), IMPORT_KEY: position}
    changes = {k: v for k, v in meta.items() if v != getattr(state, k, None)}
    if metadata != state.metadata:
        changes["metadata"] = metadata
    if changes:
        batch.add(SESSION_META, changes, ignorable=True)
    return batch, line_of


def _add_line(
    importer: Importer,
    batch: Batch,
    state: LogState,
    line: tuple[int, dict[str, Any], str],
    plan: _Plan,
) -> dict[str, Any] | None:
    """Add one line's events; its entry's data, or None for a line kept as text only."""
    number, entry, text = line
    if number not in plan.text_only:
        try:
            event = batch.add(importer.entry_type, entry, ignorable=True)
        except InvalidEventError as exc:  # its JSON cannot be an event: nothing was added
            plan.text_only[number] = str(exc)
        else:
            if event.data_json != text:  # the canonical text is how export writes it
                batch.add(VERBATIM_TYPE, {"line": text}, ignorable=True)
            try:
                importer.map_entry(batch, state, event.payload)
            except InvalidEventError as exc:
                plan.text_only[number] = f"its events cannot be stored ({exc})"
                raise _Retry from exc
            return event.payload
    batch.add(VERBATIM_TYPE, {"line": text, "alone": True}, ignorable=True)
    return None


class _Retry(Exception):
    """A line was found bad while building: build again without it."""


# -- importing a file -------------------------------------------------------------------------


async def _position(store: SessionStore, session_id: str) -> dict[str, Any] | None:
    """The import position a stored session keeps (`_kept`); None when the store has no
    such session."""
    try:
        summary = await store.summary(session_id)
    except SessionNotFoundError:
        return None
    return _kept(summary.metadata)


def _kept(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The import position in a session's metadata, ``{}`` when it keeps none (a session not
    imported from a file)."""
    position = metadata.get(IMPORT_KEY)
    return position if isinstance(position, dict) and "agent" in position else {}


async def _fold(store: SessionStore, importer: Importer, session_id: str) -> LogState | None:
    state = importer.new_state()
    try:
        state.advance_all(await store.read_from(session_id))
    except SessionNotFoundError:
        return None
    return state


def _warn_bad(result: FileResult, bad: Mapping[int, str], partial: int | None) -> None:
    for number in sorted(bad):
        result.warnings.append(f"{result.path}:{number}: skipped: {bad[number]}")
    if partial is not None:
        result.warnings.append(
            f"{result.path}:{partial}: skipped for now: the last line has no newline yet "
            "(still being written, or cut short)"
        )


async def import_file(
    store: SessionStore,
    importer: Importer,
    source: SourceFile,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    new: bool = False,
) -> FileResult:
    """Import what is new in one file (see the module docstring); never raises for the
    file's content or a file that cannot be read, reporting them in the `FileResult`. A
    line longer than ``max_line_bytes`` is skipped with a warning. ``new``: the store was
    found without the session just before (`import_paths` lists the sessions once), so its
    log is not read; if another writer created it since, the import starts over reading it."""
    result = FileResult(source.path, source.session_id)
    for _ in range(MAX_TRIES):
        try:
            return await _import_once(store, importer, source, result, max_line_bytes, new)
        except (SeqConflictError, SessionExistsError):
            result = FileResult(source.path, source.session_id)  # another importer was first
            new = False
        except OSError as exc:
            result.status, result.message = "error", f"{source.path}: {exc.strerror or exc}"
            return result
    result.status, result.message = "error", f"kept racing other writers ({MAX_TRIES} tries)"
    return result


async def _import_once(
    store: SessionStore,
    importer: Importer,
    source: SourceFile,
    result: FileResult,
    max_line: int,
    new: bool,
    quick: bool = True,
) -> FileResult:
    # Where the last import ended, from the session's summary (one row) rather than its log
    # (``quick``): a file with nothing new since is passed over without reading the log.
    state = None
    if new:
        position = None
    elif quick:
        position = await _position(store, source.session_id)
    else:
        state = await _fold(store, importer, source.session_id)
        position = None if state is None else _kept(state.metadata)
    if position is not None and position.get("agent") != importer.name:
        result.status = "conflict"
        result.message = f"session {source.session_id} exists and was not imported from a file"
        return result
    read = await asyncio.to_thread(_read_from, source.path, position or None)
    if quick and position is not None and read is not None and read.lines:
        state = await _fold(store, importer, source.session_id)
        if state is None or _kept(state.metadata) != position:  # another writer was first
            return await _import_once(store, importer, source, result, max_line, False, False)
    if read is None:
        result.status = "rewritten"
        lines = position["lines"] if position else 0
        result.message = (
            f"{source.path} no longer starts with the {lines} lines imported before "
            "(rewritten or truncated); left alone"
        )
        return result
    if position is not None and not read.lines:
        _warn_bad(result, {}, read.partial)
        return result
    plan = _plan(importer, read, result, max_line)
    _warn_bad(result, plan.bad, read.partial)
    if state is None and not plan.known:  # a new session starts with a line of a known kind
        if read.lines:
            result.status = "error"
            result.message = f"{source.path}: no line in the {importer.name} format"
        return result
    if not read.lines:
        return result
    new_position = {
        "agent": importer.name,
        "path": str(source.path),
        "offset": read.end,
        "lines": read.lines[-1][0],
        "sha256": read.sha.hexdigest(),
    }
    await _append(store, importer, source, state, plan, new_position, result)
    return result


async def _append(
    store: SessionStore,
    importer: Importer,
    source: SourceFile,
    state: LogState | None,
    plan: _Plan,
    position: dict[str, Any],
    result: FileResult,
) -> None:
    created = state is not None
    for _ in range(len(plan.good) + 1):
        work = (state or importer.new_state()).copy()
        try:
            batch, line_of = _build(importer, work, source, plan, position)
        except _Retry:
            continue
        if not created:
            if not line_of:
                break
            entries = [e for n, e, _ in plan.good if n not in plan.text_only]
            await store.create(importer.header(source, entries))
            created = True
        try:
            await store.append(source.session_id, batch.events)
        except InvalidEventError as exc:
            line = line_of.get(exc.seq) if exc.seq is not None else None
            if line is None:
                raise
            plan.text_only[line] = f"its events cannot be stored ({exc})"
            continue
        for number in sorted(plan.text_only):
            reason = plan.text_only[number]
            result.warnings.append(f"{source.path}:{number}: kept as text only: {reason}")
        result.status = "created" if state is None else "appended"
        result.lines = len(plan.good)
        result.events = len(batch.events)
        return
    result.status, result.message = "error", f"{source.path}: its lines could not be stored"


# -- export ----------------------------------------------------------------------------------


def export_lines(importer: Importer, events: Iterable[SessionEvent]) -> Iterable[str]:
    """The source lines kept in ``events`` (a session's log), in order, without newlines."""
    pending: str | None = None
    for event in events:
        if event.type == importer.entry_type:
            if pending is not None:
                yield pending
            pending = event.data_json
        elif event.type == VERBATIM_TYPE and event.payload.get("alone"):
            if pending is not None:
                yield pending
            pending = event.payload["line"]
        elif event.type == VERBATIM_TYPE and pending is not None:
            pending = event.payload["line"]
    if pending is not None:
        yield pending
