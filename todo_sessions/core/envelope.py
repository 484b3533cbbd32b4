"""The event envelope: `SessionEvent`, surface ops, wire JSON in and out.

See docs/format.md, "Events and the envelope".

A `SessionEvent` is immutable. Its payload is copied at the boundary and kept as canonical JSON
text, which is what the store writes and what `SessionEvent.to_json` emits, so a round trip
through the log is byte-exact. ``event.data`` is a deep frozen view of that payload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import orjson

from ..errors import InvalidEventError
from .envelope_checks import (
    MAX_INT,
    SurfaceOp,
    SurfaceReplace,
    brief_repr,
    check_source_seqs,
    fail,
    label,
    null_surface_field,
    parse_surface_op,
    refuse_envelope,
    refuse_ignorable,
)
from .jsontext import read_as_written
from .jsonvalue import (
    LosslessJSONError,
    canonical_fast,
    canonical_parsed,
    decode_json,
    freeze,
    lossless_copy,
    thaw,
)

__all__ = [
    "MAX_INT",
    "SessionEvent",
    "SurfaceOp",
    "SurfaceReplace",
    "brief_repr",
    "parse_surface_op",
]

_WIRE_KEYS = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"})


def _surface_op_wire(op: SurfaceOp | None) -> Any:
    return op.to_wire() if isinstance(op, SurfaceReplace) else op


_set = object.__setattr__
_type_of = type


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
        "_data_json",
        "_frozen",
        "ignorable",
        "payload",
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
    payload: Any
    """The payload as decoded, for reading at no cost: plain dicts and lists, shared with the
    event (and with everyone who reads it), so they must not be changed. `data` is a view that
    refuses changes, `data_copy` a copy to change."""
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
        # Each field's test is written inline for the common case (this runs on every append);
        # a field that fails, or needs more than a type test, goes to `envelope_checks`.
        if (
            not isinstance(type, str)
            or not 1 <= len(type) <= 200
            or not type.isprintable()
            or _type_of(seq) is not int
            or not 0 <= seq <= MAX_INT
            or _type_of(time) is not int
            or not -MAX_INT <= time <= MAX_INT
        ):
            refuse_envelope(type, seq, time)
        if surface_op is None or _type_of(surface_op) is SurfaceReplace:
            op: SurfaceOp | None = surface_op
        else:
            op = parse_surface_op(surface_op, event_type=type, seq=seq)
        seqs: tuple[int, ...] | None = None
        if source_event_seqs is not None:
            seqs = check_source_seqs(type, seq, source_event_seqs)
        if ignorable is not False and ignorable is not True:
            refuse_ignorable(type, seq, ignorable)
        try:
            if data.__class__ is _Parsed:  # fresh from our own JSON parser: no copy
                copy, text = data.value, canonical_parsed(data.value)
            else:
                copy, text = lossless_copy(data)
        except LosslessJSONError as exc:
            fail(
                f"{label(type, seq)}: data is not losslessly JSON-serializable: {exc.reason}",
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
            frozen = freeze(self.payload)
            _set(self, "_frozen", frozen)
        return frozen

    @property
    def data_json(self) -> str:
        """The payload's JSON text, exactly as stored."""
        return self._data_json

    def data_copy(self) -> Any:
        """A fresh mutable deep copy of the payload."""
        return thaw(self.payload)

    def replace(self, **changes: Any) -> SessionEvent:
        """A new event with some envelope fields changed (validated like a new event)."""
        fields: dict[str, Any] = {
            "type": self.type,
            "seq": self.seq,
            "time": self.time,
            "data": self.payload,
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
            "data": thaw(self.payload),
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
            fail(
                f"{label(event_type, seq)}: unknown top-level keys {sorted(map(str, extra))}",
                event_type=event_type,
                seq=seq,
                field=str(sorted(map(str, extra))[0]),
            )
        for key in ("type", "seq", "time", "data"):
            if key not in wire:
                fail(
                    f"{label(event_type, seq)}: missing required key {key!r}",
                    event_type=event_type,
                    seq=seq,
                    field=key,
                )
        ignorable = wire.get("ignorable", False)
        if "ignorable" in wire and ignorable is not True:
            fail(
                f"{label(event_type, seq)}: ignorable must be true when present, got {ignorable!r}",
                event_type=event_type,
                seq=seq,
                field="ignorable",
            )
        for key in ("surfaceOp", "sourceEventSeqs"):
            if key in wire and wire[key] is None:  # absent is not the same as null
                null_surface_field(event_type, seq, key)
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
_set_data = _slot["payload"].__set__
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
    op = seqs = None
    if len(wire) > 4:  # a surface marker, or ignorable
        markers = _surface_markers(wire)
        if markers is None:
            return None
        op, seqs = markers
    data_json = canonical_fast(data)
    if data_json is None:
        return None
    event = SessionEvent._trusted(
        event_type, seq, time, data, data_json, op, seqs, len(wire) > 4 and "ignorable" in wire
    )
    # Our lines start so (`to_json`); other text is first read as plain JSON, not re-encoded.
    spaced = plain and not text.startswith('{"type":"')
    if spaced and read_as_written(text, wire):
        return event
    if event.to_json() == text.rstrip("\r\n"):
        return event
    return event if plain and not spaced and read_as_written(text, wire) else None


_Markers = tuple[SurfaceOp | None, tuple[int, ...] | None]


def _surface_markers(wire: dict[str, Any]) -> _Markers | None:
    """``(surface op, source seqs)`` of a wire object, or None when either is not valid (a
    null marker included: the strict path says why it is refused)."""
    op = wire.get("surfaceOp", _MISSING)
    if op is _MISSING:
        op = None
    elif op != "append":
        if type(op) is not dict:
            return None  # null too
        try:
            op = parse_surface_op(op)
        except InvalidEventError:
            return None
    seqs = wire.get("sourceEventSeqs", _MISSING)
    if seqs is _MISSING:
        return op, None
    if type(seqs) is not list or not all(type(n) is int and 0 <= n <= MAX_INT for n in seqs):
        return None  # null too
    return op, tuple(seqs)


_MISSING = object()
_loads = orjson.loads
