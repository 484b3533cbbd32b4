"""Compaction and tool-result pruning, planned as events (docs/format.md, "Compaction").

Pure: the functions here read a folded `LiveState` and return the events to append, or raise
`CompactionError` naming the seq at fault. `Session.compact` and
`Session.prune_tool_results` append what they plan, all or nothing.

A compaction is ``compaction/start``, ``compaction/summary``, one ``user/message`` that
replaces a span of the surface (the summary, then the standing todo list as a plain text
block), and ``compaction/end``. A span is refused when it cuts a tool call from its result,
when it reaches into the open step, or when it is empty. A prune is, for each old
``tool/result``, a ``compaction/prune`` and a content-only replacement of that one result.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import CompactionError, InvalidEventError
from .checkpoint import LiveState
from .envelope import SessionEvent
from .messages import Message, TextBlock, ToolCallBlock, ToolResultBlock, UserMessage
from .surface import SurfaceState, _build_message
from .todos import TodoItem, render_todos
from .types import (
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    TOOL_RESULT,
    USER_MESSAGE,
)

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "PLAN_HEADING",
    "SUMMARY_PLUGIN",
    "CompactionResult",
    "PendingEvent",
    "PruneResult",
    "PrunedResult",
    "estimate_tokens",
    "failed_compaction",
    "is_summary_message",
    "plan_compaction",
    "plan_prune",
    "plan_text",
    "replacement_cut",
    "span_ending_before_turns",
]

SUMMARY_PLUGIN = "compact"
"""A summary message's source is ``{kind: "plugin", plugin: "compact", compactionId}``."""

PLAN_HEADING = "Your todo list when this summary was written (keep it up to date with todo_write):"
"""The first line of the plan block; `render_todos` lines follow."""

DEFAULT_PLACEHOLDER = "[tool result pruned to save context]"


@dataclass(frozen=True, slots=True)
class PendingEvent:
    """An event to append: what `Session.append` takes."""

    type: str
    data: dict[str, Any]
    surface_op: Any = None
    source_event_seqs: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What a compaction appended: its id, the seqs of its four events, the replaced surface
    nodes (surface order) and the token estimates before and after."""

    compaction_id: str
    start_seq: int
    summary_seq: int
    message_seq: int
    end_seq: int
    replaced: tuple[int, ...]
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True, slots=True)
class PrunedResult:
    original_seq: int
    replacement_seq: int
    call_id: str


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What a prune appended, one entry per replaced result (empty: nothing to prune)."""

    pruned: tuple[PrunedResult, ...]


# -- measuring ------------------------------------------------------------------------------------


def estimate_tokens(messages: Sequence[Message | None]) -> int:
    """A size estimate in tokens: the messages' JSON length / 4 (no tokenizer)."""
    total = 0
    for message in messages:
        if message is not None:
            total += len(message.model_dump_json(by_alias=True, exclude_unset=True))
    return (total + 3) // 4


def is_summary_message(message: Message | None) -> bool:
    """Whether ``message`` is a compaction summary (its source names the compact plugin)."""
    if message is None or message.role != "user":
        return False
    source = message.source
    return source.kind == "plugin" and getattr(source, "plugin", None) == SUMMARY_PLUGIN


def _is_prompt(message: Message | None) -> bool:
    return message is not None and message.role == "user" and message.source.kind == "user"


def plan_text(todos: Sequence[TodoItem] | None) -> str | None:
    """The plan block a summary carries: `PLAN_HEADING`, then `render_todos`; None without
    todos."""
    if not todos:
        return None
    return PLAN_HEADING + "\n" + render_todos(todos)


# -- the tool call / result pairing --------------------------------------------------------------


def _blocks(message: Message | None) -> tuple[list[str], list[str]]:
    """The tool-call ids and tool-result ids a message holds."""
    calls: list[str] = []
    results: list[str] = []
    if message is not None:
        for block in message.content:
            if isinstance(block, ToolCallBlock):
                calls.append(block.id)
            elif isinstance(block, ToolResultBlock):
                results.append(block.tool_call_id)
    return calls, results


def _pairs(surface: SurfaceState, order: Sequence[int]) -> list[tuple[str, int, int | None]]:
    """Every tool call on the surface with its result: ``(call id, call position, result
    position or None)``. A result answers the latest earlier call with its id."""
    pairs: list[list[Any]] = []
    latest: dict[str, int] = {}
    for position, seq in enumerate(order):
        calls, results = _blocks(surface.node_message(seq))
        for call_id in results:
            index = latest.pop(call_id, None)
            if index is not None:
                pairs[index][2] = position
        for call_id in calls:
            latest[call_id] = len(pairs)
            pairs.append([call_id, position, None])
    return [(p[0], p[1], p[2]) for p in pairs]


def _cut(
    surface: SurfaceState,
    order: Sequence[int],
    first: int,
    last: int,
    kept: Message | None,
    unanswered: frozenset[str],
) -> tuple[str, int] | None:
    """Why replacing positions ``first..last`` by a node holding ``kept`` would cut a tool
    call from its result (None: it does not). A call inside whose result lies outside, or
    that is still unanswered, is cut; so is a result inside whose call lies outside. Ids the
    replacement itself carries again (a content-only result replacement) are not cut."""
    kept_calls, kept_results = _blocks(kept)
    for call_id, call, result in _pairs(surface, order):
        inside_call = first <= call <= last
        inside_result = result is not None and first <= result <= last
        if inside_call and result is None and call_id in unanswered:
            if call_id in kept_calls:
                continue
            return (
                f"it holds tool call {call_id!r} (seq {order[call]}), which has no result yet",
                order[call],
            )
        if result is None or inside_call == inside_result:
            continue
        if (inside_call and call_id in kept_calls) or (inside_result and call_id in kept_results):
            continue
        if inside_call:
            return (
                f"it cuts tool call {call_id!r} (seq {order[call]}) from its result "
                f"(seq {order[result]})",
                order[call],
            )
        return (
            f"it cuts the result of tool call {call_id!r} (seq {order[result]}) from its call "
            f"(seq {order[call]})",
            order[result],
        )
    return None


def replacement_cut(surface: SurfaceState, event: SessionEvent) -> str | None:
    """For `verify`: why the surface replace ``event`` (valid against ``surface``) cuts a tool
    call from its result, or None."""
    op = event.surface_op
    order = surface.seqs
    try:
        first = order.index(getattr(op, "start", None))
        last = order.index(getattr(op, "end", None))
        kept = _build_message(event)
    except (ValueError, InvalidEventError):
        return None
    found = _cut(surface, order, first, last, kept, frozenset())
    return None if found is None else found[0]


# -- compaction -----------------------------------------------------------------------------------


def span_ending_before_turns(surface: SurfaceState, keep_turns: int) -> int | None:
    """The seq of the surface node right before the ``keep_turns``-th last user prompt (a
    ``user/message`` from the user), or None when there is nothing before it."""
    order = surface.seqs
    seen = 0
    for position in range(len(order) - 1, -1, -1):
        if _is_prompt(surface.node_message(order[position])):
            seen += 1
            if seen == keep_turns:
                return order[position - 1] if position > 0 else None
    return None


def _summary_blocks(summary: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(summary, str):
        blocks = [{"type": "text", "text": summary}] if summary.strip() else []
    else:
        blocks = [dict(block) for block in summary]
    if not any(b.get("type") != "text" or str(b.get("text", "")).strip() for b in blocks):
        raise CompactionError("the summary is empty", seq=None, reason="summary")
    return blocks


def _in_open_step(event: SessionEvent, state: LiveState, open_step_seq: int | None) -> bool:
    structure = state.structure
    if structure.open_step is None:
        return False
    if open_step_seq is not None:
        return event.seq > open_step_seq
    data = event.data if isinstance(event.data, Mapping) else {}
    return data.get("turn") == structure.open_turn and data.get("step") == structure.open_step


def plan_compaction(
    state: LiveState,
    summary: str | Sequence[Mapping[str, Any]],
    *,
    session_id: str,
    start_seq: int | None = None,
    end_seq: int | None = None,
    trigger: Literal["manual", "auto"] = "manual",
    tokens_before: int | None = None,
    call_record: Mapping[str, Any] | None = None,
    open_step_seq: int | None = None,
    compaction_id: str | None = None,
) -> tuple[list[PendingEvent], CompactionResult]:
    """The four events of a compaction of ``state``'s surface span ``start_seq..end_seq``
    (default: from the first surface node up to, not including, the last user prompt), and
    the result they make. `CompactionError` when the span is refused.

    ``call_record``: facts of the call that wrote the summary (``provider``, ``model``,
    ``usage``, ``rawOutput``, ``llmStreamCall`` ...), stored on ``compaction/summary``.
    ``open_step_seq``: the seq of the open step's ``step/start`` if known (else a node of the
    open step is known by the turn and step its data names)."""
    if trigger not in ("manual", "auto"):
        raise ValueError(f"trigger must be 'manual' or 'auto', not {trigger!r}")
    surface = state.surface
    order = surface.seqs
    start_seq, end_seq, first, last = _checked_span(state, start_seq, end_seq, open_step_seq)
    span = order[first : last + 1]
    blocks = _summary_blocks(summary)
    compaction_id = compaction_id or str(uuid.uuid4())
    n = state.next_seq
    turn = state.structure.open_turn
    shadowed = estimate_tokens([surface.node_message(seq) for seq in span])
    kept = [surface.node_message(seq) for seq in (*order[:first], *order[last + 1 :])]
    message = _summary_message(f"{session_id}:c{n + 2}", compaction_id, blocks, state.todos)
    after = estimate_tokens([*kept, UserMessage.model_validate(message)])
    before = tokens_before if tokens_before is not None else estimate_tokens(kept) + shadowed
    shadow = {
        "shadowedRange": {"start": start_seq, "end": end_seq},
        "shadowedSeqs": list(span),
        "shadowedTokenCount": shadowed,
    }
    start: dict[str, Any] = {
        "compactionId": compaction_id,
        "turn": turn,
        "trigger": trigger,
        "tokensBefore": before,
    }
    owned = {*shadow, "compactionId", "summary"}  # the record cannot override these
    record = {k: v for k, v in (call_record or {}).items() if k not in owned}
    events = [
        PendingEvent(COMPACTION_START, start),
        PendingEvent(
            COMPACTION_SUMMARY,
            {"compactionId": compaction_id, "summary": blocks, **shadow, **record},
        ),
        PendingEvent(
            USER_MESSAGE,
            message,
            {"op": "replace", "start": start_seq, "end": end_seq},
            (n, n + 1, *span),
        ),
        PendingEvent(
            COMPACTION_END, {"compactionId": compaction_id, "turn": turn, "tokensAfter": after}
        ),
    ]
    result = CompactionResult(compaction_id, n, n + 1, n + 2, n + 3, tuple(span), before, after)
    return events, result


def _summary_message(
    message_id: str,
    compaction_id: str,
    blocks: list[dict[str, Any]],
    todos: Sequence[TodoItem] | None,
) -> dict[str, Any]:
    """The ``user/message`` that takes the span's place: the summary, then the plan."""
    message_blocks = list(blocks)
    plan = plan_text(todos)
    if plan is not None:
        message_blocks.append({"type": "text", "text": plan})
    return {
        "id": message_id,
        "role": "user",
        "content": message_blocks,
        "source": {"kind": "plugin", "plugin": SUMMARY_PLUGIN, "compactionId": compaction_id},
    }


def _default_end(surface: SurfaceState) -> int:
    """The span's end when none is given: the node before the last user prompt (the last
    node when there is no prompt)."""
    order = surface.seqs
    end_seq = span_ending_before_turns(surface, 1)
    if end_seq is not None:
        return end_seq
    if any(_is_prompt(surface.node_message(s)) for s in order):
        raise CompactionError(
            f"nothing before the last user prompt (seq {order[0]}) to compact",
            seq=order[0],
            reason="empty",
        )
    return order[-1]


def _checked_span(
    state: LiveState, start_seq: int | None, end_seq: int | None, open_step_seq: int | None
) -> tuple[int, int, int, int]:
    """``(start seq, end seq, first position, last position)`` of the span to compact, after
    the checks that may refuse it (`CompactionError`)."""
    surface = state.surface
    order = surface.seqs
    if not order:
        raise CompactionError("the surface is empty: nothing to compact", seq=None, reason="empty")
    if end_seq is None:
        end_seq = _default_end(surface)
    if start_seq is None:
        start_seq = order[0]
    index = {seq: position for position, seq in enumerate(order)}
    for name, seq in (("start", start_seq), ("end", end_seq)):
        if seq not in index:
            raise CompactionError(
                f"span {name} seq {seq} is not on the surface", seq=seq, reason="not-on-surface"
            )
    first, last = index[start_seq], index[end_seq]
    if first > last:
        raise CompactionError(
            f"span start seq {start_seq} comes after end seq {end_seq} in surface order",
            seq=start_seq,
            reason="reversed",
        )
    for seq in order[first : last + 1] if state.structure.open_step is not None else ():
        if _in_open_step(surface.node_event(seq), state, open_step_seq):
            raise CompactionError(
                f"the span ends inside the open step {state.structure.open_step} "
                f"(seq {seq} belongs to it)",
                seq=seq,
                reason="open-step",
            )
    unanswered = frozenset(c.call_id for c in state.structure.unanswered_calls())
    found = _cut(surface, order, first, last, None, unanswered)
    if found is not None:
        raise CompactionError(
            f"span {start_seq}..{end_seq} is refused: {found[0]}", seq=found[1], reason="cuts-call"
        )
    return start_seq, end_seq, first, last


def failed_compaction(
    state: LiveState, error: str, *, trigger: Literal["manual", "auto"], tokens_before: int | None
) -> list[PendingEvent]:
    """The record of a compaction attempt that replaced nothing: ``compaction/start`` and a
    ``compaction/end`` with ``error``."""
    compaction_id = str(uuid.uuid4())
    turn = state.structure.open_turn
    start: dict[str, Any] = {"compactionId": compaction_id, "turn": turn, "trigger": trigger}
    if tokens_before is not None:
        start["tokensBefore"] = tokens_before
    return [
        PendingEvent(COMPACTION_START, start),
        PendingEvent(COMPACTION_END, {"compactionId": compaction_id, "turn": turn, "error": error}),
    ]


# -- pruning --------------------------------------------------------------------------------------


def _pruned_data(data: Mapping[str, Any], placeholder: str) -> dict[str, Any]:
    message = dict(data["message"])
    block = dict(message["content"][0])
    block["content"] = [{"type": "text", "text": placeholder}]
    message["content"] = [block]
    return {**data, "message": message}


def plan_prune(
    state: LiveState,
    *,
    before_seq: int | None = None,
    keep_last: int = 3,
    placeholder: str = DEFAULT_PLACEHOLDER,
) -> tuple[list[PendingEvent], PruneResult]:
    """The events that prune the old tool results on ``state``'s surface: every
    ``tool/result`` node below ``before_seq`` (default: all) except the ``keep_last`` latest
    results, and except results already pruned to ``placeholder``; inside an open turn only
    (`CompactionError` otherwise). Each gets a
    ``compaction/prune`` and a replacement that differs only in the result's content."""
    if keep_last < 0:
        raise ValueError("keep_last must be >= 0")
    if not isinstance(placeholder, str) or not placeholder.strip():
        raise ValueError("placeholder must be a non-empty string")
    if state.structure.open_turn is None:
        raise CompactionError(
            "tool results are pruned inside an open turn (a result rewrite needs one: "
            "docs/format.md, Turns and steps)",
            seq=None,
            reason="outside-turn",
        )
    surface = state.surface
    results = [seq for seq in surface.seqs if surface.node_event(seq).type == TOOL_RESULT]
    if keep_last:
        results = results[:-keep_last]
    if before_seq is not None:
        results = [seq for seq in results if seq < before_seq]
    marker = [TextBlock(text=placeholder)]
    events: list[PendingEvent] = []
    pruned: list[PrunedResult] = []
    n = state.next_seq
    for seq in results:
        event = surface.node_event(seq)
        message = surface.node_message(seq)
        block = message.content[0] if message is not None and message.content else None
        if not isinstance(block, ToolResultBlock) or list(block.content) == marker:
            continue
        events.append(
            PendingEvent(
                COMPACTION_PRUNE,
                {
                    "shadowedRange": {"start": seq, "end": seq},
                    "shadowedSeqs": [seq],
                    "shadowedTokenCount": estimate_tokens([message]),
                },
            )
        )
        events.append(
            PendingEvent(
                TOOL_RESULT,
                _pruned_data(event.data_copy(), placeholder),
                {"op": "replace", "start": seq, "end": seq},
                (seq,),
            )
        )
        pruned.append(PrunedResult(seq, n + len(events) - 1, block.tool_call_id))
    return events, PruneResult(tuple(pruned))
