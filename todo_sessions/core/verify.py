"""Integrity checks over a whole log, reporting every problem found (for ``verify``).

Unlike `check_structure`, which stops at the first violation, `verify_events` keeps going and
returns all problems: contiguous seqs, valid payloads, the turn/step rules of SPEC §5, the
surface rules of §4, and every tool call answered once its turn is closed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InvalidEventError, StructureError
from .catalog import validate_event
from .envelope import SessionEvent
from .structure import StructureChecker
from .surface import SurfaceState

__all__ = ["Problem", "verify_events"]


@dataclass(frozen=True, slots=True)
class Problem:
    seq: int | None
    kind: str
    """``seq``, ``payload``, ``structure``, ``surface``, ``unanswered`` or ``read``."""
    message: str

    def __str__(self) -> str:
        where = f"seq {self.seq}: " if self.seq is not None else ""
        return f"{where}[{self.kind}] {self.message}"


def verify_events(events: Sequence[SessionEvent]) -> list[Problem]:
    """Every problem in ``events`` (empty list: the log is healthy)."""
    problems: list[Problem] = []
    checker = StructureChecker()
    surface = SurfaceState(build_messages=True)
    structure_ok = True
    for index, event in enumerate(events):
        if event.seq != index:
            problems.append(Problem(event.seq, "seq", f"expected seq {index}"))
        try:
            validate_event(event)
        except InvalidEventError as exc:
            problems.append(Problem(event.seq, "payload", str(exc)))
            checker.advance(event)
            continue
        if event.type == "turn/end" and checker.open_turn is not None:
            for call in checker.unanswered_calls():
                problems.append(
                    Problem(
                        event.seq,
                        "unanswered",
                        f"turn {checker.open_turn} closed with tool call {call.call_id!r} "
                        "unanswered",
                    )
                )
        if structure_ok:
            try:
                checker.check(event)
            except StructureError as exc:
                problems.append(Problem(event.seq, "structure", str(exc)))
                structure_ok = False  # later structure errors would only be echoes of this one
        checker.advance(event)
        try:
            surface.apply(event)
        except InvalidEventError as exc:
            problems.append(Problem(event.seq, "surface", str(exc)))
    return problems
