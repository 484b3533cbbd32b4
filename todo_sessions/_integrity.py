"""Integrity checks of a database and its sessions (``todo-sessions verify``).

`verify_all` runs the database engine's own check first (SQLite's ``PRAGMA
integrity_check``), then enumerates sessions from the sessions table *and* from the event
rows themselves (so neither a damaged index nor a missing session row hides a session), and
checks each with `verify_session`: events this store acknowledged that the database lost
(a failover to a lagging standby; only the store that appended them knows), rows the store
refuses to decode (reading on past each one, so one bad row does not hide the rest), rows
past the stored end, then the checks of
`todo_sessions.core.verify.verify_events` on what could be read (seqs, payloads, structure,
surface, answered calls, an interrupted last turn). It changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import dataclass, field

from .core.checkpoint import CheckpointError, LiveState
from .core.envelope import SessionEvent
from .core.repair import interrupted_turn_closers
from .core.verify import Problem, errors_of, verify_events
from .errors import (
    AcknowledgedEventsLostError,
    CorruptSessionError,
    FormatUnsupportedError,
    SessionNotFoundError,
)
from .store.store import SessionStore

__all__ = ["VerifyReport", "verify_all", "verify_session"]


@dataclass
class VerifyReport:
    """What `verify_all` found: problems of the database as a whole, and of each session."""

    database: list[Problem] = field(default_factory=list)
    sessions: dict[str, list[Problem]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Nothing wrong: no problem but warnings (`Problem.warning`)."""
        return not errors_of(self.database) and not any(
            errors_of(problems) for problems in self.sessions.values()
        )


async def _read_damaged(
    store: SessionStore, session_id: str
) -> tuple[list[SessionEvent], list[Problem]]:
    """Every readable event of a session, and a problem for each row the store refuses.

    Problems without a seq (the session row itself) end the read.
    """
    events: list[SessionEvent] = []
    problems: list[Problem] = []
    try:
        await store.header(session_id)
    except AcknowledgedEventsLostError as exc:  # the database lost what this store stored
        return events, [Problem(exc.stored_end, "lost", str(exc))]
    except CorruptSessionError as exc:
        problems.append(Problem(None, "corrupt", str(exc)))
    except FormatUnsupportedError as exc:
        return events, [Problem(None, "format", str(exc))]
    start = 0
    while True:
        try:
            events.extend(await store.read_from(session_id, start))
            return events, problems
        except CorruptSessionError as exc:
            problem = Problem(exc.seq, "corrupt", str(exc))
        except FormatUnsupportedError as exc:
            problem = Problem(exc.seq, "format", str(exc))
        problems.append(problem)
        bad = problem.seq
        if bad is None or bad < start:
            return events, problems
        if bad > start:  # the good rows before the bad one: exactly one page of them
            rows = store.stream(session_id, start, page_size=bad - start)
            async with aclosing(rows):  # type: ignore[type-var]  # an async generator
                async for event in rows:
                    events.append(event)
                    if event.seq == bad - 1:
                        break
        start = bad + 1


async def verify_checkpoints(
    store: SessionStore, session_id: str, events: list[SessionEvent]
) -> list[Problem]:
    """Each stored checkpoint recomputed from the log: one that cannot be read, lies past the
    end of the log, or differs from the fold is a problem (``load`` passes over it anyway).
    One of an older format this version no longer reads is not: an upgrade left it behind,
    and the session's next checkpoint replaces it."""
    texts = await store.checkpoint_texts(session_id)
    if not texts:
        return []
    problems: list[Problem] = []
    state = LiveState.empty()
    position = 0
    for seq, text in texts:
        if seq > len(events):
            problems.append(
                Problem(seq, "checkpoint", f"checkpoint at seq {seq} lies past the end of the log")
            )
            continue
        try:
            LiveState.decode(text, seq=seq)
        except CheckpointError as exc:
            if not exc.obsolete:  # an older format is replaced by the next checkpoint
                problems.append(Problem(seq, "checkpoint", str(exc)))
            continue
        state.apply_all(events[position:seq])
        position = seq
        if state.encode() != text:
            problems.append(
                Problem(
                    seq,
                    "checkpoint",
                    f"checkpoint at seq {seq} differs from the fold of the log (stale or "
                    "written outside todo_sessions); load passes over it",
                )
            )
    return problems


async def _chain_problems(
    store: SessionStore, session_id: str, against: Mapping[int, str] | None
) -> list[Problem]:
    """Where the hash chain breaks (`SessionStore.chain_break`), as a problem."""
    try:
        broken = await store.chain_break(session_id, against=against)
    except AcknowledgedEventsLostError:  # reported already, as ``lost``
        return []
    return [] if broken is None else [Problem(broken[0], "chain", broken[1])]


async def verify_session(
    store: SessionStore, session_id: str, *, against: Mapping[int, str] | None = None
) -> list[Problem]:
    """Every problem of one stored session (empty: healthy). The hash chain is recomputed
    with the store's ``chain_key`` (`SessionStore.chain_break`; ``against``: chain values
    kept elsewhere, by seq)."""
    events, unreadable = await _read_damaged(store, session_id)
    if any(p.kind == "lost" for p in unreadable):  # the events cannot be read; the chain can
        return unreadable + await _chain_problems(store, session_id, against)
    if any(p.seq is None and p.kind == "format" for p in unreadable):
        return unreadable
    past_end = await store.seqs_past_end(session_id)
    problems = list(unreadable)
    if past_end:
        shown = ", ".join(map(str, past_end[:10])) + (" …" if len(past_end) > 10 else "")
        problems.append(
            Problem(
                past_end[0],
                "past-end",
                f"{len(past_end)}{'+' if len(past_end) >= 100 else ''} row(s) lie past the "
                f"session's stored end (seq {shown}); they were written outside todo_sessions "
                "and block appends there",
            )
        )
    bad = {p.seq for p in unreadable if p.seq is not None}
    problems += verify_events(events, unreadable=bad)
    problems += await _chain_problems(store, session_id, against)
    if not problems:
        problems += await verify_checkpoints(store, session_id, events)
    if not errors_of(problems):  # derived data: a stale index is a warning (`reindex`)
        problems += [
            Problem(None, "search-index", text, warning=True)
            for text in await store.search_index_problems(session_id, events)
        ]
    if not errors_of(problems) and interrupted_turn_closers(events, session_id=session_id):
        # A valid log (it imports): a warning, as a crash or a writer at work leaves it
        problems.append(
            Problem(
                events[-1].seq,
                "interrupted",
                "the last turn is still open: the session was interrupted (or is being written "
                "right now); `load` (or resuming it) closes the turn",
                warning=True,
            )
        )
    return problems


async def verify_all(store: SessionStore) -> VerifyReport:
    """The database engine's own check, then `verify_session` for every session, in id order
    (found in the sessions table or in the event rows)."""
    report = VerifyReport()
    report.database = [Problem(None, "database", line) for line in await store.check_database()]
    if not store.read_only:  # FTS5's check is a write statement (it changes nothing)
        report.database += [
            Problem(None, "search-index", text, warning=True)
            for text in await store.search_index_problems()
        ]
    ids = [sid async for sid in store.session_ids()]
    known = set(ids)
    orphans = [sid async for sid in store.session_ids(source="events") if sid not in known]
    # A damaged SQLite file can hand back an id that is not text: report it, never crash.
    for session_id in sorted(known | set(orphans), key=lambda s: (type(s) is not str, str(s))):
        if not isinstance(session_id, str):
            report.sessions[str(session_id)] = [
                Problem(
                    None,
                    "corrupt",
                    f"a stored session id is not text ({session_id!r}): the database is damaged",
                )
            ]
            continue
        if session_id in orphans:
            report.sessions[session_id] = [
                Problem(
                    None,
                    "orphan",
                    "event rows exist for this id, but its session row is missing (or hidden "
                    "by a damaged index)",
                )
            ]
            continue
        try:
            report.sessions[session_id] = await verify_session(store, session_id)
        except SessionNotFoundError:  # listed, but the row cannot be found by its key
            report.sessions[session_id] = [
                Problem(None, "corrupt", "the session row is listed but cannot be read by id")
            ]
    return report
