"""The public operations of `SessionStore`, each one call into the part of the store that does
it (`reading`, `writing`, `listing`, `finding`, `repair`, `streams`, `leasing`, `retention`).

`StoreOperations` holds no state and builds nothing: `SessionStore` (`store`) builds the parts
and is the one class that uses it. It is a class of its own only to keep both modules under
the 500 lines every module keeps (as one class they are about 640); the documentation of each
operation is here.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import aclosing
from types import EllipsisType
from typing import Any, Literal

from ..core.checkpoint import LiveState
from ..core.envelope import SessionEvent
from ..core.header import SessionHeader
from ..core.messages import Message
from ..core.todos import TodoItem
from .finding import Finding
from .leases import Lease, LeaseHolder
from .leasing import Leasing
from .listing import Listing
from .reading import Reading
from .records import CheckpointText
from .repair import Repair
from .results import (
    CheckpointInfo,
    PruneReport,
    ResumedState,
    SearchHit,
    SessionSummary,
    SessionUsage,
    StoredLog,
)
from .retention import Retention
from .streams import Streams
from .writing import EventInput, Writing

__all__ = ["StoreOperations"]


class StoreOperations:
    """The operations of `SessionStore` (see there), forwarded to its parts."""

    _reading: Reading
    _writing: Writing
    _listing: Listing
    _finding: Finding
    _repair: Repair
    _streams: Streams
    _leasing: Leasing
    _retention: Retention

    async def read_from(
        self, session_id: str, from_seq: int = 0, *, limit: int | None = None
    ) -> list[SessionEvent]:
        """The stored events with ``seq >= from_seq`` (at most ``limit``), exactly as stored."""
        return await self._reading.read_from(session_id, from_seq, limit=limit)

    async def read(self, session_id: str) -> StoredLog:
        """Header, every event and the revision token, read in one transaction."""
        return await self._reading.read(session_id)

    async def head(self, session_id: str) -> str | None:
        """The chain value of the session's last event (docs/design.md, "The hash chain"):
        kept elsewhere, it lets `chain_break` (``verify``) tell a log rewritten or cut short
        after it was read. None for a session with no events yet (created, never appended)."""
        return await self._reading.head(session_id)

    async def chain_head(self, session_id: str) -> tuple[int, str | None] | None:
        """``(seq, chain value)`` of the session's last event, or None (see `head`)."""
        return await self._reading.chain_head(session_id)

    async def chain_break(
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
        return await self._reading.chain_break(session_id, against=against)

    async def header(self, session_id: str) -> SessionHeader:
        """The stored header of a session."""
        return await self._reading.header(session_id)

    async def revision(self, session_id: str) -> str:
        """The current revision token of a stored session."""
        return await self._reading.revision(session_id)

    async def summary(self, session_id: str) -> SessionSummary:
        """The `list` entry of one session."""
        return await self._reading.summary(session_id)

    async def count(self, session_id: str, *, type: str | None = None) -> int:
        """How many events the session has (of one ``type``, through the type index)."""
        return await self._reading.count(session_id, type=type)

    async def current_todos(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> list[TodoItem] | None:
        """The todo list of the latest ``todo/write`` (as of ``upto_seq``), or None: one
        indexed row read, whatever the session's length."""
        return await self._reading.current_todos(session_id, upto_seq=upto_seq)

    async def latest_event(
        self, session_id: str, *types: str, upto_seq: int | None = None
    ) -> SessionEvent | None:
        """The latest event of one of ``types`` (as of ``upto_seq``), or None: one indexed row
        read per type, whatever the session's length. ``latest_event(id, "todo/write")`` is the
        write `current_todos` reads; ``latest_event(id, "turn/start", "turn/end")`` tells
        whether a turn is open."""
        return await self._reading.latest_event(session_id, *types, upto_seq=upto_seq)

    async def derive_messages(
        self, session_id: str, *, upto_seq: int | None = None
    ) -> list[Message]:
        """The model's message history, read from surface rows only (as of ``upto_seq``)."""
        return await self._reading.derive_messages(session_id, upto_seq=upto_seq)

    async def usage(self, session_id: str) -> SessionUsage:
        """The ``usage`` objects of the session's ``assistant/message`` events added up, in
        all and per turn (`SessionUsage`), read through the type index."""
        return await self._reading.usage(session_id)

    async def create(self, header: SessionHeader) -> None:
        """Register a new session. Nothing is written until its first non-empty append."""
        return await self._writing.create(header)

    async def append(
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
        return await self._writing.append(session_id, events, lease=lease)

    async def delete(self, session_id: str) -> None:
        """Remove a session and all its events (the only way rows ever leave)."""
        return await self._writing.delete(session_id)

    async def check_database(self) -> list[str]:
        """The database engine's own integrity check (SQLite: ``PRAGMA integrity_check``):
        each problem it reports, or ``[]`` when it finds none. Changes nothing."""
        return await self._listing.check_database()

    async def session_ids(
        self, *, source: Literal["sessions", "events"] = "sessions", page_size: int = 1000
    ) -> AsyncIterator[str]:
        """Every stored session id in id order, paged. ``source="events"`` reads the ids from
        the event rows themselves: it also finds events whose session row is missing."""
        async with aclosing(self._listing.session_ids(source=source, page_size=page_size)) as items:
            async for item in items:
                yield item

    async def seqs_past_end(self, session_id: str, *, limit: int = 100) -> list[int]:
        """Seqs of event rows at or after the session's stored next seq (at most ``limit``).
        A healthy log has none: such rows were written outside todo_sessions."""
        return await self._listing.seqs_past_end(session_id, limit=limit)

    async def update_meta(
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
        return await self._listing.update_meta(
            session_id,
            title=title,
            tags=tags,
            add_tags=add_tags,
            remove_tags=remove_tags,
            metadata=metadata,
            lease=lease,
        )

    async def search(
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
        return await self._finding.search(
            query,
            cwd=cwd,
            tag=tag,
            since=since,
            until=until,
            kinds=kinds,
            limit=limit,
            before=before,
        )

    async def reindex(self, *, search_config: str | None = None) -> int:
        """Rebuild the search index from the stored logs, in one transaction (the index is
        derived data: nothing else changes). Returns how many index rows it holds.

        ``search_config`` (PostgreSQL only): the text search configuration to build it with
        from now on, for every store on this database (``english`` stems: ``running`` finds
        ``runs``); a name the server does not know is a `ValueError`. See `search_config`."""
        return await self._finding.reindex(search_config=search_config)

    async def search_config(self) -> str | None:
        """PostgreSQL: the text search configuration the index is built with (``simple``
        unless `reindex` chose another); SQLite: None (FTS5's ``unicode61 remove_diacritics
        2`` tokenizer, no stemming)."""
        return await self._finding.search_config()

    async def search_index_problems(
        self, session_id: str | None = None, events: Sequence[SessionEvent] | None = None
    ) -> list[str]:
        """What is wrong with the search index: of one session (its rows against its log;
        ``events``: the log already read), or with no id the index as a whole (SQLite: FTS5's
        check of its index against the rows). Empty: nothing. `reindex` repairs either."""
        return await self._finding.search_index_problems(session_id, events)

    async def write_checkpoint(self, session_id: str, state: LiveState, *, keep: int = 4) -> bool:
        """Store ``state`` as the session's checkpoint at ``state.next_seq`` (docs/design.md,
        "Checkpoints"), keeping the newest ``keep``. False, and nothing written, when the
        stored log ends before that seq. Checkpoints are derived data: never required."""
        return await self._repair.write_checkpoint(session_id, state, keep=keep)

    async def checkpoints(self, session_id: str) -> list[CheckpointInfo]:
        """The session's stored checkpoints, oldest first."""
        return await self._repair.checkpoints(session_id)

    async def checkpoint_texts(self, session_id: str) -> list[CheckpointText]:
        """``(seq, state text)`` of each stored checkpoint, oldest first (what `verify`
        recomputes)."""
        return await self._repair.checkpoint_texts(session_id)

    async def delete_checkpoints(self, session_id: str) -> int:
        """Delete every checkpoint of a session; how many there were. Changes nothing but the
        speed of `resume_state` and `derive_messages`."""
        return await self._repair.delete_checkpoints(session_id)

    async def resume_state(
        self, session_id: str, *, repair: bool = True, lease: Lease | None = None
    ) -> ResumedState:
        """The live state at the end of the stored log, read from the newest usable checkpoint
        and the events after it, never the whole log; an interrupted last turn is closed
        durably first, as `load` does (``repair=False``: read only; the state then shows the
        open turn). The closers are appended under ``lease`` when one is given. A checkpoint
        that cannot be used is passed over with a warning (the result is the same, only
        slower)."""
        return await self._repair.resume_state(session_id, repair=repair, lease=lease)

    async def inspect(self, session_id: str) -> StoredLog:
        """The stored log plus, in memory only, the closers of an interrupted last turn.

        ``events`` includes the closers; ``closers`` lists them. Nothing is written.
        """
        return await self._repair.inspect(session_id)

    async def load(self, session_id: str) -> StoredLog:
        """Like `inspect`, but the closers are appended durably first (the revision changes
        once). Loading a log with no open turn writes nothing."""
        return await self._repair.load(session_id)

    async def fork(
        self,
        source_id: str,
        boundary: int | None = None,
        child_id: str | None = None,
        *,
        title: str | None = None,
    ) -> StoredLog:
        """A new session seeded with events ``0..boundary`` (default: all) of ``source_id``,
        followed by ``session/end-seed``. The prefix may not end inside an open turn."""
        return await self._repair.fork(source_id, boundary, child_id, title=title)

    async def stream(
        self, session_id: str, from_seq: int = 0, *, page_size: int | None = None
    ) -> AsyncIterator[SessionEvent]:
        """Like `read_from`, as an async iterator reading ``page_size`` events per query.

        Each page is its own short read transaction, so no transaction stays open while the
        caller works, and memory stays flat for any session size.
        """
        async with aclosing(
            self._streams.stream(session_id, from_seq, page_size=page_size)
        ) as items:
            async for item in items:
                yield item

    async def follow(
        self,
        session_id: str,
        from_seq: int = 0,
        *,
        poll_interval: float = 0.05,
        page_size: int | None = None,
        reconnect_timeout: float = 30.0,
    ) -> AsyncIterator[SessionEvent]:
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
        async with aclosing(
            self._streams.follow(
                session_id,
                from_seq,
                poll_interval=poll_interval,
                page_size=page_size,
                reconnect_timeout=reconnect_timeout,
            )
        ) as items:
            async for item in items:
                yield item

    async def acquire_lease(
        self, session_id: str, owner: str, *, ttl: float = 30.0, steal: bool = False
    ) -> Lease:
        """Take the ownership lease on a session for ``ttl`` seconds (docs/design.md,
        "Leases"). Free, expired or already ``owner``'s → a new epoch; held by another live
        owner → `SessionLeasedError` naming it and its expiry, unless ``steal``."""
        return await self._leasing.acquire_lease(session_id, owner, ttl=ttl, steal=steal)

    async def renew_lease(self, lease: Lease, *, ttl: float = 30.0) -> Lease:
        """Extend a lease still held for ``ttl`` seconds from now; `LeaseLostError` when it
        was taken over or ran out meanwhile."""
        return await self._leasing.renew_lease(lease, ttl=ttl)

    async def release_lease(self, lease: Lease) -> bool:
        """Give a lease back. False when it was no longer this holder's (nothing changed)."""
        return await self._leasing.release_lease(lease)

    async def lease_holders(self, session_ids: Iterable[str]) -> dict[str, LeaseHolder]:
        """The stored lease rows of these sessions (live or expired: see `LeaseHolder.live`)."""
        return await self._leasing.lease_holders(session_ids)

    async def prune(
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
        return await self._retention.prune(
            older_than=older_than,
            keep_last=keep_last,
            tag=tag,
            dry_run=dry_run,
            archive=archive,
            keep_checkpoints=keep_checkpoints,
        )

    async def list(
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
        return await self._listing.list(
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
