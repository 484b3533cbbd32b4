"""Building session logs for tests: `LogBuilder` appends typed events with correct seqs.

Message ids come from a counter (``m1``, ``m2``, …), never from seqs, so two logs built from the
same script with extra non-surface events in between derive equal messages.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from todo_sessions.core.catalog import validate_event
from todo_sessions.core.envelope import SessionEvent, SurfaceReplace

__all__ = [
    "T0",
    "LogBuilder",
    "LogPlan",
    "build_plan",
    "log_plans",
    "rewritten_checkpoint",
    "text_of",
]

T0 = 1_700_000_000_000
"""Time of seq 0 in built logs (each later event is 1 ms later)."""

MODEL_SOURCE = {"kind": "model", "provider": "test", "model": "scripted"}


def text_of(message: Any) -> str:
    """The concatenated text blocks of a message model (tool results: their inner text)."""
    parts: list[str] = []
    for block in message.content:
        if block.type == "text":
            parts.append(block.text)
        elif block.type == "tool-result":
            parts.extend(b.text for b in block.content if b.type == "text")
    return "".join(parts)


def rewritten_checkpoint(text: str, *, nodes: str | None = None, **head: Any) -> str:
    """Checkpoint ``text`` with parts of its head changed (a value of None deletes the key)
    and, optionally, other nodes, with the digest made to match them: damage that only
    decoding (or `verify`) can find, as a careful hand would make it."""
    first, _, old_nodes = text.partition("\n")
    wire = json.loads(first)
    nodes = old_nodes if nodes is None else nodes
    wire["nodes"] = f"{len(nodes)}:{hashlib.blake2b(nodes.encode(), digest_size=16).hexdigest()}"
    for key, value in head.items():
        if value is None:
            wire.pop(key, None)
        else:
            wire[key] = value
    return json.dumps(wire, separators=(",", ":"), ensure_ascii=False) + "\n" + nodes


class LogBuilder:
    """Appends events with the next seq; tracks the open turn/step and the surface.

    Every event is checked with `validate_event` unless ``validate=False``.
    """

    def __init__(self, *, validate: bool = True) -> None:
        self.validate = validate
        self.events: list[SessionEvent] = []
        self.turn = 0
        self.step = 0
        self.surface: list[int] = []
        self.tool_calls: dict[str, int] = {}
        """call id -> seq of its tool/call event."""
        self._ids = 0

    # -- low level ------------------------------------------------------------------------------

    @property
    def next_seq(self) -> int:
        return len(self.events)

    def new_id(self) -> str:
        self._ids += 1
        return f"m{self._ids}"

    def add(
        self,
        type: str,
        data: Any,
        *,
        surface_op: Any = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> SessionEvent:
        """Append one event with the next seq (and track the surface)."""
        seq = self.next_seq
        event = SessionEvent(
            type,
            seq,
            T0 + seq,
            data,
            surface_op=surface_op,
            source_event_seqs=source_event_seqs,
            ignorable=ignorable,
        )
        if self.validate:
            validate_event(event)
        self.events.append(event)
        op = event.surface_op
        if op == "append":
            self.surface.append(seq)
        elif isinstance(op, SurfaceReplace) and op.start in self.surface and op.end in self.surface:
            first, last = self.surface.index(op.start), self.surface.index(op.end)
            self.surface[first : last + 1] = [seq]
        return event

    def span(self, start: int, end: int) -> list[int]:
        """The surface seqs from ``start`` to ``end`` inclusive."""
        return self.surface[self.surface.index(start) : self.surface.index(end) + 1]

    # -- boundaries -----------------------------------------------------------------------------

    def turn_start(self) -> SessionEvent:
        self.turn += 1
        self.step = 0
        return self.add("turn/start", {"turn": self.turn})

    def turn_end(self, kind: str = "completed") -> SessionEvent:
        return self.add("turn/end", {"turn": self.turn, "reason": {"kind": kind}})

    def step_start(self) -> SessionEvent:
        self.step += 1
        return self.add("step/start", {"turn": self.turn, "step": self.step})

    def step_end(self) -> SessionEvent:
        return self.add("step/end", {"turn": self.turn, "step": self.step})

    # -- surface events -------------------------------------------------------------------------

    def user(
        self,
        text: str = "hello",
        *,
        surface_op: Any = "append",
        cites: Sequence[int] | None = None,
    ) -> SessionEvent:
        data = {
            "id": self.new_id(),
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        }
        return self.add("user/message", data, surface_op=surface_op, source_event_seqs=cites)

    def compact(self, start: int, end: int, text: str = "summary") -> SessionEvent:
        """A user/message replacing surface nodes ``start..end``, citing all of them."""
        return self.user(
            text,
            surface_op={"op": "replace", "start": start, "end": end},
            cites=self.span(start, end),
        )

    def chunk(self, text: str = "hi") -> SessionEvent:
        chunk = {"type": "text-delta", "index": 0, "text": text}
        return self.add("assistant/chunk", {"turn": self.turn, "step": self.step, "chunk": chunk})

    def assistant(
        self,
        text: str = "",
        *,
        calls: Iterable[str | tuple[str, str]] = (),
        surface_op: Any = "append",
        cites: Sequence[int] | None = (),
    ) -> SessionEvent:
        """An assistant/message with optional text and tool-call blocks (id or (id, name))."""
        content: list[dict[str, Any]] = []
        if text:
            content.append({"type": "text", "text": text})
        for call in calls:
            call_id, name = (call, "read") if isinstance(call, str) else call
            content.append({"type": "tool-call", "id": call_id, "name": name, "arguments": "{}"})
        message = {"id": self.new_id(), "role": "assistant", "content": content}
        message["source"] = MODEL_SOURCE
        data = {"turn": self.turn, "step": self.step, "message": message}
        return self.add("assistant/message", data, surface_op=surface_op, source_event_seqs=cites)

    def tool_call(self, call_id: str, name: str = "read") -> SessionEvent:
        data = {
            "turn": self.turn,
            "step": self.step,
            "callId": call_id,
            "name": name,
            "arguments": "{}",
        }
        event = self.add("tool/call", data)
        self.tool_calls.setdefault(call_id, event.seq)
        return event

    def tool_result(
        self,
        call_id: str,
        text: str = "ok",
        *,
        is_error: bool = False,
        error: dict[str, str] | None = None,
        surface_op: Any = "append",
        cites: Sequence[int] | None = None,
    ) -> SessionEvent:
        block: dict[str, Any] = {
            "type": "tool-result",
            "toolCallId": call_id,
            "content": [{"type": "text", "text": text}],
        }
        if is_error:
            block["isError"] = True
        data: dict[str, Any] = {
            "turn": self.turn,
            "step": self.step,
            "message": {
                "id": self.new_id(),
                "role": "user",
                "source": {"kind": "tool", "callId": call_id},
                "content": [block],
            },
        }
        if error is not None:
            data["error"] = error
        replaced = self._replaced_result(surface_op)
        if replaced is not None:  # a rewrite changes only the result block's content
            data = replaced.to_dict()["data"]
            data["message"]["content"][0]["content"] = block["content"]
        if cites is None and call_id in self.tool_calls:
            cites = [self.tool_calls[call_id]]
        return self.add("tool/result", data, surface_op=surface_op, source_event_seqs=cites)

    def _replaced_result(self, surface_op: Any) -> SessionEvent | None:
        """The ``tool/result`` a one-node replace names, if that is what ``surface_op`` is."""
        if isinstance(surface_op, SurfaceReplace):
            span = (surface_op.start, surface_op.end)
        elif isinstance(surface_op, dict):
            span = (surface_op.get("start"), surface_op.get("end"))
        else:
            return None
        found = [e for e in self.events if e.seq == span[0]]
        if span[0] != span[1] or not found or found[0].type != "tool/result":
            return None
        return found[0]

    # -- other records --------------------------------------------------------------------------

    def todo(self, *items: tuple[str, str]) -> SessionEvent:
        """A todo/write of ``(content, status)`` items (none: clear the list)."""
        todos = [{"content": content, "status": status} for content, status in items]
        return self.add("todo/write", {"todos": todos})

    def request_header(self) -> SessionEvent:
        header = {"config": {"provider": "test", "model": "scripted"}, "tools": []}
        return self.add("request/header", {"header": header, "reason": "initial"})

    def request_context(self) -> SessionEvent:
        return self.add("request/context", {"provider": "test", "model": "scripted"})

    def end_seed(self) -> SessionEvent:
        return self.add("session/end-seed", {})

    # -- whole shapes ---------------------------------------------------------------------------

    def tool_step(self, *call_ids: str, text: str = "") -> None:
        """One complete step: the assistant asks for tools, each is called and answered."""
        self.step_start()
        self.assistant(text, calls=call_ids)
        for call_id in call_ids:
            self.tool_call(call_id)
            self.tool_result(call_id, f"result of {call_id}")
        self.step_end()

    def text_step(self, text: str = "done") -> None:
        """One complete step that only answers with text."""
        self.step_start()
        self.chunk(text)
        self.assistant(text, cites=[self.next_seq - 1])
        self.step_end()

    def exchange(self, prompt: str = "hello", *call_ids: str, answer: str = "done") -> None:
        """A whole completed turn: user prompt, one tool step (if any calls), a text step."""
        self.turn_start()
        self.user(prompt)
        if call_ids:
            self.tool_step(*call_ids)
        self.text_step(answer)
        self.turn_end()


# -- generated logs (hypothesis) ----------------------------------------------------------------


@dataclass(frozen=True)
class StepPlan:
    """One step of a generated turn: assistant text, how many tools it calls, chunk or not."""

    text: str
    calls: int
    chunk: bool


@dataclass(frozen=True)
class TurnPlan:
    """One generated turn; ``compact`` = (start index, length) of a surface span to summarise."""

    prompt: str
    steps: tuple[StepPlan, ...]
    compact: tuple[int, int] | None


@dataclass(frozen=True)
class LogPlan:
    """A generated session: turns, all closed unless ``last_open``."""

    turns: tuple[TurnPlan, ...]
    last_open: bool


_words = st.sampled_from(["", "ok", "let me look", "done", "reading files"])


def log_plans(*, compact: bool = True, max_turns: int = 3) -> st.SearchStrategy[LogPlan]:
    """Plans of structurally valid logs (see `build_plan`)."""
    step = st.builds(StepPlan, _words, st.integers(0, 2), st.booleans())
    span = st.tuples(st.integers(0, 20), st.integers(0, 3))
    turn = st.builds(
        TurnPlan,
        st.sampled_from(["hi", "fix the bug", "add tests"]),
        st.lists(step, max_size=3).map(tuple),
        st.none() | span if compact else st.none(),
    )
    return st.builds(LogPlan, st.lists(turn, max_size=max_turns).map(tuple), st.booleans())


def build_plan(plan: LogPlan, todo_slots: Collection[int] = ()) -> tuple[list[SessionEvent], int]:
    """Build a plan into events; return them and the number of todo slots.

    A *todo slot* is each point inside an open turn; when its index is in ``todo_slots`` a
    ``todo/write`` is appended there. Slots are numbered the same whatever ``todo_slots`` is.
    """
    b = LogBuilder()
    slot = 0

    def maybe_todo() -> None:
        nonlocal slot
        if slot in todo_slots:
            items = [(f"task {slot}", "in_progress"), ("later", "pending")][: slot % 3]
            b.todo(*items)
        slot += 1

    for index, turn in enumerate(plan.turns):
        b.turn_start()
        maybe_todo()
        b.user(turn.prompt)
        maybe_todo()
        for step in turn.steps:
            b.step_start()
            maybe_todo()
            cites: list[int] = []
            if step.chunk:
                cites.append(b.chunk(step.text or "x").seq)
                maybe_todo()
            call_ids = [f"c{b.turn}.{b.step}.{i}" for i in range(step.calls)]
            b.assistant(step.text, calls=call_ids, cites=cites)
            maybe_todo()
            for call_id in call_ids:
                b.tool_call(call_id)
                maybe_todo()
                b.tool_result(call_id, f"result of {call_id}")
                maybe_todo()
            b.step_end()
            maybe_todo()
        if turn.compact is not None and b.surface:
            first = turn.compact[0] % len(b.surface)
            last = min(first + turn.compact[1], len(b.surface) - 1)
            first, last = _whole_pairs(b, first, last)
            b.compact(b.surface[first], b.surface[last], f"summary {index}")
            maybe_todo()
        if not (plan.last_open and index == len(plan.turns) - 1):
            b.turn_end()
    return b.events, slot


def _whole_pairs(b: LogBuilder, first: int, last: int) -> tuple[int, int]:
    """The surface span ``first..last`` widened until it cuts no tool call from its result
    (a span that does is a defect `verify` reports)."""
    calls: dict[str, int] = {}
    pairs: list[tuple[int, int]] = []
    for position, seq in enumerate(b.surface):
        event = b.events[seq]
        data = event.data
        if event.type == "assistant/message":
            for block in data["message"]["content"]:
                if block.get("type") == "tool-call":
                    calls[block["id"]] = position
        elif event.type == "tool/result":
            call_id = data["message"]["source"]["callId"]
            if call_id in calls:
                pairs.append((calls.pop(call_id), position))
    pairs += [(position, len(b.surface) - 1) for position in calls.values()]  # unanswered
    changed = True
    while changed:
        changed = False
        for call, result in pairs:
            if (first <= call <= last) != (first <= result <= last):
                first, last = min(first, call), max(last, result)
                changed = True
    return first, last
