"""A Claude Agent SDK ``SessionStore`` on the todo-sessions log: `TodoSessionsStore`.

``ClaudeAgentOptions(session_store=TodoSessionsStore(url))`` mirrors every Claude Code
transcript line into this library's store (README.md, "Claude Agent SDK"; docs/format.md,
"SDK sessions"). Each line is kept whole in one ``claude/entry`` event and `load` gives the
lines back deep-equal, in order; what the mapping understands follows it as typed events:
prompts open turns, assistant content becomes ``assistant/message`` (tool uses also
``tool/call``), tool results ``tool/result``, a compaction summary replaces the surface it
summarises, and every ``TodoWrite`` call and every ``TaskCreate`` / ``TaskUpdate`` change of
the task list a ``todo/write`` snapshot. So ``todo-sessions todos``, ``messages``, the viewer
and the ACP bridge read a Claude session like a native one.

Keys: ``{project_key, session_id}`` is one session of the store, tagged with the project;
``{..., subpath}`` (a sub-agent's transcript) a child session whose ``parent`` is the main
one. The SDK's folded summary (``fold_session_summary``) is stored verbatim in the session's
metadata by a ``session/meta`` event of the same append, so in the same transaction.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from typing import Any

from ..core.types import SESSION_META

try:
    from claude_agent_sdk import fold_session_summary
except ImportError as exc:  # pragma: no cover - exercised by tests/test_extras.py
    raise ImportError(
        "todo_sessions.integrations.claude_agent_sdk needs the [claude] extra: "
        "pip install 'todo-sessions[claude]'"
    ) from exc

import contextlib

from ..core.envelope import SessionEvent
from ..core.header import SessionHeader
from ..errors import (
    InvalidEventError,
    SeqConflictError,
    SessionExistsError,
    SessionNotFoundError,
    StoreBusyError,
)
from ..store.store import SessionStore
from ._claude_mapping import ENTRY_TYPE, ClaudeState, map_entry
from ._common import (
    MAX_TRIES,
    Batch,
    LoopLocks,
    StoreHandle,
    iso_ms,
    list_all,
    now_ms,
)

__all__ = ["TodoSessionsStore", "project_tag", "session_id_for"]

METADATA_KEY = "claude"
"""The key of a session's metadata this adapter owns: ``{project_key, session_id, subpath?,
summary?}``."""
MAX_SESSION_ID = 150
"""The longest SDK session id a key may have (the store's ids hold 200 characters)."""

_TASK_CREATED = re.compile(r"Task #(\S+) created")


def _digest(text: str, n: int) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:n]


def project_tag(project_key: str) -> str:
    """The tag of the main sessions of ``project_key`` (a digest: keys may be long)."""
    return f"claude-project:{_digest(project_key, 24)}"


def _check_key(key: Mapping[str, Any]) -> tuple[str, str, str | None]:
    if not isinstance(key, Mapping):
        raise InvalidEventError(f"a session key must be a dict, got {type(key).__name__}")
    project, session, subpath = key.get("project_key"), key.get("session_id"), None
    if not isinstance(project, str):
        raise InvalidEventError("key.project_key must be a string", field="key.project_key")
    if not isinstance(session, str) or not 1 <= len(session) <= MAX_SESSION_ID:
        raise InvalidEventError(
            f"key.session_id must be a string of 1-{MAX_SESSION_ID} characters, got "
            f"{session!r:.80}",
            field="key.session_id",
        )
    if not session.isprintable():
        raise InvalidEventError(
            "key.session_id must not contain control characters", field="key.session_id"
        )
    if "subpath" in key:
        subpath = key["subpath"]
        if not isinstance(subpath, str) or not subpath:
            raise InvalidEventError(
                "key.subpath must be a non-empty string (omit it for the main transcript)",
                field="key.subpath",
            )
    return project, session, subpath


_MARKED = re.compile(r"~(?:[0-9a-f]{16})?\Z")
"""A ``session_id`` ending as a sub-agent id ends (``~<16 hex digits>``), or with ``~``."""


def session_id_for(key: Mapping[str, Any]) -> str:
    """The todo-sessions id of a key: ``claude-<project digest>-<session_id>``, and
    ``~<subpath digest>`` after it for a sub-agent transcript.

    One id per key, never another key's: a ``session_id`` that ends with ``~`` or with
    ``~`` and 16 hex digits gets one more ``~``, so that no main id ends as a sub-agent's
    does (``S~<digest of a subpath>`` was the id of S's sub-agent transcript). Such keys were
    stored under the id without it before (`TodoSessionsStore` still finds them there)."""
    project, session, subpath = _check_key(key)
    return _id_of(project, session + ("~" if _MARKED.search(session) else ""), subpath)


def _id_of(project: str, session: str, subpath: str | None) -> str:
    main = f"claude-{_digest(project, 16)}-{session}"
    return main if subpath is None else f"{main}~{_digest(subpath, 16)}"


def _earlier_id(key: Mapping[str, Any]) -> str | None:
    """The id a key had before `session_id_for` marked it (None: the same id)."""
    project, session, subpath = _check_key(key)
    return _id_of(project, session, subpath) if _MARKED.search(session) else None


def _main_key(key: Mapping[str, Any]) -> dict[str, Any]:
    return {"project_key": key["project_key"], "session_id": key["session_id"]}


def _owner(metadata: Mapping[str, Any]) -> tuple[Any, Any, Any] | None:
    """The key whose transcript a session holds, from its metadata (None: not said)."""
    own = metadata.get(METADATA_KEY)
    if not isinstance(own, dict):
        return None
    return own.get("project_key"), own.get("session_id"), own.get("subpath")


def _foreign(metadata: Mapping[str, Any], key: Mapping[str, Any], sid: str) -> str | None:
    """Why session ``sid`` is not ``key``'s (another key's transcript), or None."""
    owner = _owner(metadata)
    if owner is None or owner == _check_key(key):
        return None
    _, session, subpath = owner
    whose = f"session_id {session!r}" + (f", subpath {subpath!r}" if subpath else "")
    return f"session {sid!r} holds the transcript of another key ({whose})"


def _metadata_of(events: list[SessionEvent]) -> Mapping[str, Any]:
    metadata: Mapping[str, Any] = {}
    for event in events:
        if event.type == SESSION_META and isinstance(event.payload.get("metadata"), dict):
            metadata = event.payload["metadata"]
    return metadata


# -- mapping: transcript lines onto typed events -------------------------------------------------


class TodoSessionsStore:
    """The Claude Agent SDK ``SessionStore`` protocol on a todo-sessions store.

    ``store_or_url`` is a `SessionStore` (left open by `aclose`) or a database URL or path (the
    adapter opens the store, and `aclose` closes it). ``cwd`` is put in the headers of the
    sessions it creates (an absolute path). Every method of the protocol is implemented:
    `append`, `load`, `list_sessions`, `list_session_summaries`, `delete`, `list_subkeys`.
    """

    def __init__(
        self, store_or_url: SessionStore | str | os.PathLike[str], *, cwd: str | None = None
    ) -> None:
        self._handle = StoreHandle(store_or_url)
        self.cwd = cwd
        self._states: dict[str, ClaudeState] = {}
        self._locks = LoopLocks()
        """Appends to one session from one event loop queue up; appends from other threads
        and loops race through the store's seq check, and the loser is built again."""

    @property
    def store(self) -> SessionStore:
        """The todo-sessions store the transcripts are in."""
        return self._handle.store

    async def aclose(self) -> None:
        """Close the store if this adapter opened it (a store passed in stays open)."""
        await self._handle.aclose()

    async def __aenter__(self) -> TodoSessionsStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- state --------------------------------------------------------------------------------

    async def _state(self, session_id: str) -> ClaudeState:
        """The fold of the stored log, brought up to date with what others appended. A fold,
        once cached, is never changed (a newer one replaces it), so the threads and event
        loops that share this adapter read it at once: never change what this returns."""
        cached = self._states.get(session_id)
        events: list[SessionEvent] = []
        with contextlib.suppress(SessionNotFoundError):
            start = 0 if cached is None else cached.next_seq
            events = await self.store.read_from(session_id, start)
        if cached is not None and not events:
            return cached
        state = ClaudeState() if cached is None else cached.copy()
        state.advance_all(events)
        self._states[session_id] = state
        return state

    async def _metadata(self, sid: str) -> Mapping[str, Any] | None:
        """A stored session's metadata (None: no such session)."""
        try:
            return (await self.store.summary(sid)).metadata
        except SessionNotFoundError:
            return None

    async def _sid(self, key: Mapping[str, Any]) -> str:
        """The id of ``key``'s session: `session_id_for`, or where the key was stored before
        it was marked (when that session is the key's own and none is at the new id)."""
        sid = session_id_for(key)
        earlier = _earlier_id(key)
        if earlier is not None and await self._metadata(sid) is None:
            metadata = await self._metadata(earlier)
            if metadata is not None and _owner(metadata) == _check_key(key):
                return earlier
        return sid

    # -- the protocol ---------------------------------------------------------------------------

    async def append(self, key: Mapping[str, Any], entries: list[Any]) -> None:
        """Append a batch of transcript lines in one transaction; lines whose ``uuid`` is
        stored for this key already are skipped (the SDK retries batches)."""
        project, session, subpath = _check_key(key)
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise InvalidEventError(
                    f"entries[{i}] must be a JSON object, got {type(entry).__name__}",
                    event_type=ENTRY_TYPE,
                    field=f"entries[{i}]",
                )
            if not isinstance(entry.get("type"), str):
                raise InvalidEventError(
                    f"entries[{i}].type must be a string", event_type=ENTRY_TYPE, field="type"
                )
        if not entries:
            return
        sid = await self._sid(key)
        async with self._locks(sid):
            for _ in range(MAX_TRIES):
                state = (await self._state(sid)).copy()
                foreign = _foreign(state.metadata, key, sid)
                if foreign is not None:
                    raise InvalidEventError(f"{foreign}: nothing appended", field="key")
                batch = self._build(state, key, project, session, subpath, entries)
                if not batch.events:
                    return
                try:
                    if state.next_seq == len(batch.events) and batch.events[0].seq == 0:
                        parent = None if subpath is None else await self._sid(_main_key(key))
                        await self._create(sid, parent, entries)
                    await self.store.append(sid, batch.events)
                except (SeqConflictError, SessionExistsError, StoreBusyError):
                    continue  # another writer was first: build again on the log as it is now
                self._states[sid] = state
                return
            raise SeqConflictError(sid, -1, None, detail=f"append kept racing ({MAX_TRIES} tries)")

    def _build(
        self,
        state: ClaudeState,
        key: Mapping[str, Any],
        project: str,
        session: str,
        subpath: str | None,
        entries: list[dict[str, Any]],
    ) -> Batch:
        """The batch for ``entries``, advancing ``state`` (a copy: kept if the append lands)."""
        work = state
        batch = Batch(work, now_ms())
        fresh: list[dict[str, Any]] = []
        for entry in entries:
            uuid = entry.get("uuid")
            if isinstance(uuid, str) and uuid in work.uuids:
                continue
            fresh.append(entry)
            batch.time = iso_ms(entry.get("timestamp"), batch.time)
            event = batch.add(ENTRY_TYPE, entry, ignorable=True)
            map_entry(batch, work, event.payload)
        if not fresh:
            return batch
        own: dict[str, Any] = dict(work.metadata.get(METADATA_KEY) or {})
        own.update(project_key=project, session_id=session)
        if subpath is not None:
            own["subpath"] = subpath
        else:
            prev = own.get("summary")
            previous = None if prev is None else {"session_id": session, "mtime": 0, "data": prev}
            own["summary"] = fold_session_summary(previous, dict(key), fresh)["data"]  # type: ignore[arg-type]
        meta: dict[str, Any] = {}
        if own != work.metadata.get(METADATA_KEY):
            meta["metadata"] = {**work.metadata, METADATA_KEY: own}
        tag = project_tag(project) if subpath is None else "claude-subagent"
        if tag not in work.tags:
            meta["tags"] = [*work.tags, tag]
        if meta:
            batch.add(SESSION_META, meta, ignorable=True)
        return batch

    async def _create(self, sid: str, parent: str | None, entries: list[dict[str, Any]]) -> None:
        cwd = self.cwd
        if cwd is None:
            found = next((e["cwd"] for e in entries if isinstance(e.get("cwd"), str)), None)
            cwd = found if found and os.path.isabs(found) else None
        header = SessionHeader(
            id=sid,
            created_at=now_ms(),
            cwd=cwd,
            parent_session=parent,
            origin="claude-agent-sdk",
            delegation_depth=0 if parent is None else 1,
        )
        # created meanwhile, or pending here: the append decides
        with contextlib.suppress(SessionExistsError):
            await self.store.create(header)

    async def load(self, key: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """The stored lines of ``key`` in order, deep-equal to what was appended; None for a
        key never written (or whose id holds another key's transcript)."""
        sid = await self._sid(key)
        try:
            events = await self.store.read_from(sid)
        except SessionNotFoundError:
            return None
        if _foreign(_metadata_of(events), key, sid) is not None:
            return None
        return [event.data_copy() for event in events if event.type == ENTRY_TYPE]

    async def list_sessions(self, project_key: str) -> list[dict[str, Any]]:
        """``[{session_id, mtime}]`` of the project's main transcripts (mtime: the store's
        ``updated_at``, epoch ms)."""
        out = []
        async for summary in list_all(self.store, tag=project_tag(project_key)):
            own = summary.metadata.get(METADATA_KEY)
            if isinstance(own, dict) and own.get("project_key") == project_key:
                out.append({"session_id": own["session_id"], "mtime": summary.updated_at})
        return out

    async def list_session_summaries(self, project_key: str) -> list[dict[str, Any]]:
        """``[{session_id, mtime, data}]``: the folded summaries stored by `append`, verbatim."""
        out = []
        async for summary in list_all(self.store, tag=project_tag(project_key)):
            own = summary.metadata.get(METADATA_KEY)
            if (
                isinstance(own, dict)
                and own.get("project_key") == project_key
                and isinstance(own.get("summary"), dict)
            ):
                item = {"session_id": own["session_id"], "mtime": summary.updated_at}
                out.append({**item, "data": own["summary"]})
        return out

    async def delete(self, key: Mapping[str, Any]) -> None:
        """Delete a transcript; a main key takes its sub-agent transcripts with it. Another
        key's transcript is never deleted."""
        sid = await self._sid(key)
        metadata = await self._metadata(sid)
        if metadata is None or _foreign(metadata, key, sid) is not None:
            return
        doomed = [sid]
        if "subpath" not in key:
            doomed[:0] = [s for s, _ in await self._subkeys(key)]
        for one in doomed:
            self._states.pop(one, None)
            with contextlib.suppress(SessionNotFoundError):
                await self.store.delete(one)

    async def list_subkeys(self, key: Mapping[str, Any]) -> list[str]:
        """The subpaths stored under a main key (sub-agent transcripts)."""
        return [subpath for _, subpath in await self._subkeys(key)]

    async def _subkeys(self, key: Mapping[str, Any]) -> list[tuple[str, str]]:
        main = _main_key(key)
        project, session, _ = _check_key(main)
        out = []
        async for summary in list_all(self.store, parent=await self._sid(main)):
            owner = _owner(summary.metadata)
            if owner is not None and owner[:2] == (project, session) and isinstance(owner[2], str):
                out.append((summary.id, owner[2]))
        return out
