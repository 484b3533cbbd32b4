"""Every exception todo_sessions raises on purpose.

::

    TodoSessionsError                  base class; catch this to catch everything below
    ├── SessionNotFoundError           no stored log (and no pending create) for that id
    ├── SessionExistsError             create() of an id that already has a stored log
    ├── SeqConflictError               an append did not start at the stored next seq
    │                                  (another writer got there first, or a replay)
    ├── InvalidEventError (ValueError) an event or payload is malformed; nothing written
    │   └── ImportLimitError           a file to import is larger (decompressed) or holds
    │                                  more events than a limit allows (``limit`` names it)
    ├── StructureError                 strict mode: an append breaks turn/step structure
    ├── CompactionError (ValueError)   a compaction or prune span that would break the
    │                                  history (cuts a call from its result, ...); nothing
    │                                  written
    ├── CorruptSessionError            a stored row cannot be decoded, or seqs have a gap
    ├── CheckpointError (ValueError)   a stored projection checkpoint this version cannot
    │                                  use (reads pass over it and fold instead)
    ├── FormatUnsupportedError         a stored log uses a format or event type we do
    │                                  not understand
    ├── SchemaError                    the database is not migrated, or is not ours
    ├── NamespaceError (ValueError)    a schema or table prefix that is malformed, or
    │                                  that the backend does not take
    ├── SearchQueryError (ValueError)  a search query the syntax does not accept
    ├── ChainKeyError                  an append to a session whose hash chain is keyed,
    │                                  from a store without that key (or with another)
    ├── SessionLeasedError             resume() of a session another live owner holds
    ├── LeaseLostError                 a service's lease on a session was stolen or expired;
    │                                  its append wrote nothing
    ├── EventsNotStoredError           a closing service could not store a session's queued
    │                                  events; they were saved to a recovery file
    ├── StoreError                     any other database failure (driver error wrapped)
    │   ├── StoreBusyError             the database stayed locked past the busy timeout
    │   └── StoreUnavailableError      the database cannot be reached or the connection
    │       │                          was lost; the store reconnects on the next call
    │       └── StandbyServerError     a write reached a standby (a server in recovery or
    │                                  read-only); another host is tried
    ├── AcknowledgedEventsLostError    the server lost events this store was told were
    │                                  stored (a failover to a standby that lagged)
    └── ModelError                     a model provider failed (``provider`` names it)
        ├── ProviderResponseError      a malformed response or stream (not retried)
        └── ModelRequestError          a request failed (``status``, ``retryable``)
            └── ModelAuthError         no API key, or the provider refused it (401/403)

Driver exceptions (sqlite3, asyncpg, SQLAlchemy) never escape the store raw: they are
translated once, at the store boundary, and chained with ``raise ... from exc``.

This module imports nothing from the package, so every layer can import it.
"""

from __future__ import annotations

__all__ = [
    "AcknowledgedEventsLostError",
    "ChainKeyError",
    "CheckpointError",
    "CorruptSessionError",
    "EventsNotStoredError",
    "FormatUnsupportedError",
    "ImportLimitError",
    "InvalidEventError",
    "LeaseLostError",
    "NamespaceError",
    "SchemaError",
    "SearchQueryError",
    "SeqConflictError",
    "SessionExistsError",
    "SessionLeasedError",
    "SessionNotFoundError",
    "StandbyServerError",
    "StoreBusyError",
    "StoreError",
    "StoreUnavailableError",
    "StructureError",
    "TodoSessionsError",
]


class TodoSessionsError(Exception):
    """Base class of every error raised by todo_sessions."""


class SessionNotFoundError(TodoSessionsError, LookupError):
    """There is no stored log for the session id (and no pending ``create``)."""

    def __init__(self, session_id: str, detail: str = "") -> None:
        self.session_id = session_id
        super().__init__(f"session {session_id!r} not found" + (f": {detail}" if detail else ""))


class SessionExistsError(TodoSessionsError):
    """``create`` was called for an id that already has a stored log."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"session {session_id!r} already exists")


class SeqConflictError(TodoSessionsError):
    """An append did not start exactly at the stored next seq; nothing was written."""

    def __init__(
        self, session_id: str, first_seq: int, next_seq: int | None, *, detail: str | None = None
    ) -> None:
        self.session_id = session_id
        self.first_seq = first_seq
        self.next_seq = next_seq
        if detail is None:
            detail = f"stored next seq is {next_seq}"
        super().__init__(f"session {session_id!r} append starts at seq {first_seq}, {detail}")


class InvalidEventError(TodoSessionsError, ValueError):
    """An event, its envelope or its payload is malformed. Nothing was written.

    ``event_type``, ``seq`` and ``field`` name what was wrong when they are known.
    """

    def __init__(
        self,
        message: str,
        *,
        event_type: str | None = None,
        seq: int | None = None,
        field: str | None = None,
    ) -> None:
        self.event_type = event_type
        self.seq = seq
        self.field = field
        super().__init__(message)


class ImportLimitError(InvalidEventError):
    """A file to import is larger, decompressed, than ``max_bytes`` or holds more events than
    ``max_events`` (``limit`` names which, ``value`` its value). It was not read further and
    nothing was written: a larger file imports with the limit raised."""

    def __init__(self, limit: str, value: int, detail: str) -> None:
        self.limit = limit
        self.value = value
        super().__init__(
            f"{detail} (the limit {limit}={value}; raise it to import a larger file): "
            "nothing imported",
            field=limit,
        )


class SearchQueryError(TodoSessionsError, ValueError):
    """A `SessionStore.search` query this syntax does not accept (docs/design.md, "Search"):
    ``problem`` says what, ``position`` (0-based, or None) where in ``query``."""

    def __init__(self, query: str, problem: str, position: int | None = None) -> None:
        self.query = query
        self.problem = problem
        self.position = position
        where = "" if position is None else f" at character {position + 1}"
        super().__init__(f"search query: {problem}{where}")


class StructureError(TodoSessionsError):
    """Strict mode: an append would break the turn/step structure.

    See docs/format.md, "Turns and steps".
    """

    def __init__(self, message: str, *, seq: int | None = None, rule: str | None = None) -> None:
        self.seq = seq
        self.rule = rule
        super().__init__(message)


class CorruptSessionError(TodoSessionsError):
    """A stored row cannot be decoded, or the stored seqs are not contiguous."""

    def __init__(self, session_id: str, seq: int | None, detail: str) -> None:
        self.session_id = session_id
        self.seq = seq
        where = f" at seq {seq}" if seq is not None else ""
        super().__init__(f"session {session_id!r} is corrupt{where}: {detail}")


class CheckpointError(TodoSessionsError, ValueError):
    """A stored projection checkpoint this version cannot use: an unknown format, text that
    does not decode, a state for another seq, or nodes that do not match their digest.

    Reads catch it and pass over the checkpoint (falling back to an older one or to the fold
    of the log); `verify` reports it. It reaches a caller only from a live session restored
    from a checkpoint whose surface nodes were rewritten together with their digest (see
    docs/design.md, "Checkpoints").

    ``obsolete`` is True for a checkpoint of an older format this version no longer reads:
    derived data an upgrade left behind, not damage (reads pass over it without a warning,
    `verify` does not report it, and the next checkpoint replaces it).
    """

    def __init__(self, message: str, *, obsolete: bool = False) -> None:
        super().__init__(message)
        self.obsolete = obsolete


class FormatUnsupportedError(TodoSessionsError):
    """The stored log uses a format version or an event type this version cannot read.

    ``session_id``, and ``seq`` for an event type, name where.
    """

    def __init__(
        self, message: str, *, session_id: str | None = None, seq: int | None = None
    ) -> None:
        self.session_id = session_id
        self.seq = seq
        super().__init__(message)


class SchemaError(TodoSessionsError):
    """The database is not migrated to the schema this version needs, or is not ours."""


class NamespaceError(TodoSessionsError, ValueError):
    """A namespace (``schema=`` / ``table_prefix=``) that cannot be used: a malformed or too
    long name, an option the backend does not take (``schema`` is PostgreSQL's,
    ``table_prefix`` SQLite's), or a keyword that contradicts the URL's parameter.
    ``option`` and ``value`` name what was wrong."""

    def __init__(self, message: str, *, option: str, value: object) -> None:
        self.option = option
        self.value = value
        super().__init__(message)


class StoreError(TodoSessionsError):
    """A database failure that none of the more specific errors describes."""


class StoreBusyError(StoreError):
    """The database stayed locked by another writer longer than the busy timeout (a
    `StoreError`: ``except StoreError`` catches it too)."""


class StoreUnavailableError(StoreError):
    """The database could not be reached, or the connection was lost mid-call.

    Transient: the dead connection is discarded and the next call opens a fresh one. Reads
    were already retried (once, or for the store's ``reconnect_timeout``); an append whose
    commit was not confirmed was resolved by reading the session back (stored: success; not
    stored: sent again) before this is raised.
    """


class StandbyServerError(StoreUnavailableError):
    """A write reached a server that does not take writes: a standby, a server still in
    recovery (SQLSTATE 25006), or one shutting down for a failover.

    Transient, like any `StoreUnavailableError`: the connection is dropped and, for the rest of
    the store's life, new connections go only to a host that takes writes (libpq's
    ``target_session_attrs=read-write``); the write is retried within the store's
    ``reconnect_timeout`` and raised only when no host took it in time. Nothing was written.
    """


class AcknowledgedEventsLostError(TodoSessionsError):
    """The database no longer has events this store acknowledged as stored.

    With asynchronous replication, a standby promoted after a failover may lack the last
    commits of the old primary. The store remembers the end of each session it appended to
    (``acknowledged_end``, its next seq after the last acknowledged append) and refuses to go
    on when the stored end is behind it (``stored_end``): the seqs ``lost_seqs`` would
    otherwise be handed out again with other contents. Nothing was written. The session needs
    a person: the lost events are at best in the old primary's WAL. ``verify`` reports it.
    """

    def __init__(
        self, session_id: str, acknowledged_end: int, stored_end: int | None, detail: str = ""
    ) -> None:
        self.session_id = session_id
        self.acknowledged_end = acknowledged_end
        self.stored_end = stored_end
        self.lost_seqs = range(stored_end or 0, acknowledged_end)
        if stored_end is None:
            what = "the database no longer has the session"
        else:
            what = f"it now ends before seq {stored_end}"
        last = acknowledged_end - 1
        seqs = f"seq {last}" if stored_end == last else f"seqs {stored_end or 0}..{last}"
        message = (
            f"session {session_id!r}: this store acknowledged events up to seq {last}, but "
            f"{what}; {seqs} were lost by the database (a failover to a standby that lagged?) "
            "and are never handed out again"
        )
        super().__init__(message + (f" ({detail})" if detail else ""))


class ChainKeyError(TodoSessionsError):
    """An append refused because the session's hash chain is keyed (its last event was
    chained with a key) and this store has no key, or another one: the event would be an
    unkeyed link that ``verify`` with the key reports forever. Open the store with the
    session's ``chain_key`` (on the command line: ``$TODO_SESSIONS_CHAIN_KEY``). Nothing
    was written."""

    def __init__(self, session_id: str, seq: int, *, keyed: bool) -> None:
        self.session_id = session_id
        self.seq = seq
        held = "another key" if keyed else "no chain key"
        super().__init__(
            f"session {session_id!r} is chained with a key (the link of its event at seq "
            f"{seq} does not recompute here), and this store has {held}: nothing appended. "
            "Open the store with the session's chain_key (the command line reads it from "
            "TODO_SESSIONS_CHAIN_KEY); if the key is right, the event was changed outside "
            "todo_sessions (`todo-sessions verify`)"
        )


class SessionLeasedError(TodoSessionsError):
    """A session is held by another live owner (a `SessionService` lease)."""

    def __init__(self, session_id: str, owner: str, expires_at: int, detail: str = "") -> None:
        self.session_id = session_id
        self.owner = owner
        self.expires_at = expires_at
        message = (
            f"session {session_id!r} is leased by {owner} until {expires_at} (ms since the "
            "epoch); resume it with steal=True to take it over"
        )
        super().__init__(message + (f" ({detail})" if detail else ""))


class LeaseLostError(TodoSessionsError):
    """The lease this writer held on a session was taken over or expired: nothing was written.

    The session's live copy in this process is stale; `SessionService.discard` drops it
    (its unstored events go to a recovery file).
    """

    def __init__(self, session_id: str, detail: str) -> None:
        self.session_id = session_id
        super().__init__(f"lease on session {session_id!r} lost: {detail}; nothing was written")


class EventsNotStoredError(TodoSessionsError):
    """A service could not store a live session's queued events before closing it.

    Nothing was dropped: the events were written to the recovery file ``path`` (JSONL export
    format), which ``todo-sessions recover PATH`` appends later. ``reason`` is the last failure.
    """

    def __init__(self, session_id: str, count: int, path: str, reason: BaseException) -> None:
        self.session_id = session_id
        self.count = count
        self.path = path
        self.reason = reason
        super().__init__(
            f"session {session_id!r}: {count} event(s) could not be stored ({reason}); they "
            f"were saved to {path}; run `todo-sessions recover {path}` to append them"
        )


# -- model providers (todo_sessions.harness: its providers and adapters) -------------------------
#
#   TodoSessionsError
#   └── ModelError                     a model provider failed, or answered unusably
#       ├── ProviderResponseError      a response (or stream) we cannot turn into deltas
#       └── ModelRequestError          the request failed (HTTP status, connection, stream)
#           └── ModelAuthError         no API key, or the provider refused it (401/403)

__all__ += ["ModelAuthError", "ModelError", "ModelRequestError", "ProviderResponseError"]


class ModelError(TodoSessionsError):
    """A model provider failed, or answered with something we cannot use."""

    def __init__(self, provider: str, message: str) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider


class ProviderResponseError(ModelError):
    """A provider's response or stream is malformed (not retried)."""


class ModelRequestError(ModelError):
    """A model request failed. ``status`` is the HTTP status (None: no response, e.g. a
    connection reset or a dropped stream); ``retryable`` whether trying again may help;
    ``attempts`` how many tries were made; ``retry_after`` the seconds the provider asked to
    wait before the next (its ``Retry-After``), or None."""

    def __init__(
        self,
        provider: str,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        attempts: int = 1,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(provider, message)
        self.status = status
        self.retryable = retryable
        self.attempts = attempts
        self.retry_after = retry_after


class ModelAuthError(ModelRequestError):
    """No API key was found, or the provider refused it (HTTP 401/403)."""


# -- compaction (docs/format.md, "Compaction") ------------------------------------------------

__all__ += ["CompactionError"]


class CompactionError(TodoSessionsError, ValueError):
    """A compaction or tool-result prune was refused before anything was appended.

    ``seq`` names the event at fault (None when there is none, e.g. an empty span) and
    ``reason`` is a short slug: ``empty``, ``not-on-surface``, ``reversed``, ``cuts-call``,
    ``open-step``, ``summary``, ``outside-turn`` (a prune needs an open turn).
    """

    def __init__(self, message: str, *, seq: int | None, reason: str) -> None:
        super().__init__(message)
        self.seq = seq
        self.reason = reason
