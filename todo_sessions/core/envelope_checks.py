"""The envelope's field checks: what `SessionEvent` refuses, and the error it raises.

See docs/format.md, "Events and the envelope". `SessionEvent` (`todo_sessions.core.envelope`)
runs the cheap test of each field inline; on a failure, or for the fields that need more than
a type test (a surface op, the source seqs), it calls these, which name the event type, seq
and field of what is wrong (`InvalidEventError`).
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from ..errors import InvalidEventError
from .registry import EVENT_TYPES

__all__ = [
    "MAX_INT",
    "SurfaceOp",
    "SurfaceReplace",
    "brief_repr",
    "check_source_seqs",
    "fail",
    "label",
    "null_surface_field",
    "parse_surface_op",
    "refuse_envelope",
    "refuse_ignorable",
]

MAX_INT = 2**53 - 1
"""The largest seq, and the largest magnitude of a time or of a header's integers: the integers
a JSON number carries exactly to a JavaScript reader (``Number.MAX_SAFE_INTEGER``), which both
backends store (docs/format.md, "Events and the envelope"). Payload data is not limited."""


@dataclass(frozen=True, slots=True)
class SurfaceReplace:
    """``{"op": "replace", "start": a, "end": b}``: replace surface nodes a..b by this event."""

    start: int
    end: int

    def to_wire(self) -> dict[str, Any]:
        return {"op": "replace", "start": self.start, "end": self.end}


SurfaceOp = Literal["append"] | SurfaceReplace

_type_of = type
_INT_ONLY = frozenset({int})


def _is_int(value: Any) -> bool:
    return type(value) is int


def fail(message: str, *, event_type: Any, seq: Any, field: str | None = None) -> NoReturn:
    """Raise `InvalidEventError`, naming the type and seq only when they are valid ones."""
    kind = event_type if isinstance(event_type, str) else None
    number = seq if _is_int(seq) else None
    raise InvalidEventError(message, event_type=kind, seq=number, field=field)


def label(event_type: Any, seq: Any) -> str:
    """``event 'type' (seq n)`` for a message, whatever the two values are."""
    kind = repr(event_type) if isinstance(event_type, str) else "<invalid type>"
    return f"event {kind} (seq {seq if _is_int(seq) else '?'})"


_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxstring, _BRIEF.maxother = 3, 80, 80
_BRIEF.maxlist = _BRIEF.maxdict = _BRIEF.maxtuple = 8


def _large(value: Any, depth: int = 32, nodes: int = 10_000) -> bool:
    """Whether ``value`` nests deeper than ``depth`` or holds more than ``nodes`` values
    (walked without recursion, stopping as soon as it knows)."""
    stack = [(value, 0)]
    seen = 0
    while stack:
        item, level = stack.pop()
        seen += 1
        if level > depth or seen > nodes:
            return True
        if isinstance(item, Mapping):
            stack.extend((child, level + 1) for child in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((child, level + 1) for child in item)
    return False


def brief_repr(value: Any) -> str:
    """``repr(value)`` for an error message; for a value nested deep or holding very many
    values, a short one, a few levels and items deep (`reprlib`), so a value nested past the
    recursion limit is never walked whole (no `RecursionError`)."""
    return _BRIEF.repr(value) if _large(value) else repr(value)


def refuse_envelope(event_type: Any, seq: Any, time: Any) -> NoReturn:
    """Raise for the first of type, seq and time that is not valid (the caller found one)."""
    if not (
        isinstance(event_type, str) and 1 <= len(event_type) <= 200 and event_type.isprintable()
    ):
        fail(
            f"event type must be a printable string of 1-200 characters, got {event_type!r}",
            event_type=None,
            seq=seq,
            field="type",
        )
    if _type_of(seq) is not int or not 0 <= seq <= MAX_INT:
        fail(
            f"{label(event_type, seq)}: seq must be a non-negative integer, got {seq!r}",
            event_type=event_type,
            seq=None,
            field="seq",
        )
    fail(
        f"{label(event_type, seq)}: time must be an integer (Unix epoch ms), got {time!r}",
        event_type=event_type,
        seq=seq,
        field="time",
    )


def refuse_ignorable(event_type: Any, seq: Any, ignorable: Any) -> NoReturn:
    """Raise for an ``ignorable`` that is neither true nor false."""
    fail(
        f"{label(event_type, seq)}: ignorable must be true when present, got {ignorable!r}",
        event_type=event_type,
        seq=seq,
        field="ignorable",
    )


def check_source_seqs(event_type: str, seq: int, value: Any) -> tuple[int, ...]:
    """``sourceEventSeqs`` as a tuple, after checking it is a list of seqs."""
    if _type_of(value) is not list and (
        isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence)
    ):
        fail(
            f"{label(event_type, seq)}: sourceEventSeqs must be a list of integers",
            event_type=event_type,
            seq=seq,
            field="sourceEventSeqs",
        )
    seqs = tuple(value)
    if seqs and (not set(map(_type_of, seqs)) <= _INT_ONLY or min(seqs) < 0 or max(seqs) > MAX_INT):
        fail(
            f"{label(event_type, seq)}: sourceEventSeqs must hold non-negative integers, "
            f"got {brief_repr(list(seqs))}",
            event_type=event_type,
            seq=seq,
            field="sourceEventSeqs",
        )
    return seqs


def parse_surface_op(value: Any, *, event_type: Any = None, seq: Any = None) -> SurfaceOp | None:
    """Accept ``None``, ``"append"``, a `SurfaceReplace` or its wire dict."""
    if value is None or value == "append" or isinstance(value, SurfaceReplace):
        return value
    if isinstance(value, Mapping) and (
        set(value) == {"op", "start", "end"}
        and value["op"] == "replace"
        and _is_int(value["start"])
        and _is_int(value["end"])
        and 0 <= value["start"] <= MAX_INT
        and 0 <= value["end"] <= MAX_INT
    ):
        return SurfaceReplace(value["start"], value["end"])
    fail(
        f'{label(event_type, seq)}: surfaceOp must be "append" or '
        f'{{"op": "replace", "start": int, "end": int}}, got {brief_repr(value)}',
        event_type=event_type,
        seq=seq,
        field="surfaceOp",
    )


def null_surface_field(event_type: Any, seq: Any, key: str) -> NoReturn:
    """Refuse ``"surfaceOp": null`` or ``"sourceEventSeqs": null``: a key that is present is
    checked as present (docs/format.md, "Surface rules")."""
    entry = EVENT_TYPES.get(event_type) if isinstance(event_type, str) else None
    if entry is not None and not entry.surface:
        problem = f"may not carry {key} (not even null): only surface events do"
    else:
        problem = f"carries an invalid {key}: null (leave the key out instead)"
    fail(f"{label(event_type, seq)} {problem}", event_type=event_type, seq=seq, field=key)
