"""Integrity checks over a whole log, reporting every problem found (for ``verify``).

Unlike `check_structure`, which stops at the first violation, `verify_events` keeps going and
returns all problems: contiguous seqs, valid payloads, the turn/step rules and the
surface rules of docs/format.md, every tool call answered once its turn is closed, and no
replace (a compaction) cutting a tool call from its result.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from ..errors import InvalidEventError, StructureError
from .catalog import validate_event
from .compaction import replacement_cut
from .envelope import SessionEvent, SurfaceReplace
from .structure import StructureChecker
from .surface import SurfaceState
from .types import TOOL_RESULT, TURN_END

__all__ = ["LogChecker", "Problem", "errors_of", "verify_events"]


@dataclass(frozen=True, slots=True)
class Problem:
    seq: int | None
    kind: str
    """``seq``, ``payload``, ``structure``, ``surface``, ``unanswered``; from the store
    (`todo_sessions._integrity`) also ``corrupt`` (a row that cannot be decoded, a missing seq,
    an invalid stored todo list), ``format`` (an unknown, non-ignorable event type),
    ``past-end`` (rows past the stored end), ``interrupted`` (a warning: the last turn is open),
    ``orphan`` (events without a session row), ``lost`` (events the store acknowledged that
    the database no longer has: `AcknowledgedEventsLostError`), ``database`` (the database's
    own check), ``chain`` (the hash chain breaks there: `SessionStore.chain_break`) and
    ``search-index`` (a warning: the search index does not match the log; ``reindex``)."""
    message: str
    warning: bool = False
    """A warning, not an error: the log is valid (it imports, and `VerifyReport.ok` holds), but
    something built from it may be refused elsewhere (a surface replace that cuts a tool call
    from its result: a provider refuses the request its history makes)."""

    def __str__(self) -> str:
        where = f"seq {self.seq}: " if self.seq is not None else ""
        label = f"{self.kind}, warning" if self.warning else self.kind
        return f"{where}[{label}] {self.message}"


class LogChecker:
    """The rules a whole log must meet, checked one event at a time: what `verify_events`
    reports (every problem) and what the JSONL import refuses (at the first error, `errors_of`),
    so that ``import`` and ``verify`` accept exactly the same logs.

    `check` returns the problems of the next event and folds it. Its payload (unless
    ``validated``: the caller ran `validate_event`), the turn/step rules (`StructureChecker`),
    every tool call of a turn answered when it closes, the surface rules (`SurfaceState`,
    messages built), and a warning for a surface replace that cuts a tool call from its result.
    After a structure error, later structure verdicts would only echo it: they are not made.
    """

    __slots__ = ("structure", "structure_ok", "surface", "trusted")

    def __init__(self) -> None:
        self.structure = StructureChecker()
        self.surface = SurfaceState(build_messages=True)
        self.structure_ok = True
        self.trusted = True
        """False once events are missing (unreadable rows): the structure and answered-call
        verdicts stop there."""

    def check(self, event: SessionEvent, *, validated: bool = False) -> list[Problem]:
        """The problems of ``event`` appended next (empty: none), which is then folded."""
        if not validated:
            try:
                validate_event(event)
            except InvalidEventError as exc:
                self.structure.advance(event)
                return [Problem(event.seq, "payload", str(exc))]
        problems = self._structure_problems(event) if self.trusted else []
        self.structure.advance(event)
        # A replace other than a result rewrite (which keeps its call id) may cut a tool call
        # from its result (docs/format.md, "Compaction").
        cut = (
            replacement_cut(self.surface, event)
            if isinstance(event.surface_op, SurfaceReplace) and event.type != TOOL_RESULT
            else None
        )
        try:
            self.surface.apply(event)
        except InvalidEventError as exc:
            problems.append(Problem(event.seq, "surface", str(exc)))
        else:
            if cut is not None:
                message = f"surface replace {_span(event)}: {cut}"
                problems.append(Problem(event.seq, "surface", message, warning=True))
        return problems

    def _structure_problems(self, event: SessionEvent) -> list[Problem]:
        checker = self.structure
        problems = []
        if event.type == TURN_END and checker.open_turn is not None:
            for call in checker.unanswered_calls():
                message = (
                    f"turn {checker.open_turn} closed with tool call {call.call_id!r} unanswered"
                )
                problems.append(Problem(event.seq, "unanswered", message))
        if self.structure_ok:
            try:
                checker.check(event)
            except StructureError as exc:
                problems.append(Problem(event.seq, "structure", str(exc)))
                self.structure_ok = False
        return problems


def verify_events(
    events: Sequence[SessionEvent], *, unreadable: Collection[int] = ()
) -> list[Problem]:
    """Every problem in ``events`` (none but warnings: the log is healthy, see `errors_of`).

    ``unreadable``: seqs whose rows could not be read at all (already reported by the caller).
    Their absence is not reported again as a seq gap, and the structure and unanswered-call
    checks stop there: without those events every later verdict would be a guess. Payload and
    surface checks go on to the end.
    """
    problems: list[Problem] = []
    log = LogChecker()
    expected = 0
    for event in events:
        if event.seq < expected:  # a repeated seq: report it, fold only the first copy
            problems.append(Problem(event.seq, "seq", f"expected seq {expected}"))
            continue
        if event.seq != expected:
            missing = range(expected, event.seq)
            if missing and all(seq in unreadable for seq in missing):
                log.trusted = False
            else:
                problems.append(Problem(event.seq, "seq", f"expected seq {expected}"))
            log.structure.next_seq = event.seq  # resync: report the gap once, not at every event
        expected = event.seq + 1
        problems += log.check(event)
    return problems


def errors_of(problems: Iterable[Problem]) -> list[Problem]:
    """The problems that make a log unhealthy: all but the warnings."""
    return [problem for problem in problems if not problem.warning]


def _span(event: SessionEvent) -> str:
    op = event.surface_op
    assert isinstance(op, SurfaceReplace)
    return f"{op.start}..{op.end}"
