"""Integrity checks of stored sessions (``todo-sessions verify``).

`verify_session` reads a session and reports every problem: rows the store refuses to decode
(reading on past each one, so one bad row does not hide the rest), then the checks of
`todo_sessions.core.verify.verify_events` on what could be read. It changes nothing.
"""

from __future__ import annotations

from contextlib import aclosing

from .core.envelope import SessionEvent
from .core.verify import Problem, verify_events
from .errors import CorruptSessionError, FormatUnsupportedError
from .store.store import SessionStore

__all__ = ["verify_all", "verify_session"]


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


async def verify_session(store: SessionStore, session_id: str) -> list[Problem]:
    """Every problem of one stored session (empty: healthy)."""
    events, unreadable = await _read_damaged(store, session_id)
    bad = {p.seq for p in unreadable if p.seq is not None}
    return unreadable + verify_events(events, unreadable=bad)


async def verify_all(store: SessionStore, *, page_size: int = 500) -> dict[str, list[Problem]]:
    """`verify_session` for every session, newest first."""
    report: dict[str, list[Problem]] = {}
    before = None
    while page := await store.list(limit=page_size, before=before):
        for summary in page:
            report[summary.id] = await verify_session(store, summary.id)
        before = page[-1]
    return report
