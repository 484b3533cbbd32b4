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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from pydantic import ValidationError

from ..errors import CheckpointError, InvalidEventError
from .catalog import EVENT_TYPES
from .envelope import SessionEvent, SurfaceReplace
from .jsonvalue import canonical_json, decode_fast
from .messages import AssistantMessage, Message, MessageSnapshot, UserMessage
from .types import ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE

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
        data = event.payload  # the plain decoded payload: no need to freeze it just to read it
        if event.type == USER_MESSAGE:
            return UserMessage.model_validate(data)
        if event.type == ASSISTANT_MESSAGE:
            message = data["message"]
            if not message.get("content"):
                return None
            return AssistantMessage.model_validate(message)
        if event.type == TOOL_RESULT:
            return UserMessage.model_validate(data["message"])
    except (ValidationError, KeyError, TypeError, AttributeError) as exc:
        detail = (
            exc.errors(include_url=False)[0]["msg"]
            if isinstance(exc, ValidationError)
            else f"missing or malformed message ({type(exc).__name__}: {exc})"
        )
        _fail(event, f"cannot build its message: {detail}", "data")
    return None


class SurfaceState:
    """The surface folded so far; `apply` one event at a time.

    `apply` checks the surface rules that need the surface (replace endpoints and citations,
    eligibility) and raises `InvalidEventError` without changing anything when they fail. Each
    node's message is built once, when it is applied; appends cost O(1), a replace rebuilds the
    ordered lists (O(surface)).

    A state restored from a checkpoint (`restore`) knows its surface order at once but decodes
    the nodes' events (and builds their messages) only when something needs them: the first
    `snapshot`, or a replace. Appends and `export_nodes` do not, so resuming a long session
    costs the same whatever the length of its history.

    ``build_messages=False`` skips building messages (for `fold_surface`, which only needs seqs).
    """

    __slots__ = (
        "_build",
        "_index",
        "_messages",
        "_nodes",
        "_order",
        "_replacements",
        "_undecoded",
        "_wire",
    )

    def __init__(self, *, build_messages: bool = True) -> None:
        self._build = build_messages
        self._order: list[int] = []
        """Surface seqs in order."""
        self._index: dict[int, int] = {}
        """Surface seq -> its position in ``_order``."""
        self._nodes: dict[int, Message | None] = {}
        """Surface seq -> the message it contributes (None: contributes nothing)."""
        self._wire: dict[int, SessionEvent | str] = {}
        """Surface seq -> its event, replaced by its checkpoint text (`export_nodes`) once
        written: what a checkpoint stores."""
        self._messages: list[Message] = []
        """The derived messages, in surface order (once decoded: see ``_undecoded``)."""
        self._replacements: list[Replacement] = []
        self._undecoded: tuple[str, int] | None = None
        """Surface nodes restored from a checkpoint and not decoded yet: the JSON array text
        of their events, and how many they are (the first seqs of ``_order``). While set,
        ``_nodes``, ``_wire`` and ``_messages`` hold only the nodes appended since, and no
        replace has been applied."""

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
        """The derived messages as an immutable snapshot, in O(1) (the first one after
        `restore` decodes the restored nodes).

        Appends only ever extend the internal list and a replace builds a new one, so a
        snapshot (a list and a length) never changes after it is taken.
        """
        if not self._build:
            raise RuntimeError("this SurfaceState was created with build_messages=False")
        self._decode()
        return MessageSnapshot(self._messages, len(self._messages))

    def node_message(self, seq: int) -> Message | None:
        """The message surface node ``seq`` contributes (None: it contributes none);
        ``KeyError`` when ``seq`` is not on the surface."""
        if seq not in self._index:
            raise KeyError(seq)
        self._decode()
        return self._nodes[seq]

    def node_event(self, seq: int) -> SessionEvent:
        """The event of surface node ``seq`` (one restored from a checkpoint comes back
        without its ``sourceEventSeqs``); ``KeyError`` when ``seq`` is not on the surface."""
        if seq not in self._index:
            raise KeyError(seq)
        self._decode()
        wire = self._wire[seq]
        if isinstance(wire, str):
            return SessionEvent.from_dict(decode_fast(wire))
        return wire

    def copy(self) -> SurfaceState:
        """An independent copy (O(surface), no decoding): folding into it leaves this one as
        it is."""
        other = SurfaceState(build_messages=self._build)
        other._order = list(self._order)
        other._index = dict(self._index)
        other._nodes = dict(self._nodes)
        other._wire = dict(self._wire)
        other._messages = list(self._messages)
        other._replacements = list(self._replacements)
        other._undecoded = self._undecoded
        return other

    # -- checkpoints ----------------------------------------------------------------------------

    def export(self) -> dict[str, Any]:
        """The surface order and the replacements as plain JSON values; with `export_nodes`,
        what `restore` reads back."""
        return {
            "order": list(self._order),
            "replacements": [[r.seq, r.start, r.end, list(r.removed)] for r in self._replacements],
        }

    def export_nodes(self) -> str:
        """The surface nodes' events in surface order, as canonical JSON array text, without
        their ``sourceEventSeqs`` (a node's message does not depend on what it cites, and an
        answer citing its 1,000 streamed chunks would make every checkpoint carry them).

        Each node is encoded once and its text kept for the next checkpoint, and restored
        nodes are copied as the text they came in: a checkpoint per turn costs the new nodes,
        not the whole history again."""
        parts: list[str] = []
        first = 0
        if self._undecoded is not None:
            text, first = self._undecoded
            parts.append(text[1:-1])
        for seq in itertools.islice(self._order, first, None):
            wire = self._wire[seq]
            if not isinstance(wire, str):
                wire = self._wire[seq] = _node_text(wire)
            parts.append(wire)
        return "[" + ",".join(parts) + "]"

    @classmethod
    def restore(cls, state: Mapping[str, Any], nodes: str) -> SurfaceState:
        """The state `export` and `export_nodes` described. The order and replacements are
        checked now; the nodes' text is decoded on first need, and must then hold exactly the
        events of that order (else `CheckpointError`). ``ValueError`` when ``state`` is not
        one `export` writes."""
        surface = cls()
        try:
            order = state["order"]
            if not isinstance(order, list) or any(type(seq) is not int for seq in order):
                raise ValueError("the surface order is not a list of seqs")
            for position, seq in enumerate(order):
                if seq in surface._index:
                    raise ValueError(f"seq {seq} is on the surface twice")
                surface._index[seq] = position
            surface._order = list(order)
            for seq, start, end, removed in state["replacements"]:
                numbers = [seq, start, end, *removed]
                if not set(map(type, numbers)) <= {int}:  # (in C: a compaction removes many)
                    raise ValueError(f"replacement {numbers!r} is not made of seqs")
                surface._replacements.append(Replacement(seq, start, end, tuple(removed)))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a surface state: {exc!r}") from None
        if type(nodes) is not str or not (nodes.startswith("[") and nodes.endswith("]")):
            raise ValueError("the surface nodes are not a JSON array")
        if (nodes == "[]") != (not order):
            raise ValueError(f"{len(order)} surface seqs, but the nodes are {nodes[:20]!r}")
        if order:
            surface._undecoded = (nodes, len(order))
        return surface

    def _decode(self) -> None:
        """Decode the nodes `restore` left as text, and build their messages."""
        if self._undecoded is None:
            return
        text, count = self._undecoded
        try:
            wires = decode_fast(text)
        except ValueError as exc:
            raise CheckpointError(f"checkpoint surface nodes are not JSON: {exc}") from None
        if len(wires) != count:  # a list: the text starts with "[" and ends with "]"
            raise CheckpointError("checkpoint surface nodes do not match the surface order")
        nodes: dict[int, Message | None] = {}
        events: dict[int, SessionEvent] = {}
        for position, wire in enumerate(wires):
            seq = self._order[position]
            try:
                event = SessionEvent.from_dict(wire)
                if event.seq != seq:
                    raise ValueError(f"node {event.seq} stands where the order has {seq}")
                if event.surface_op is None:
                    raise ValueError(f"{_where(event)} has no surfaceOp")
                nodes[seq] = _build_message(event)
            except (ValueError, TypeError) as exc:
                raise CheckpointError(f"checkpoint surface node {seq} is damaged: {exc}") from None
            events[seq] = event
        restored = [m for m in nodes.values() if m is not None]
        self._messages = restored + self._messages
        self._nodes.update(nodes)
        self._wire.update(events)
        self._undecoded = None

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
            self._wire[event.seq] = event
            if message is not None:
                self._messages.append(message)
            return
        assert isinstance(op, SurfaceReplace)
        self._decode()
        first, last = self._check_replace(event, op)
        if event.type == TOOL_RESULT:
            self._check_result_rewrite(event, self._order[first : last + 1])
        message = _build_message(event) if self._build else None
        removed = tuple(self._order[first : last + 1])
        self._order[first : last + 1] = [event.seq]
        for seq in removed:
            del self._index[seq]
            del self._nodes[seq]
            del self._wire[seq]
        for position in range(first, len(self._order)):
            self._index[self._order[position]] = position
        self._nodes[event.seq] = message
        self._wire[event.seq] = event
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

    def _check_result_rewrite(self, event: SessionEvent, removed: list[int]) -> None:
        """A ``tool/result`` replace rewrites one current ``tool/result`` and changes only the
        ``content`` of its result block (docs/format.md, "Surface rules")."""
        if len(removed) != 1:
            _fail(
                event,
                "tool/result surface replacement must rewrite exactly one current node "
                f"(it spans {len(removed)})",
                "surfaceOp",
            )
        wire = self._wire[removed[0]]
        if isinstance(wire, SessionEvent):
            kind, data = wire.type, wire.payload
        else:  # the node's checkpoint text
            original = decode_fast(wire)
            kind, data = original.get("type"), original.get("data")
        if kind != TOOL_RESULT:
            _fail(
                event,
                "tool/result surface replacement must target a current tool/result "
                f"(seq {removed[0]} is {kind!r})",
                "surfaceOp",
            )
        before, after = _without_result_content(data), _without_result_content(event.payload)
        if not _json_equal(before, after):
            _fail(
                event,
                "tool/result surface replacement may change only content (the result "
                f"block's content; everything else must equal seq {removed[0]}'s)",
                "data",
            )


def _without_result_content(data: Any) -> Any:
    """A ``tool/result`` payload with its result block's ``content`` set to null."""
    try:
        message = data["message"]
        block = {**message["content"][0], "content": None}
        return {**data, "message": {**message, "content": [block]}}
    except (KeyError, IndexError, TypeError):
        return data


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values as JSON sees it: ``true`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_json_equal, a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _node_text(event: SessionEvent) -> str:
    """A surface node's checkpoint text: its wire form without ``sourceEventSeqs``."""
    wire = event.to_dict()
    wire.pop("sourceEventSeqs", None)
    return canonical_json(wire)


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
