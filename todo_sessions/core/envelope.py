"""The event envelope: `SessionEvent`, surface ops, wire JSON in and out.

See docs/format.md, "Events and the envelope".

A `SessionEvent` is immutable. Its payload is copied at the boundary and kept as canonical JSON
text, which is what the store writes and what `SessionEvent.to_json` emits, so a round trip
through the log is byte-exact. ``event.data`` is a deep frozen view of that payload.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import orjson

from ..errors import InvalidEventError
from .jsonvalue import (
    LosslessJSONError,
    canonical_fast,
    canonical_parsed,
    decode_json,
    freeze,
    lossless_copy,
    thaw,
)
from .registry import EVENT_TYPES

__all__ = [
    "MAX_INT",
    "SessionEvent",
    "SurfaceOp",
    "SurfaceReplace",
    "parse_surface_op",
]

MAX_INT = 2**53 - 1
"""The largest seq, and the largest magnitude of a time or of a header's integers: the integers
a JSON number carries exactly to a JavaScript reader (``Number.MAX_SAFE_INTEGER``), which both
backends store (docs/format.md, "Events and the envelope"). Payload data is not limited."""

_WIRE_KEYS = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"})


@dataclass(frozen=True, slots=True)
class SurfaceReplace:
    """``{"op": "replace", "start": a, "end": b}``: replace surface nodes a..b by this event."""

    start: int
    end: int

    def to_wire(self) -> dict[str, Any]:
        return {"op": "replace", "start": self.start, "end": self.end}


SurfaceOp = Literal["append"] | SurfaceReplace


def _is_int(value: Any) -> bool:
    return type(value) is int


def _fail(message: str, *, event_type: Any, seq: Any, field: str | None = None) -> NoReturn:
    kind = event_type if isinstance(event_type, str) else None
    number = seq if _is_int(seq) else None
    raise InvalidEventError(message, event_type=kind, seq=number, field=field)


def _label(event_type: Any, seq: Any) -> str:
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
    _fail(
        f'{_label(event_type, seq)}: surfaceOp must be "append" or '
        f'{{"op": "replace", "start": int, "end": int}}, got {brief_repr(value)}',
        event_type=event_type,
        seq=seq,
        field="surfaceOp",
    )


def _null_surface_field(event_type: Any, seq: Any, key: str) -> NoReturn:
    """Refuse ``"surfaceOp": null`` or ``"sourceEventSeqs": null``: a key that is present is
    checked as present (docs/format.md, "Surface rules")."""
    entry = EVENT_TYPES.get(event_type) if isinstance(event_type, str) else None
    if entry is not None and not entry.surface:
        problem = f"may not carry {key} (not even null): only surface events do"
    else:
        problem = f"carries an invalid {key}: null (leave the key out instead)"
    _fail(f"{_label(event_type, seq)} {problem}", event_type=event_type, seq=seq, field=key)


def _surface_op_wire(op: SurfaceOp | None) -> Any:
    return op.to_wire() if isinstance(op, SurfaceReplace) else op


_set = object.__setattr__
_type_of = type
_INT_ONLY = frozenset({int})


class _Parsed:
    """Marks a payload that our strict JSON parser just produced (nobody else holds it)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class SessionEvent:
    """One record of a session log.

    ``SessionEvent(type, seq, time, data, *, surface_op=None, source_event_seqs=None,
    ignorable=False)`` checks the envelope and that ``data`` is lossless JSON, and copies it.
    Payload rules of the event catalog are checked by `validate_event` (the store and live
    sessions call it on every append).
    """

    __slots__ = (
        "_checked",
        "_data",
        "_data_json",
        "_frozen",
        "ignorable",
        "seq",
        "source_event_seqs",
        "surface_op",
        "time",
        "type",
    )

    type: str
    seq: int
    time: int
    surface_op: SurfaceOp | None
    source_event_seqs: tuple[int, ...] | None
    ignorable: bool
    _data: Any
    _data_json: str
    _frozen: Any
    _checked: Any
    """The catalog entry `validate_event` accepted this event against (unset until then)."""

    def __init__(
        self,
        type: str,
        seq: int,
        time: int,
        data: Any,
        *,
        surface_op: SurfaceOp | Mapping[str, Any] | None = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> None:
        # Every check is written for the common case first: this runs on every append.
        if not isinstance(type, str) or not 1 <= len(type) <= 200 or not type.isprintable():
            _fail(
                f"event type must be a printable string of 1-200 characters, got {type!r}",
                event_type=None,
                seq=seq,
                field="type",
            )
        if _type_of(seq) is not int or not 0 <= seq <= MAX_INT:
            _fail(
                f"{_label(type, seq)}: seq must be a non-negative integer, got {seq!r}",
                event_type=type,
                seq=None,
                field="seq",
            )
        if _type_of(time) is not int or not -MAX_INT <= time <= MAX_INT:
            _fail(
                f"{_label(type, seq)}: time must be an integer (Unix epoch ms), got {time!r}",
                event_type=type,
                seq=seq,
                field="time",
            )
        if surface_op is None or _type_of(surface_op) is SurfaceReplace:
            op: SurfaceOp | None = surface_op
        else:
            op = parse_surface_op(surface_op, event_type=type, seq=seq)
        seqs: tuple[int, ...] | None = None
        if source_event_seqs is not None:
            if _type_of(source_event_seqs) is not list and (
                isinstance(source_event_seqs, str | bytes | Mapping)
                or not isinstance(source_event_seqs, Sequence)
            ):
                _fail(
                    f"{_label(type, seq)}: sourceEventSeqs must be a list of integers",
                    event_type=type,
                    seq=seq,
                    field="sourceEventSeqs",
                )
            seqs = tuple(source_event_seqs)
            if seqs and (
                not set(map(_type_of, seqs)) <= _INT_ONLY or min(seqs) < 0 or max(seqs) > MAX_INT
            ):
                _fail(
                    f"{_label(type, seq)}: sourceEventSeqs must hold non-negative integers, "
                    f"got {brief_repr(list(seqs))}",
                    event_type=type,
                    seq=seq,
                    field="sourceEventSeqs",
                )
        if ignorable is not False and ignorable is not True:
            _fail(
                f"{_label(type, seq)}: ignorable must be true when present, got {ignorable!r}",
                event_type=type,
                seq=seq,
                field="ignorable",
            )
        try:
            if data.__class__ is _Parsed:  # fresh from our own JSON parser: no copy
                copy, text = data.value, canonical_parsed(data.value)
            else:
                copy, text = lossless_copy(data)
        except LosslessJSONError as exc:
            _fail(
                f"{_label(type, seq)}: data is not losslessly JSON-serializable: {exc.reason}",
                event_type=type,
                seq=seq,
                field="data",
            )
        _set_type(self, type)
        _set_seq(self, seq)
        _set_time(self, time)
        _set_surface_op(self, op)
        _set_source_event_seqs(self, seqs)
        _set_ignorable(self, ignorable)
        _set_data(self, copy)
        _set_data_json(self, text)
        _set_frozen(self, None)

    @classmethod
    def _trusted(
        cls,
        type: str,
        seq: int,
        time: int,
        data: Any,
        data_json: str,
        surface_op: SurfaceOp | None,
        source_event_seqs: tuple[int, ...] | None,
        ignorable: bool,
    ) -> SessionEvent:
        """Build without checks from parts that are already validated (store rows, repairs).

        This is the per-row cost of every read, so it sets the slots through their
        descriptors directly (about half the cost of ``object.__setattr__``).
        """
        event = _new(cls)
        _set_type(event, type)
        _set_seq(event, seq)
        _set_time(event, time)
        _set_surface_op(event, surface_op)
        _set_source_event_seqs(event, source_event_seqs)
        _set_ignorable(event, ignorable)
        _set_data(event, data)
        _set_data_json(event, data_json)
        return event

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"SessionEvent is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"SessionEvent is immutable (cannot delete {name!r})")

    # -- payload --------------------------------------------------------------------------------

    @property
    def data(self) -> Any:
        """The payload as a deep read-only view (dicts and lists refuse mutation)."""
        try:
            frozen = self._frozen
        except AttributeError:  # events built by `_trusted` leave it unset
            frozen = None
        if frozen is None:
            frozen = freeze(self._data)
            _set(self, "_frozen", frozen)
        return frozen

    @property
    def data_json(self) -> str:
        """The payload's JSON text, exactly as stored."""
        return self._data_json

    def data_copy(self) -> Any:
        """A fresh mutable deep copy of the payload."""
        return thaw(self._data)

    def replace(self, **changes: Any) -> SessionEvent:
        """A new event with some envelope fields changed (validated like a new event)."""
        fields: dict[str, Any] = {
            "type": self.type,
            "seq": self.seq,
            "time": self.time,
            "data": self._data,
            "surface_op": self.surface_op,
            "source_event_seqs": self.source_event_seqs,
            "ignorable": self.ignorable,
        }
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"unknown SessionEvent fields: {sorted(unknown)}")
        fields.update(changes)
        return SessionEvent(**fields)

    # -- wire JSON ------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The wire JSON object as a fresh mutable dict (camelCase keys)."""
        wire: dict[str, Any] = {
            "type": self.type,
            "seq": self.seq,
            "time": self.time,
            "data": thaw(self._data),
        }
        if self.surface_op is not None:
            wire["surfaceOp"] = _surface_op_wire(self.surface_op)
        if self.source_event_seqs is not None:
            wire["sourceEventSeqs"] = list(self.source_event_seqs)
        if self.ignorable:
            wire["ignorable"] = True
        return wire

    def to_json(self) -> str:
        """Compact wire JSON; ``from_json(e.to_json()) == e`` and re-encoding is byte-identical."""
        parts = [
            '{"type":',
            _encode_str(self.type),
            f',"seq":{self.seq},"time":{self.time},"data":',
            self._data_json,
        ]
        op = self.surface_op
        if op is not None:
            parts.append(
                ',"surfaceOp":"append"'
                if op == "append"
                else f',"surfaceOp":{{"op":"replace","start":{op.start},"end":{op.end}}}'
            )
        if self.source_event_seqs is not None:
            parts.append(f',"sourceEventSeqs":[{",".join(map(str, self.source_event_seqs))}]')
        if self.ignorable:
            parts.append(',"ignorable":true')
        parts.append("}")
        return "".join(parts)

    @classmethod
    def from_dict(cls, wire: Mapping[str, Any]) -> SessionEvent:
        """Build from a wire JSON object; raises `InvalidEventError` naming what is wrong."""
        return cls._from_wire(wire, parsed=False)

    @classmethod
    def _from_wire(cls, wire: Mapping[str, Any], *, parsed: bool) -> SessionEvent:
        if not isinstance(wire, Mapping):
            raise InvalidEventError(f"an event must be a JSON object, got {type(wire).__name__}")
        event_type, seq = wire.get("type"), wire.get("seq")
        extra = set(wire) - _WIRE_KEYS
        if extra:
            _fail(
                f"{_label(event_type, seq)}: unknown top-level keys {sorted(map(str, extra))}",
                event_type=event_type,
                seq=seq,
                field=str(sorted(map(str, extra))[0]),
            )
        for key in ("type", "seq", "time", "data"):
            if key not in wire:
                _fail(
                    f"{_label(event_type, seq)}: missing required key {key!r}",
                    event_type=event_type,
                    seq=seq,
                    field=key,
                )
        ignorable = wire.get("ignorable", False)
        if "ignorable" in wire and ignorable is not True:
            _fail(
                f"{_label(event_type, seq)}: ignorable must be true when present, "
                f"got {ignorable!r}",
                event_type=event_type,
                seq=seq,
                field="ignorable",
            )
        for key in ("surfaceOp", "sourceEventSeqs"):
            if key in wire and wire[key] is None:  # absent is not the same as null
                _null_surface_field(event_type, seq, key)
        data = wire["data"]
        return cls(
            wire["type"],
            wire["seq"],
            wire["time"],
            _Parsed(data) if parsed else data,
            surface_op=wire.get("surfaceOp"),
            source_event_seqs=wire.get("sourceEventSeqs"),
            ignorable=ignorable,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> SessionEvent:
        """Parse one wire JSON event; raises `InvalidEventError`, never a raw parser error."""
        fast = _from_canonical_json(text, plain=True)
        if fast is not None:
            return fast
        try:
            wire = decode_json(text)
        except LosslessJSONError as exc:
            raise InvalidEventError(f"event is not valid lossless JSON: {exc.reason}") from None
        return cls._from_wire(wire, parsed=True)

    # -- value semantics ------------------------------------------------------------------------

    def _key(self) -> tuple[Any, ...]:
        return (
            self.type,
            self.seq,
            self.time,
            self._data_json,
            self.surface_op,
            self.source_event_seqs,
            self.ignorable,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SessionEvent):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        extras = ""
        if self.surface_op is not None:
            extras += f", surface_op={self.surface_op!r}"
        if self.source_event_seqs is not None:
            extras += f", source_event_seqs={list(self.source_event_seqs)!r}"
        if self.ignorable:
            extras += ", ignorable=True"
        data = self._data_json if len(self._data_json) <= 80 else self._data_json[:77] + "..."
        return f"SessionEvent({self.type!r}, seq={self.seq}, time={self.time}, data={data}{extras})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (SessionEvent.from_json, (self.to_json(),))


_new = object.__new__
_slot = SessionEvent.__dict__
_set_type = _slot["type"].__set__
_set_seq = _slot["seq"].__set__
_set_time = _slot["time"].__set__
_set_surface_op = _slot["surface_op"].__set__
_set_source_event_seqs = _slot["source_event_seqs"].__set__
_set_ignorable = _slot["ignorable"].__set__
_set_data = _slot["_data"].__set__
_set_data_json = _slot["_data_json"].__set__
_set_frozen = _slot["_frozen"].__set__
_mark_checked = _slot["_checked"].__set__
"""For `validate_event` only: remember the catalog entry an event passed (the events are
immutable and entries never change, so the check need not run twice)."""


_encode_str = json.encoder.encode_basestring  # the C string encoder, as ensure_ascii=False uses


def _from_canonical_json(text: str | bytes, *, plain: bool = False) -> SessionEvent | None:
    """The fast path of `SessionEvent.from_json` for lines in our own canonical form (and, with
    ``plain``, for other producers' plain JSON text: see `_read_as_written`).

    It parses with orjson (which refuses NaN, Infinity, 1e999 and lone surrogates, but keeps the
    last of duplicate keys and turns ints past 64 bits into floats) and accepts the result only
    if re-encoding the event gives back exactly the input: that rules out duplicate keys,
    changed numbers, escapes we would not write, and every other difference. Anything else
    returns None, and the strict path (the stdlib parser, which names what is wrong) takes over.
    """
    if not isinstance(text, str):
        return None
    try:
        wire = _loads(text)
    except (ValueError, RecursionError):
        return None
    if type(wire) is not dict or not wire.keys() <= _WIRE_KEYS:
        return None
    event_type, seq, time, data = (
        wire.get("type"),
        wire.get("seq"),
        wire.get("time"),
        wire.get("data", _MISSING),
    )
    if (
        type(event_type) is not str
        or type(seq) is not int
        or type(time) is not int
        or data is _MISSING
        or not event_type.isprintable()
        or not 1 <= len(event_type) <= 200
        or not 0 <= seq <= MAX_INT
        or not -MAX_INT <= time <= MAX_INT
        or wire.get("ignorable", True) is not True
    ):
        return None
    if ("surfaceOp" in wire and wire["surfaceOp"] is None) or (
        "sourceEventSeqs" in wire and wire["sourceEventSeqs"] is None
    ):
        return None  # a null marker is refused, and the strict path says why
    op = wire.get("surfaceOp")
    if op is not None and op != "append":
        if type(op) is not dict:
            return None
        try:
            op = parse_surface_op(op)
        except InvalidEventError:
            return None
    seqs = wire.get("sourceEventSeqs")
    if seqs is not None:
        if type(seqs) is not list or not all(type(n) is int and 0 <= n <= MAX_INT for n in seqs):
            return None
        seqs = tuple(seqs)
    data_json = canonical_fast(data)
    if data_json is None:
        return None
    event = SessionEvent._trusted(
        event_type, seq, time, data, data_json, op, seqs, "ignorable" in wire
    )
    # Our lines start so (`to_json`); other text is first read as plain JSON, not re-encoded.
    spaced = plain and not text.startswith('{"type":"')
    if spaced and _read_as_written(text, wire):
        return event
    if event.to_json() == text.rstrip("\r\n"):
        return event
    return event if plain and not spaced and _read_as_written(text, wire) else None


def _read_as_written(text: str, wire: dict[str, Any]) -> bool:
    r"""Whether orjson read ``text`` (any spacing, key order, escapes, number forms) as the
    strict parser does. They differ in two ways only: orjson keeps the last of duplicate keys
    and makes integers past 64 bits floats. Everything else the strict path refuses, orjson
    refuses too (NaN, Infinity, 1e999, lone surrogates, control characters, bad syntax) or
    `canonical_fast` declines (-0.0, deep nesting), and the strict path then names it.

    Duplicate keys: outside strings, every key ends with a quote and then its colon; inside
    a string a quote is always escaped (``\"``). So when no string has an escaped backslash
    before a quote (no ``\\"`` in the text) and no key has space before its colon, the count
    of ``":`` less the count of ``\":`` is the number of keys written (plus strings that
    start with a colon, which only make it larger): equal to the number of keys read means
    none was repeated. Anything else returns False (the strict path reads it): a slower
    reading, never a different one.
    """
    if _ESCAPED_BACKSLASH_QUOTE in text:
        return False
    if ('" ' in text or '"\t' in text or '"\n' in text or '"\r' in text) and _SPACED_COLON.search(
        text
    ):
        return False
    # -1 (a float past 2**63) never equals the count, which is at least 0: every \": holds a ":
    return _keys_read(wire) == text.count('":') - text.count(_ESCAPED_QUOTE_COLON)


def _keys_read(value: Any) -> int:
    """How many object keys ``value`` holds at every depth; -1 if it holds a float past 2**63
    in size (orjson's reading of an integer past 64 bits, or a float: either way the strict
    path decides)."""
    count = len(value) if type(value) is dict else 0
    item: Any
    for item in value.values() if type(value) is dict else value:
        kind = type(item)
        if kind is dict or kind is list:
            inner = _keys_read(item)
            if inner < 0:
                return -1
            count += inner
        elif kind is float and not -_BIG_FLOAT < item < _BIG_FLOAT:
            return -1
    return count


_ESCAPED_BACKSLASH_QUOTE = '\\\\"'  # \\" : a backslash, escaped, then a quote
_ESCAPED_QUOTE_COLON = '\\":'  # \": an escaped quote inside a string, then a colon
_SPACED_COLON = re.compile(r'"[ \t\r\n]+:')
_BIG_FLOAT = 2.0**63
_MISSING = object()
_loads = orjson.loads
