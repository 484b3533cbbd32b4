"""The surface: which events the model sees, in order, and the derived message list.

See docs/format.md, "Surface rules".

Surface events carry a ``surfaceOp``. ``"append"`` puts the event at the end of the surface;
``{"op": "replace", "start": a, "end": b}`` removes the span ``a..b`` (seqs of nodes currently on
the surface, ``a`` at or before ``b``) and puts the event in its place. A replacement must cite
every node it removes in ``sourceEventSeqs``. Replaced events stay in the log; they only stop
being derived.

`SurfaceState` folds events one at a time (a live session keeps one); `fold_surface` and
`derive_messages` fold a whole log with it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, overload

from pydantic import ValidationError

from ..errors import InvalidEventError
from .catalog import EVENT_TYPES
from .envelope import SessionEvent, SurfaceReplace
from .messages import AssistantMessage, Message, UserMessage

__all__ = [
    "MessageSnapshot",
    "Replacement",
    "SurfaceFold",
    "SurfaceState",
    "derive_messages",
    "fold_surface",
]


@dataclass(frozen=True, slots=True)
class Replacement:
    """One applied replace: event ``seq`` took the place of surface nodes ``start..end``.

    ``removed`` holds the seqs of the removed nodes, in surface order.
    """

    seq: int
    start: int
    end: int
    removed: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SurfaceFold:
    """The result of `fold_surface`: the surface seqs in order and the replacements applied."""

    seqs: tuple[int, ...]
    replacements: tuple[Replacement, ...]


def _where(event: SessionEvent) -> str:
    return f"event {event.type!r} (seq {event.seq})"


def _fail(event: SessionEvent, message: str, field: str) -> NoReturn:
    raise InvalidEventError(
        f"{_where(event)}: {message}", event_type=event.type, seq=event.seq, field=field
    )


def _is_eligible(event: SessionEvent) -> bool:
    """Surface-eligible: a registered type marked ``surface``, or an unknown ignorable type.

    An unknown type kept because it is ``ignorable`` may come from a newer writer; if it carries
    a surface op it takes its place on the surface (so later replaces can name it) but yields no
    message.
    """
    entry = EVENT_TYPES.get(event.type)
    if entry is None:
        return event.ignorable
    return entry.surface


def _build_message(event: SessionEvent) -> Message | None:
    """The message a surface node contributes, or None (empty assistant message, other types)."""
    try:
        data = event._data  # the plain decoded payload: no need to freeze it just to read it
        if event.type == "user/message":
            return UserMessage.model_validate(data)
        if event.type == "assistant/message":
            message = data["message"]
            if not message.get("content"):
                return None
            return AssistantMessage.model_validate(message)
        if event.type == "tool/result":
            return UserMessage.model_validate(data["message"])
    except (ValidationError, KeyError, TypeError, AttributeError) as exc:
        detail = (
            exc.errors(include_url=False)[0]["msg"]
            if isinstance(exc, ValidationError)
            else f"missing or malformed message ({type(exc).__name__}: {exc})"
        )
        _fail(event, f"cannot build its message: {detail}", "data")
    return None


class MessageSnapshot(Sequence[Message]):
    """A read-only sequence of derived messages that never changes once taken."""

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[Message], length: int) -> None:
        self._items = items
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return self._items[: self._length][index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("message index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Message]:
        return itertools.islice(self._items, self._length)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(other) == self._length and all(
                a == b for a, b in zip(self, other, strict=False)
            )
        return NotImplemented

    def __hash__(self) -> int:
        raise TypeError("MessageSnapshot is not hashable")

    def to_list(self) -> list[Message]:
        """A plain list (for serialisers that want one: ``TypeAdapter(list[Message])``)."""
        return self._items[: self._length]

    def __add__(self, other: Iterable[Message]) -> list[Message]:
        return [*self, *other]

    def __radd__(self, other: Iterable[Message]) -> list[Message]:
        return [*other, *self]

    def __repr__(self) -> str:
        return f"MessageSnapshot({list(self)!r})"


class SurfaceState:
    """The surface folded so far; `apply` one event at a time.

    `apply` checks the surface rules that need the surface (replace endpoints and citations,
    eligibility) and raises `InvalidEventError` without changing anything when they fail. Each
    node's message is built once, when it is applied; appends cost O(1), a replace rebuilds the
    ordered lists (O(surface)).

    ``build_messages=False`` skips building messages (for `fold_surface`, which only needs seqs).
    """

    __slots__ = (
        "_build",
        "_events",
        "_index",
        "_messages",
        "_nodes",
        "_order",
        "_replacements",
    )

    def __init__(self, *, build_messages: bool = True) -> None:
        self._build = build_messages
        self._order: list[int] = []
        """Surface seqs in order."""
        self._index: dict[int, int] = {}
        """Surface seq -> its position in ``_order``."""
        self._nodes: dict[int, Message | None] = {}
        """Surface seq -> the message it contributes (None: contributes nothing)."""
        self._events: dict[int, SessionEvent] = {}
        """Surface seq -> its event (what a checkpoint stores)."""
        self._messages: list[Message] = []
        """The derived messages, in surface order."""
        self._replacements: list[Replacement] = []

    # -- views ----------------------------------------------------------------------------------

    @property
    def seqs(self) -> tuple[int, ...]:
        """The seqs of the events on the surface, in surface order."""
        return tuple(self._order)

    @property
    def replacements(self) -> tuple[Replacement, ...]:
        """Every replace applied so far, in log order."""
        return tuple(self._replacements)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, seq: object) -> bool:
        return seq in self._index

    def messages(self) -> list[Message]:
        """The derived message list (a fresh list; the message models are shared, immutable)."""
        return list(self.snapshot())

    def snapshot(self) -> MessageSnapshot:
        """The derived messages as an immutable snapshot, in O(1).

        Appends only ever extend the internal list and a replace builds a new one, so a
        snapshot (a list and a length) never changes after it is taken.
        """
        if not self._build:
            raise RuntimeError("this SurfaceState was created with build_messages=False")
        return MessageSnapshot(self._messages, len(self._messages))

    # -- checkpoints ----------------------------------------------------------------------------

    def export(self) -> dict[str, Any]:
        """The state as plain JSON values: the surface nodes' events in surface order (without
        their ``sourceEventSeqs``: a node's message does not depend on what it cites, and an
        answer citing its 1,000 streamed chunks would make every checkpoint carry them), and
        the replacements. `restore` reads it back."""
        return {
            "nodes": [_without_citations(self._events[seq].to_dict()) for seq in self._order],
            "replacements": [[r.seq, r.start, r.end, list(r.removed)] for r in self._replacements],
        }

    @classmethod
    def restore(cls, state: Mapping[str, Any]) -> SurfaceState:
        """The state `export` described, each node's message built again from its event;
        `ValueError` (or `InvalidEventError`) when ``state`` is not one."""
        surface = cls()
        try:
            for wire in state["nodes"]:
                event = SessionEvent.from_dict(wire)
                if event.surface_op is None or event.seq in surface._index:
                    raise ValueError(f"seq {event.seq} cannot be a surface node here")
                surface._index[event.seq] = len(surface._order)
                surface._order.append(event.seq)
                message = _build_message(event)
                surface._nodes[event.seq] = message
                surface._events[event.seq] = event
                if message is not None:
                    surface._messages.append(message)
            for seq, start, end, removed in state["replacements"]:
                numbers = [seq, start, end, *removed]
                if any(type(n) is not int for n in numbers):
                    raise ValueError(f"replacement {numbers!r} is not made of seqs")
                surface._replacements.append(Replacement(seq, start, end, tuple(removed)))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a surface state: {exc!r}") from None
        return surface

    # -- folding --------------------------------------------------------------------------------

    def apply(self, event: SessionEvent) -> None:
        """Fold one event. Events without ``surfaceOp`` are not on the surface and are ignored.

        Raises `InvalidEventError` (field ``surfaceOp`` or ``sourceEventSeqs``) and changes
        nothing when the event breaks a surface rule.
        """
        op = event.surface_op
        if op is None and event.source_event_seqs is None:
            return
        if not _is_eligible(event):
            field = "surfaceOp" if op is not None else "sourceEventSeqs"
            _fail(
                event,
                f"may not carry {field}: only surface events "
                "(user/message, assistant/message, tool/result) do",
                field,
            )
        if op is None:
            return
        if event.seq in self._index:
            _fail(event, f"seq {event.seq} is already on the surface", "surfaceOp")
        if op == "append":
            message = _build_message(event) if self._build else None
            self._index[event.seq] = len(self._order)
            self._order.append(event.seq)
            self._nodes[event.seq] = message
            self._events[event.seq] = event
            if message is not None:
                self._messages.append(message)
            return
        assert isinstance(op, SurfaceReplace)
        first, last = self._check_replace(event, op)
        message = _build_message(event) if self._build else None
        removed = tuple(self._order[first : last + 1])
        self._order[first : last + 1] = [event.seq]
        for seq in removed:
            del self._index[seq]
            del self._nodes[seq]
            del self._events[seq]
        for position in range(first, len(self._order)):
            self._index[self._order[position]] = position
        self._nodes[event.seq] = message
        self._events[event.seq] = event
        if self._build:
            self._messages = [m for m in map(self._nodes.__getitem__, self._order) if m is not None]
        self._replacements.append(Replacement(event.seq, op.start, op.end, removed))

    def _check_replace(self, event: SessionEvent, op: SurfaceReplace) -> tuple[int, int]:
        """Positions of the span a replace removes, after checking endpoints and citations."""
        first = self._index.get(op.start)
        if first is None:
            _fail(event, f"surface replace: start seq {op.start} not found in surface", "surfaceOp")
        last = self._index.get(op.end)
        if last is None:
            _fail(event, f"surface replace: end seq {op.end} not found in surface", "surfaceOp")
        if first > last:
            _fail(
                event,
                f"surface replace: start seq {op.start} comes after end seq {op.end} "
                "in surface order",
                "surfaceOp",
            )
        cited = set(event.source_event_seqs or ())
        missing = [seq for seq in self._order[first : last + 1] if seq not in cited]
        if missing:
            _fail(
                event,
                f"surface replace of {op.start}..{op.end} must cite every node it removes "
                f"in sourceEventSeqs; missing {missing}",
                "sourceEventSeqs",
            )
        return first, last


def _without_citations(wire: dict[str, Any]) -> dict[str, Any]:
    wire.pop("sourceEventSeqs", None)
    return wire


def fold_surface(events: Iterable[SessionEvent]) -> SurfaceFold:
    """The ordered surface seqs of a log and the replacements applied."""
    state = SurfaceState(build_messages=False)
    for event in events:
        state.apply(event)
    return SurfaceFold(state.seqs, state.replacements)


def derive_messages(events: Iterable[SessionEvent]) -> list[Message]:
    """The message list the model sees: each surface node's message, in surface order.

    ``user/message`` gives its data, ``assistant/message`` its ``data.message`` (nothing when
    its content is empty), ``tool/result`` its ``data.message``. Nothing else ever appears.
    """
    state = SurfaceState()
    for event in events:
        state.apply(event)
    return state.messages()
