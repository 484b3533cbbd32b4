"""opencode sessions: its SQLite database (``~/.local/share/opencode/opencode.db``, read
strictly read-only, safe while opencode runs) or ``opencode export`` files; each opencode
session one store session, a sub-agent's (the ``task`` tool's) a child session.

opencode updates its rows in place, so an import is not a file read from a position: it reads
one consistent snapshot of a session (`_opencode_read`), and appends what the log does not
hold yet:

- the session's info, as ``opencode export`` shows it, in an ``opencode/session`` event (with
  the database row it was built from) whenever it differs from the one kept last; its title
  and the ``opencode`` metadata (ids, directory, version, agent, model, tokens, cost) follow
  in the ``session/meta`` event that ends the append;
- each message not kept yet, once complete (an assistant message once ``time.completed`` or
  its ``error`` is set; a user message once a later message is complete or opencode has set
  its ``summary``), in order, stopping at the first one that is not: one ``opencode/message``
  event holding ``{info, parts}`` as ``opencode export`` shows it, then its typed events
  (`_opencode_map`). A message that changed after it was kept is reported, not merged.

`OpencodeImporter.export_events` writes a session back as ``opencode export`` prints it.
docs/format.md, "opencode sessions".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.envelope import SessionEvent
from ..core.header import SessionHeader
from ..core.types import SESSION_META
from ..errors import InvalidEventError, SeqConflictError, SessionExistsError, SessionNotFoundError
from ..integrations._common import Batch, LogState, list_all, now_ms
from ..store.store import SessionStore
from ._opencode_map import (
    MESSAGE_TYPE,
    PART_KINDS,
    SESSION_TYPE,
    OpencodeState,
    map_message,
    pending_messages,
)
from ._opencode_read import (
    SQLITE_MAGIC,
    DbReader,
    Snapshot,
    default_paths,
    export_problem,
    export_text,
    read_db_session,
    read_db_sessions,
    read_export,
)
from .base import IMPORT_KEY, VERBATIM_TYPE, FileResult, SourceFile, compact_json
from .paths import in_order

__all__ = ["MESSAGE_TYPE", "SESSION_TYPE", "OpencodeImporter", "session_id_for"]

METADATA_KEY = "opencode"
AGENT_TAG = "agent:opencode"
MAX_TRIES = 10
_META_FIELDS = (
    *("id", "slug", "projectID", "directory", "parentID"),
    *("version", "agent", "model", "tokens", "cost"),
)


def session_id_for(opencode_id: str) -> str:
    """The store id of an opencode session id (``ses_…``)."""
    return f"opencode-{opencode_id}"


# -- discovery -------------------------------------------------------------------------------


def _error_source(path: Path, message: str) -> SourceFile:
    return SourceFile(path, "", None, {"kind": "error", "message": message})


def _sources_of(path: Path) -> list[SourceFile]:
    """The sessions of one database or export file (an error source when it is neither)."""
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(SQLITE_MAGIC))
        if magic == SQLITE_MAGIC or path.suffix == ".db":
            found = [
                (sid, parent, {"kind": "db", "fingerprint": fp})
                for sid, parent, fp in read_db_sessions(path)
            ]
        else:
            info = read_export(path).info
            parent = info.get("parentID") if isinstance(info.get("parentID"), str) else None
            found = [(info["id"], parent, {"kind": "export"})]
    except (OSError, sqlite3.Error, UnicodeDecodeError, ValueError) as exc:
        reason: Any = exc
        if isinstance(exc, ValueError):
            reason = "not an opencode database or export"
        elif "no such table" in str(exc):
            reason = f"not an opencode database, or one opencode is still creating ({exc})"
        return [_error_source(path, f"{path}: {reason}")]
    return [
        SourceFile(
            path,
            session_id_for(sid),
            parent and session_id_for(parent),
            {**key, "session": sid},
        )
        for sid, parent, key in found
    ]


def _depths(sources: list[SourceFile]) -> list[SourceFile]:
    """Sources with their delegation depth (``key["depth"]``), parents before children."""
    parents = {s.session_id: s.parent for s in sources}

    def depth(source: SourceFile) -> int:
        n, parent, seen = 0, source.parent, set()
        while parent is not None and parent not in seen:
            seen.add(parent)
            n, parent = n + 1, parents.get(parent)
        return n

    out = [
        SourceFile(s.path, s.session_id, s.parent, {**s.key, "depth": depth(s)}) for s in sources
    ]
    return sorted(out, key=lambda s: s.key["depth"])


def _candidates(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    if not root.is_dir():
        return []
    return sorted(root.glob("opencode*.db")) + sorted(root.glob("*.json"))


# -- one import ------------------------------------------------------------------------------


def _read(source: SourceFile, reader: DbReader | None) -> Snapshot | None:
    if source.key.get("kind") == "db":
        if reader is not None:
            return reader.read(str(source.key["session"]))
        return read_db_session(source.path, str(source.key["session"]))
    snapshot = read_export(source.path)
    return snapshot if snapshot.info.get("id") == source.key.get("session") else None


def _unknown(messages: Iterable[Mapping[str, Any]], result: FileResult) -> None:
    for n, message in enumerate(messages, 1):
        for part in message.get("parts", []):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in PART_KINDS:
                result.unknown_kinds.setdefault(f"part/{kind}", n)


class _Build:
    """One append: the batch over a copy of the log's state, and each event's message."""

    def __init__(self, state: OpencodeState | None, snapshot: Snapshot, text_only: set[str]):
        self.state = (state or OpencodeState()).copy()
        self.batch = Batch(self.state, now_ms())
        self.snapshot = snapshot
        self.text_only = text_only
        self.message_of: dict[int, str] = {}

    def info(self, busy: bool) -> None:
        """The session's info when it changed; while opencode is at work on a message (its
        times and tokens changing by the second) only with messages or a new title."""
        info, kept = self.snapshot.info, self.state.info
        if kept is not None and busy and info.get("title") == kept.get("title"):
            return
        if kept is None or compact_json(kept) != compact_json(info):
            data: dict[str, Any] = {"info": info}
            if self.snapshot.row is not None:
                data["row"] = self.snapshot.row
            self.batch.add(SESSION_TYPE, data, ignorable=True)

    def message(self, entry: dict[str, Any]) -> None:
        mid = entry["info"]["id"]
        first = len(self.batch.events)
        time = entry["info"].get("time")
        created = time.get("created") if isinstance(time, dict) else None
        if isinstance(created, int) and created >= 0:
            self.batch.time = created
        if mid in self.text_only:
            self.batch.add(
                VERBATIM_TYPE, {"line": _ascii_json(entry), "alone": True}, ignorable=True
            )
        else:
            try:
                event = self.batch.add(MESSAGE_TYPE, entry, ignorable=True)
            except InvalidEventError:
                self.text_only.add(mid)
                self.batch.add(
                    VERBATIM_TYPE, {"line": _ascii_json(entry), "alone": True}, ignorable=True
                )
            else:
                map_message(self.batch, self.state, event.payload)
        for event in self.batch.events[first:]:
            self.message_of[event.seq] = mid

    def meta(self, source: SourceFile, position: dict[str, Any]) -> None:
        info, state = self.snapshot.info, self.state
        changes: dict[str, Any] = {}
        tags = [AGENT_TAG] + (["opencode-subagent"] if source.parent else [])
        if any(t not in state.tags for t in tags):
            changes["tags"] = [*state.tags, *(t for t in tags if t not in state.tags)]
        title = info.get("title")
        if isinstance(title, str) and title.strip() and title != state.title:
            changes["title"] = title
        opencode = {k: info[k] for k in _META_FIELDS if k in info}
        metadata = {**state.metadata, METADATA_KEY: opencode, IMPORT_KEY: position}
        if metadata != state.metadata:
            changes["metadata"] = metadata
        if changes:
            self.batch.add(SESSION_META, changes, ignorable=True)


def _ascii_json(entry: Any) -> str:
    """Compact JSON in ASCII: a lone surrogate escaped, so that the text can be stored."""
    return json.dumps(entry, separators=(",", ":"))


def _header(source: SourceFile, info: Mapping[str, Any]) -> SessionHeader:
    time = info.get("time")
    created = time.get("created") if isinstance(time, dict) else None
    cwd = info.get("directory")
    return SessionHeader(
        id=source.session_id,
        created_at=created if isinstance(created, int) and created >= 0 else now_ms(),
        cwd=cwd if isinstance(cwd, str) and os.path.isabs(cwd) else None,
        parent_session=source.parent,
        origin="opencode",
        delegation_depth=int(source.key.get("depth", 1 if source.parent else 0)),
    )


async def _fold(store: SessionStore, session_id: str) -> OpencodeState | None:
    state = OpencodeState()
    try:
        state.advance_all(await store.read_from(session_id))
    except SessionNotFoundError:
        return None
    return state


def _same_fingerprint(position: Any, source: SourceFile) -> bool:
    fingerprint = source.key.get("fingerprint")
    return (
        fingerprint is not None
        and isinstance(position, dict)
        and position.get("agent") == "opencode"
        and position.get("fingerprint") == fingerprint
    )


async def _untouched(store: SessionStore, source: SourceFile) -> bool:
    """Whether opencode wrote nothing to the session since its last import (the database's
    fingerprint of it is the one kept in the import position): then nothing is read."""
    if source.key.get("fingerprint") is None:
        return False
    try:
        summary = await store.summary(source.session_id)
    except SessionNotFoundError:
        return False
    return _same_fingerprint(summary.metadata.get(IMPORT_KEY), source)


async def _import_once(
    store: SessionStore,
    source: SourceFile,
    result: FileResult,
    new: bool,
    reader: DbReader | None,
) -> None:
    if not new and await _untouched(store, source):
        return
    snapshot = await asyncio.to_thread(_read, source, reader)
    if snapshot is None:
        result.status = "error"
        result.message = f"{source.path}: no session {source.key.get('session')}"
        return
    state = None if new else await _fold(store, source.session_id)
    position = None if state is None else state.metadata.get(IMPORT_KEY)
    if state is not None and not (
        isinstance(position, dict) and position.get("agent") == "opencode"
    ):
        result.status = "conflict"
        result.message = f"session {source.session_id} exists and was not imported from opencode"
        return
    fresh, busy = pending_messages(snapshot.messages, state or OpencodeState(), result)
    _unknown(fresh, result)
    kept = len(state.messages) if state is not None else 0
    new_position = {
        "agent": "opencode",
        "path": str(source.path),
        "session": source.key.get("session"),
        "messages": kept + len(fresh),
    }
    if source.key.get("fingerprint") is not None:  # as found before this read, or older
        new_position["fingerprint"] = source.key["fingerprint"]
    await _append(store, source, state, snapshot, (fresh, busy and not fresh), new_position, result)


async def _append(
    store: SessionStore,
    source: SourceFile,
    state: OpencodeState | None,
    snapshot: Snapshot,
    new: tuple[list[dict[str, Any]], bool],
    position: dict[str, Any],
    result: FileResult,
) -> None:
    fresh, busy = new
    text_only: set[str] = set()
    for _ in range(len(fresh) + 1):
        build = _Build(state, snapshot, text_only)
        build.info(busy)
        for entry in fresh:
            build.message(entry)
        build.meta(source, position)
        if (
            state is not None
            and not fresh
            and not any(e.type == SESSION_TYPE for e in build.batch.events)
        ):
            return  # unchanged: what changed is the metadata of the same snapshot at most
        if state is None:
            # a session created by an import that stopped before its append holds nothing
            with contextlib.suppress(SessionExistsError):
                await store.create(_header(source, snapshot.info))
            state = OpencodeState()
        try:
            await store.append(source.session_id, build.batch.events)
        except InvalidEventError as exc:
            mid = build.message_of.get(exc.seq) if exc.seq is not None else None
            if mid is None or mid in text_only:
                raise
            text_only.add(mid)
            continue
        for mid in sorted(text_only):
            result.warnings.append(
                f"{source.path}: message {mid} kept as text only: its events cannot be stored"
            )
        result.status = "created" if not state.next_seq else "appended"
        result.lines = len(fresh)
        result.events = len(build.batch.events)
        return
    result.status, result.message = "error", f"{source.path}: its messages could not be stored"


class OpencodeImporter:
    """The opencode importer: the `Importer` protocol's discovery and naming, with an import
    (`import_sources`) and an export (`export_events`) of its own (opencode's rows are not
    lines of a file)."""

    name = "opencode"
    entry_type = MESSAGE_TYPE

    def default_paths(self) -> list[Path]:
        return default_paths()

    def discover(self, paths: Sequence[Path]) -> list[SourceFile]:
        given = {Path(root).absolute() for root in paths}
        files = [p.absolute() for root in paths for p in _candidates(Path(root))]
        sources: list[SourceFile] = []
        for path in dict.fromkeys(files):
            found = _sources_of(path)
            if path not in given and found[0].key["kind"] == "error" and path.suffix == ".json":
                continue  # a JSON file in a directory given, not an export
            sources.extend(found)
        errors = [s for s in sources if s.key["kind"] == "error"]
        return errors + _depths([s for s in sources if s.key["kind"] != "error"])

    def new_state(self) -> LogState:
        return OpencodeState()

    def line_problem(self, entry: Any) -> str | None:
        return export_problem(entry)

    def kind_known(self, entry: Mapping[str, Any]) -> tuple[str, bool]:
        return "export", True

    def header(self, source: SourceFile, entries: Sequence[Mapping[str, Any]]) -> SessionHeader:
        info = entries[0].get("info", {}) if entries else {}
        return _header(source, info if isinstance(info, dict) else {})

    def map_entry(self, batch: Batch, state: LogState, entry: dict[str, Any]) -> None:
        assert isinstance(state, OpencodeState)
        map_message(batch, state, entry)

    def meta(
        self, state: LogState, source: SourceFile, fresh: Sequence[dict[str, Any]]
    ) -> dict[str, Any]:
        return {}

    async def import_sources(
        self, store: SessionStore, sources: Sequence[SourceFile]
    ) -> list[FileResult]:
        """`import_source` of each, a few at once (`in_order`: a child session after its
        parent's); the import positions of the sessions imported before are read at once (one
        listing of the opencode sessions), so that the sessions opencode has not written to
        since are passed over without a read each (polling a large database), and a session
        not among them is taken for new: its log is not read (a session of that id that was
        not imported from opencode is found by the append, and reported)."""
        positions: dict[str, Any] = {}
        async for summary in list_all(store, tag=AGENT_TAG):
            positions[summary.id] = summary.metadata.get(IMPORT_KEY)
        readers = {s.path: DbReader(s.path) for s in sources if s.key.get("kind") == "db"}

        async def one(source: SourceFile) -> FileResult:
            if _same_fingerprint(positions.get(source.session_id), source):
                return FileResult(source.path, source.session_id)
            new = source.session_id not in positions
            return await self.import_source(store, source, new=new, reader=readers.get(source.path))

        try:
            return await in_order(sources, one)
        finally:
            for reader in readers.values():
                reader.close()

    async def import_source(
        self,
        store: SessionStore,
        source: SourceFile,
        *,
        new: bool = False,
        reader: DbReader | None = None,
    ) -> FileResult:
        """Import what is new in one opencode session (see the module docstring); never
        raises for the database's or file's content, reporting it in the `FileResult`
        (``lines``: the messages appended). ``new``: the store was found without the session
        just before, so its log is not read (another writer first: read after all);
        ``reader``: the database's connection to read with (one of its own otherwise)."""
        result = FileResult(source.path, source.session_id)
        if source.key.get("kind") == "error":
            result.status, result.message = "error", str(source.key.get("message"))
            return result
        for _ in range(MAX_TRIES):
            try:
                await _import_once(store, source, result, new, reader)
                return result
            except (SeqConflictError, SessionExistsError):
                result = FileResult(source.path, source.session_id)
                new = False
            except (OSError, sqlite3.Error, ValueError) as exc:
                result.status, result.message = "error", f"{source.path}: {exc}"
                return result
        result.status, result.message = "error", f"kept racing other writers ({MAX_TRIES} tries)"
        return result

    def export_events(self, events: Iterable[SessionEvent]) -> bytes:
        """The session as ``opencode export`` prints it (the JSON ``opencode import`` reads):
        the session info kept last and every message kept, in order."""
        info: dict[str, Any] | None = None
        messages: list[dict[str, Any]] = []
        for event in events:
            if event.type == SESSION_TYPE:
                info = event.data_copy()["info"]
            elif event.type == MESSAGE_TYPE:
                messages.append(event.data_copy())
            elif event.type == VERBATIM_TYPE and event.payload.get("alone"):
                messages.append(json.loads(event.payload["line"]))
        if info is None:
            raise ValueError("not a session imported from opencode (no opencode/session event)")
        return export_text(info, messages).encode("utf-8")
