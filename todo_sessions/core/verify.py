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

__all__ = ["Problem", "errors_of", "verify_events"]


@dataclass(frozen=True, slots=True)
class Problem:
    seq: int | None
    kind: str
    """``seq``, ``payload``, ``structure``, ``surface``, ``unanswered``; from the store
    (`todo_sessions.integrity`) also ``corrupt`` (a row that cannot be decoded, a missing seq,
    an invalid stored todo list), ``format`` (an unknown, non-ignorable event type),
    ``past-end`` (rows past the stored end), ``interrupted`` (the last turn is open),
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
    checker = StructureChecker()
    surface = SurfaceState(build_messages=True)
    structure_ok = True
    trusted = True
    expected = 0
    for event in events:
        if event.seq < expected:  # a repeated seq: report it, fold only the first copy
            problems.append(Problem(event.seq, "seq", f"expected seq {expected}"))
            continue
        if event.seq != expected:
            missing = range(expected, event.seq)
            if missing and all(seq in unreadable for seq in missing):
                trusted = False
            else:
                problems.append(Problem(event.seq, "seq", f"expected seq {expected}"))
            checker.next_seq = event.seq  # resync: report the gap once, not at every event
        expected = event.seq + 1
        try:
            validate_event(event)
        except InvalidEventError as exc:
            problems.append(Problem(event.seq, "payload", str(exc)))
            checker.advance(event)
            continue
        if trusted and event.type == "turn/end" and checker.open_turn is not None:
            for call in checker.unanswered_calls():
                problems.append(
                    Problem(
                        event.seq,
                        "unanswered",
                        f"turn {checker.open_turn} closed with tool call {call.call_id!r} "
                        "unanswered",
                    )
                )
        if structure_ok and trusted:
            try:
                checker.check(event)
            except StructureError as exc:
                problems.append(Problem(event.seq, "structure", str(exc)))
                structure_ok = False  # later structure errors would only be echoes of this one
        checker.advance(event)
        # A replace other than a result rewrite (which keeps its call id) may cut a tool call
        # from its result (docs/format.md, "Compaction").
        cut = (
            replacement_cut(surface, event)
            if isinstance(event.surface_op, SurfaceReplace) and event.type != "tool/result"
            else None
        )
        try:
            surface.apply(event)
        except InvalidEventError as exc:
            problems.append(Problem(event.seq, "surface", str(exc)))
        else:
            if cut is not None:
                message = f"surface replace {_span(event)}: {cut}"
                problems.append(Problem(event.seq, "surface", message, warning=True))
    return problems


def errors_of(problems: Iterable[Problem]) -> list[Problem]:
    """The problems that make a log unhealthy: all but the warnings."""
    return [problem for problem in problems if not problem.warning]


def _span(event: SessionEvent) -> str:
    op = event.surface_op
    assert isinstance(op, SurfaceReplace)
    return f"{op.start}..{op.end}"
