"""`SessionStore`'s public methods, blocking: written by ``python -m todo_sessions._gen_sync``.

Do not edit: change the async class and run it again (a test fails while this file is
not what it writes). Each method is one call into the private loop thread.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import EllipsisType
from typing import Any, Literal

from ._sync_thread import _BATCH, _LIVE, _LoopThread
from .core.checkpoint import LiveState
from .core.envelope import SessionEvent
from .core.header import SessionHeader
from .core.messages import Message
from .core.todos import TodoItem
from .store.children import ChildSession
from .store.leases import Lease, LeaseHolder
from .store.records import CheckpointText
from .store.results import (
    CheckpointInfo,
    PruneReport,
    ResumedState,
    SearchHit,
    SessionSummary,
    SessionUsage,
    StoredLog,
)
from .store.store import SessionStore
from .store.writing import EventInput


class _SyncSessionStoreMethods:
    """The blocking twin of each public member of `SessionStore`."""

    _store: SessionStore
    _thread: _LoopThread

    def acquire_lease(
        self, session_id: str, owner: str, *, ttl: float = 30.0, steal: bool = False
    ) -> Lease:
        """Take the ownership lease on a session for ``ttl`` seconds (docs/design.md,
        "Leases"). Free, expired or already ``owner``'s → a new epoch; held by another live
        owner → `SessionLeasedError` naming it and its expiry, unless ``steal``."""
        return self._thread.call(self._store.acquire_lease(session_id, owner, ttl=ttl, steal=steal))

    def append(
        self, session_id: str, events: Iterable[EventInput], *, lease: Lease | None = None
    ) -> str:
        """Append a contiguous batch starting at the stored next seq, all or nothing.

        Returns the new revision token. Raises `SeqConflictError` when the batch does not start
        at the stored next seq (another writer was first, or a replay), `InvalidEventError` for
        a malformed event, `SessionNotFoundError` for an id with neither a stored log nor a
        pending `create`. An empty batch writes nothing and returns the current token.
        Events that already passed `validate_event` are not checked again.

        With ``lease`` (from `acquire_lease`), the append checks inside its own transaction
        that the lease is still held and unexpired, else raises `LeaseLostError` and writes
        nothing (fencing; `SessionService` passes its leases here).
        """
        return self._thread.call(self._store.append(session_id, events, lease=lease))

    def chain_break(
        self, session_id: str, *, against: Mapping[int, str] | None = None
    ) -> tuple[int, str] | None:
        """The first seq where the session's hash chain breaks, and why; None when it holds.

        Recomputes the chain (with this store's ``chain_key``) from the header and every stored
        event, page by page, against the chain values stored with them. ``against``: chain
        values of the same session kept elsewhere, by seq (a `head` kept by a harness, or every
        value of an exported file: `jsonl.file_chain`): a stored value that differs from one of
        them, or a log that ends before the last of them, is a break too (a log rewritten with
        its chain recomputed, or cut short, is found only so).
        """
        return self._thread.call(self._store.chain_break(session_id, against=against))

    def chain_head(self, session_id: str) -> tuple[int, str | None] | None:
        """``(seq, chain value)`` of the session's last event, or None (see `head`)."""
        return self._thread.call(self._store.chain_head(session_id))

    def check_database(self) -> list[str]:
        """The database engine's own integrity check (SQLite: ``PRAGMA integrity_check``):
        each problem it reports, or ``[]`` when it finds none. Changes nothing."""
        return self._thread.call(self._store.check_database())

    def checkpoint_texts(self, session_id: str) -> list[CheckpointText]:
        """``(seq, state text)`` of each stored checkpoint, oldest first (what `verify`
        recomputes)."""
        return self._thread.call(self._store.checkpoint_texts(session_id))

    def checkpoints(self, session_id: str) -> list[CheckpointInfo]:
        """The session's stored checkpoints, oldest first."""
        return self._thread.call(self._store.checkpoints(session_id))

    def children(self, session_id: str) -> list[ChildSession]:
        """The sub-agent sessions ``session_id`` started (its ``subagent`` calls' sessions,
        imported sub-agent transcripts): each session whose header names it as
        ``parent_session`` and that is not a fork of it, oldest first, with its title, status
        (running, completed, failed, aborted, interrupted) and open todos (`ChildSession`)."""
        return self._thread.call(self._store.children(session_id))

    def count(self, session_id: str, *, type: str | None = None) -> int:
        """How many events the session has (of one ``type``, through the type index)."""
        return self._thread.call(self._store.count(session_id, type=type))

    def create(self, header: SessionHeader) -> None:
        """Register a new session. Nothing is written until its first non-empty append."""
        return self._thread.call(self._store.create(header))

    def current_todos(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> list[TodoItem] | None:
        """The todo list of the latest ``todo/write`` (as of ``upto_seq``), or None: one
        indexed row read, whatever the session's length."""
        return self._thread.call(self._store.current_todos(session_id, upto_seq=upto_seq))

    def delete(self, session_id: str) -> None:
        """Remove a session and all its events (the only way rows ever leave)."""
        return self._thread.call(self._store.delete(session_id))

    def delete_checkpoints(self, session_id: str) -> int:
        """Delete every checkpoint of a session; how many there were. Changes nothing but the
        speed of `resume_state` and `derive_messages`."""
        return self._thread.call(self._store.delete_checkpoints(session_id))

    def derive_messages(self, session_id: str, *, upto_seq: int | None = None) -> list[Message]:
        """The model's message history, read from surface rows only (as of ``upto_seq``)."""
        return self._thread.call(self._store.derive_messages(session_id, upto_seq=upto_seq))

    @property
    def dialect(self) -> str:
        """`SessionStore.dialect`."""
        return self._store.dialect

    def follow(
        self,
        session_id: str,
        from_seq: int = 0,
        *,
        poll_interval: float = 0.05,
        page_size: int | None = None,
        reconnect_timeout: float = 30.0,
    ) -> Iterator[SessionEvent]:
        """The stored events from ``from_seq``, then each new one as any process appends it,
        in seq order with no gaps or duplicates. Runs until the caller stops iterating (or the
        session is deleted: `SessionNotFoundError`). Closing the iterator releases what it
        holds.

        On PostgreSQL a follower sleeps until a notification for the session (all followers of
        a store share one listening connection outside the pool); on SQLite it polls every
        ``poll_interval`` seconds.

        A lost connection does not end it: the follower reconnects and goes on from the last
        event it yielded. Only when the database stays unreachable for ``reconnect_timeout``
        seconds does it raise `StoreUnavailableError` (a `StoreError`).
        """
        items = self._store.follow(
            session_id,
            from_seq,
            poll_interval=poll_interval,
            page_size=page_size,
            reconnect_timeout=reconnect_timeout,
        )
        return self._thread.iterate(items, _LIVE)

    def fork(
        self,
        source_id: str,
        boundary: int | None = None,
        child_id: str | None = None,
        *,
        title: str | None = None,
    ) -> StoredLog:
        """A new session seeded with events ``0..boundary`` (default: all) of ``source_id``,
        followed by ``session/end-seed``. The prefix may not end inside an open turn."""
        return self._thread.call(self._store.fork(source_id, boundary, child_id, title=title))

    def head(self, session_id: str) -> str | None:
        """The chain value of the session's last event (docs/design.md, "The hash chain"):
        kept elsewhere, it lets `chain_break` (``verify``) tell a log rewritten or cut short
        after it was read. None for a session with no events yet (created, never appended)."""
        return self._thread.call(self._store.head(session_id))

    def header(self, session_id: str) -> SessionHeader:
        """The stored header of a session."""
        return self._thread.call(self._store.header(session_id))

    def inspect(self, session_id: str) -> StoredLog:
        """The stored log plus, in memory only, the closers of an interrupted last turn.

        ``events`` includes the closers; ``closers`` lists them. Nothing is written.
        """
        return self._thread.call(self._store.inspect(session_id))

    @property
    def keyed(self) -> bool:
        """Whether this store chains (and verifies) its events with a key."""
        return self._store.keyed

    def latest_event(
        self, session_id: str, *types: str, upto_seq: int | None = None
    ) -> SessionEvent | None:
        """The latest event of one of ``types`` (as of ``upto_seq``), or None: one indexed row
        read per type, whatever the session's length. ``latest_event(id, "todo/write")`` is the
        write `current_todos` reads; ``latest_event(id, "turn/start", "turn/end")`` tells
        whether a turn is open."""
        return self._thread.call(self._store.latest_event(session_id, *types, upto_seq=upto_seq))

    def lease_holders(self, session_ids: Iterable[str]) -> dict[str, LeaseHolder]:
        """The stored lease rows of these sessions (live or expired: see `LeaseHolder.live`)."""
        return self._thread.call(self._store.lease_holders(session_ids))

    def load(self, session_id: str) -> StoredLog:
        """Like `inspect`, but the closers are appended durably first (the revision changes
        once). Loading a log with no open turn writes nothing."""
        return self._thread.call(self._store.load(session_id))

    def prune(
        self,
        *,
        older_than: datetime.timedelta | int | None = None,
        keep_last: int | None = None,
        tag: str | None = None,
        dry_run: bool = False,
        archive: str | os.PathLike[str] | None = None,
        keep_checkpoints: int | None = None,
    ) -> PruneReport:
        """Archive, then delete, the sessions last active more than ``older_than`` ago
        (a `datetime.timedelta`, or ms) and/or beyond the ``keep_last`` most recently active
        (both given: both must hold), only those with ``tag`` if given; never one with a live
        lease. Each is written to ``archive`` (a directory) as its gzipped JSONL export,
        fsynced and verified against the database before it is deleted, one session per
        transaction (module docstring: the algorithm and why a crash loses nothing).

        ``keep_checkpoints=N``: of every session kept (with ``tag``, if given), delete the
        checkpoints older than its newest N (derived data: nothing is archived).
        ``dry_run``: change nothing and report what would be done. At least one of
        ``older_than``, ``keep_last``, ``keep_checkpoints`` must be given, and ``archive``
        with either of the first two.
        """
        awaitable = self._store.prune(
            older_than=older_than,
            keep_last=keep_last,
            tag=tag,
            dry_run=dry_run,
            archive=archive,
            keep_checkpoints=keep_checkpoints,
        )
        return self._thread.call(awaitable)

    def read(self, session_id: str) -> StoredLog:
        """Header, every event and the revision token, read in one transaction."""
        return self._thread.call(self._store.read(session_id))

    def read_from(
        self, session_id: str, from_seq: int = 0, *, limit: int | None = None
    ) -> list[SessionEvent]:
        """The stored events with ``seq >= from_seq`` (at most ``limit``), exactly as stored."""
        return self._thread.call(self._store.read_from(session_id, from_seq, limit=limit))

    def reindex(self, *, search_config: str | None = None) -> int:
        """Rebuild the search index from the stored logs, in one transaction (the index is
        derived data: nothing else changes). Returns how many index rows it holds.

        ``search_config`` (PostgreSQL only): the text search configuration to build it with
        from now on, for every store on this database (``english`` stems: ``running`` finds
        ``runs``); a name the server does not know is a `ValueError`. See `search_config`."""
        return self._thread.call(self._store.reindex(search_config=search_config))

    def release_lease(self, lease: Lease) -> bool:
        """Give a lease back. False when it was no longer this holder's (nothing changed)."""
        return self._thread.call(self._store.release_lease(lease))

    def renew_lease(self, lease: Lease, *, ttl: float = 30.0) -> Lease:
        """Extend a lease still held for ``ttl`` seconds from now; `LeaseLostError` when it
        was taken over or ran out meanwhile."""
        return self._thread.call(self._store.renew_lease(lease, ttl=ttl))

    def resume_state(
        self, session_id: str, *, repair: bool = True, lease: Lease | None = None
    ) -> ResumedState:
        """The live state at the end of the stored log, read from the newest usable checkpoint
        and the events after it, never the whole log; an interrupted last turn is closed
        durably first, as `load` does (``repair=False``: read only; the state then shows the
        open turn). The closers are appended under ``lease`` when one is given. A checkpoint
        that cannot be used is passed over with a warning (the result is the same, only
        slower)."""
        return self._thread.call(self._store.resume_state(session_id, repair=repair, lease=lease))

    def revision(self, session_id: str) -> str:
        """The current revision token of a stored session."""
        return self._thread.call(self._store.revision(session_id))

    def search(
        self,
        query: str,
        *,
        cwd: str | None = None,
        tag: str | None = None,
        since: int | None = None,
        until: int | None = None,
        kinds: Iterable[str] | None = None,
        limit: int = 20,
        before: SearchHit | None = None,
    ) -> list[SearchHit]:
        """Events whose text matches ``query``, newest first (the order the index received
        them: appends in their order; `reindex` and the migration by session activity).

        Syntax (docs/design.md, "Search"): words that must all occur, ``"a phrase"``,
        ``prefix*``, ``-excluded``; anything else, an unbalanced quote, a boolean operator, a
        query over 1,000 characters, is a `SearchQueryError` naming the problem. ``kinds``:
        which texts (`core.search.KINDS`; default all but ``reasoning``). ``cwd``, ``tag``,
        ``since``, ``until``: the session filters of `list`. Pass the last hit of a page as
        ``before`` for the next one.
        """
        awaitable = self._store.search(
            query,
            cwd=cwd,
            tag=tag,
            since=since,
            until=until,
            kinds=kinds,
            limit=limit,
            before=before,
        )
        return self._thread.call(awaitable)

    def search_config(self) -> str | None:
        """PostgreSQL: the text search configuration the index is built with (``simple``
        unless `reindex` chose another); SQLite: None (FTS5's ``unicode61 remove_diacritics
        2`` tokenizer, no stemming)."""
        return self._thread.call(self._store.search_config())

    def search_index_problems(
        self, session_id: str | None = None, events: Sequence[SessionEvent] | None = None
    ) -> list[str]:
        """What is wrong with the search index: of one session (its rows against its log;
        ``events``: the log already read), or with no id the index as a whole (SQLite: FTS5's
        check of its index against the rows). Empty: nothing. `reindex` repairs either."""
        return self._thread.call(self._store.search_index_problems(session_id, events))

    def seqs_past_end(self, session_id: str, *, limit: int = 100) -> list[int]:
        """Seqs of event rows at or after the session's stored next seq (at most ``limit``).
        A healthy log has none: such rows were written outside todo_sessions."""
        return self._thread.call(self._store.seqs_past_end(session_id, limit=limit))

    def session_ids(
        self, *, source: Literal["sessions", "events"] = "sessions", page_size: int = 1000
    ) -> Iterator[str]:
        """Every stored session id in id order, paged. ``source="events"`` reads the ids from
        the event rows themselves: it also finds events whose session row is missing."""
        items = self._store.session_ids(source=source, page_size=page_size)
        return self._thread.iterate(items, _BATCH)

    @property
    def store_id(self) -> str:
        """The database's random id (part of every revision token). Empty until opened."""
        return self._store.store_id

    def stream(
        self, session_id: str, from_seq: int = 0, *, page_size: int | None = None
    ) -> Iterator[SessionEvent]:
        """Like `read_from`, as an async iterator reading ``page_size`` events per query.

        Each page is its own short read transaction, so no transaction stays open while the
        caller works, and memory stays flat for any session size.
        """
        items = self._store.stream(session_id, from_seq, page_size=page_size)
        return self._thread.iterate(items, _BATCH)

    def summary(self, session_id: str) -> SessionSummary:
        """The `list` entry of one session."""
        return self._thread.call(self._store.summary(session_id))

    def update_meta(
        self,
        session_id: str,
        *,
        title: str | EllipsisType | None = ...,
        tags: Iterable[str] | None = None,
        add_tags: Iterable[str] = (),
        remove_tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        lease: Lease | None = None,
    ) -> SessionSummary:
        """Append one ``session/meta`` event to a stored session that changes what is asked
        (docs/format.md, "Session metadata"): ``title`` (None clears it; ``...``, the default,
        keeps it), ``tags`` (replaces them), ``add_tags`` / ``remove_tags`` (applied to the
        current tags, keeping their order; new ones go last), ``metadata`` (replaces it).
        Nothing is appended when nothing would change. Returns the summary after the change.
        The event is marked ``ignorable``, so readers that do not know the type skip it.

        The event goes at the stored next seq; when another writer appends meanwhile the
        current tags are read again and the event recomputed (a `SeqConflictError` only after
        five tries). A session owned live by a service must be changed through that service
        (its next flush would meet a conflict): pass its ``lease``, or use its session.
        """
        awaitable = self._store.update_meta(
            session_id,
            title=title,
            tags=tags,
            add_tags=add_tags,
            remove_tags=remove_tags,
            metadata=metadata,
            lease=lease,
        )
        return self._thread.call(awaitable)

    @property
    def url(self) -> str:
        """The database URL (password masked)."""
        return self._store.url

    def usage(self, session_id: str) -> SessionUsage:
        """The ``usage`` objects of the session's ``assistant/message`` events added up, in
        all and per turn (`SessionUsage`), read through the type index."""
        return self._thread.call(self._store.usage(session_id))

    def write_checkpoint(self, session_id: str, state: LiveState, *, keep: int = 4) -> bool:
        """Store ``state`` as the session's checkpoint at ``state.next_seq`` (docs/design.md,
        "Checkpoints"), keeping the newest ``keep``. False, and nothing written, when the
        stored log ends before that seq. Checkpoints are derived data: never required."""
        return self._thread.call(self._store.write_checkpoint(session_id, state, keep=keep))

    def list(
        self,
        *,
        limit: int = 100,
        before: SessionSummary | None = None,
        cwd: str | None = None,
        tag: str | None = None,
        since: int | None = None,
        until: int | None = None,
        parent: str | None = None,
        has_open_todos: bool | None = None,
        text: str | None = None,
    ) -> list[SessionSummary]:
        """Sessions with events, newest activity first. Pass a page's last summary as
        ``before`` to get the next page (keyset pagination on ``(updated_at, id)``).

        Filters (None: not filtered; all given ones must hold): ``cwd`` equal; ``tag`` among
        the session's tags; last activity ``since <= updated_at < until`` (epoch ms);
        ``parent`` equal to the header's ``parent_session`` (forks and sub-agent sessions of
        that session); ``has_open_todos``: whether the latest ``todo/write`` holds an item
        pending or in progress (False: none does, or there is no list); ``text``: a substring
        of the title, compared after `str.casefold` (case-insensitive).
        """
        awaitable = self._store.list(
            limit=limit,
            before=before,
            cwd=cwd,
            tag=tag,
            since=since,
            until=until,
            parent=parent,
            has_open_todos=has_open_todos,
            text=text,
        )
        return self._thread.call(awaitable)
