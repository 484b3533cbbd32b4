"""`SessionService`'s public methods, blocking: written by ``python -m todo_sessions._gen_sync``.

Do not edit: change the async class and run it again (a test fails while this file is
not what it writes). Each method is one call into the private loop thread.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from ._service import SessionService
from ._session import Session
from ._sync_thread import _LIVE, _LoopThread, _now
from .core.compaction import CompactionResult, PruneResult
from .core.envelope import SessionEvent


class _SyncSessionServiceMethods:
    """The blocking twin of each public member of `SessionService`."""

    _service: SessionService
    _thread: _LoopThread

    def checkpoint(self, session_id: str, name: str = "checkpoint") -> None:
        """Flush at a loop checkpoint.

        A transient failure (`StoreBusyError`, a lost connection) is retried a few times; if
        it persists it is logged and the events stay queued for the next checkpoint, except at
        ``"before-tool"``, where it is raised: a tool must not run before its ``tool/call`` is
        durable, or a crash could repeat its side effects with no trace. ``"turn-end"`` and
        ``"compaction"`` (after `compact` and `prune_tool_results`) also write a projection
        checkpoint. Other failures (a seq
        conflict with another writer, a deleted session) are raised at once.
        """
        return self._thread.call(self._service.checkpoint(session_id, name))

    def compact(
        self,
        session_id: str,
        summary: str | Sequence[Mapping[str, Any]],
        *,
        start_seq: int | None = None,
        end_seq: int | None = None,
        trigger: Literal["manual", "auto"] = "manual",
        tokens_before: int | None = None,
    ) -> CompactionResult:
        """`Session.compact` on a live session, then a flush: the compaction's events are
        stored in one append (all or nothing) and a projection checkpoint follows."""
        awaitable = self._service.compact(
            session_id,
            summary,
            start_seq=start_seq,
            end_seq=end_seq,
            trigger=trigger,
            tokens_before=tokens_before,
        )
        return self._thread.call(awaitable)

    def discard(self, session_id: str) -> Path | None:
        """Stop owning a live session without storing its queued events, e.g. after
        `LeaseLostError`. The unstored events are written to a recovery file, whose path is
        returned (None when nothing was queued)."""
        return self._thread.call(self._service.discard(session_id))

    def flush(self, session_id: str | None = None) -> None:
        """Write the queued events of one live session (or of all) to the store.

        Raises what the store raised; the events stay queued and the next flush retries them.
        Cancelling a flush never loses track of a write: the store append runs to its end
        (shielded) and its outcome is recorded whether or not anyone still awaits it.
        """
        return self._thread.call(self._service.flush(session_id))

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
        items = self._service.store.follow(
            session_id,
            from_seq,
            poll_interval=poll_interval,
            page_size=page_size,
            reconnect_timeout=reconnect_timeout,
        )
        return self._thread.iterate(items, _LIVE)

    def fork(
        self, source_id: str, boundary: int | None = None, child_id: str | None = None
    ) -> Session:
        """Fork a stored session (see `SessionStore.fork`) and own the child live."""
        return self._thread.call(self._service.fork(source_id, boundary, child_id))

    def get(self, session_id: str) -> Session:
        """`SessionService.get`, blocking."""
        return self._thread.call(_now(self._service.get, session_id))

    def live_ids(self) -> list[str]:
        """`SessionService.live_ids`, blocking."""
        return self._thread.call(_now(self._service.live_ids))

    def new(
        self,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        title: str | None = None,
        origin: str | None = None,
        delegation_depth: int = 0,
        parent: str | None = None,
    ) -> Session:
        """Start a new session (stored on its first flush), leased to this service.

        ``parent``: the session that started this one (a sub-agent's), stored as the header's
        ``parent_session``; ``store.list(parent=...)`` finds it."""
        awaitable = self._service.new(
            session_id,
            cwd=cwd,
            title=title,
            origin=origin,
            delegation_depth=delegation_depth,
            parent=parent,
        )
        return self._thread.call(awaitable)

    def pending(self, session_id: str) -> int:
        """How many events of a live session are not stored yet."""
        return self._thread.call(_now(self._service.pending, session_id))

    def prune_tool_results(
        self,
        session_id: str,
        *,
        before_seq: int | None = None,
        keep_last: int = 3,
        placeholder: str = "[tool result pruned to save context]",
    ) -> PruneResult:
        """`Session.prune_tool_results` on a live session, then a flush (one append)."""
        awaitable = self._service.prune_tool_results(
            session_id, before_seq=before_seq, keep_last=keep_last, placeholder=placeholder
        )
        return self._thread.call(awaitable)

    def resume(self, session_id: str, *, steal: bool = False) -> Session:
        """Resume a stored session from its newest projection checkpoint and the events after
        it (`SessionStore.resume_state`). An interrupted turn is closed durably first (crash
        repair), so the history is valid for a provider.

        The session's lease is taken first: `SessionLeasedError` when another live service
        holds it, unless ``steal`` (the other service then gets `LeaseLostError` on its next
        flush and writes nothing more). An expired lease, or one held by a process of this
        host that no longer runs, is taken over without ``steal``.
        """
        return self._thread.call(self._service.resume(session_id, steal=steal))
