"""Subagent sessions as ``subagent_update`` on the parent. Pure: no I/O.

A ``subagent`` tool call runs a child session; the parent's ``tool/call`` names it
(``subagentSessionId``). For a client that advertised ``clientCapabilities.subagents`` the
``tool_call`` of such a call is followed by a ``subagent_update`` announcing the child (its
session id, title, ``state`` running), and its ``tool_call_update`` by one saying it is idle
with its stop reason: ``end_turn``, ``cancelled`` when the call was cancelled or never ran,
else ``error`` with the result's text. A call cancelled or closed by the crash repair does not
know how its child ended: its ``cancelled`` is then settled from the child's own log
(`child_idle` of its last ``turn/end``, the same end `SessionStore.children` reads), so a
child that completed before its parent was killed is announced ``end_turn`` (by the caller,
`todo_sessions.acp.relay.settled`: it reads the child's log). Live and on replay alike (the
announcement keeps its place in the parent's log); the child's own updates go on the child's
session id (`todo_sessions.acp.relay`).

A call the tool refused (or that never ran) started no child: it is announced neither
running nor idle. A replay is told which children exist (``exists``); live, the relay holds
the announcement until the child exists or the call's result is logged
(`todo_sessions.acp.relay.ChildRelay`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..core.envelope import SessionEvent
from ..core.types import TOOL_CALL, TOOL_RESULT, TURN_END

__all__ = ["CANCELLED_CODES", "SubagentCalls", "child_idle", "child_of"]

CANCELLED_CODES = frozenset(("TOOL_CANCELLED", "TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN"))
"""Result error codes of a call that was cancelled or never ran (or whose end is unknown)."""

_TITLE_KEYS = ("title", "task", "description", "prompt")


def child_of(event: SessionEvent) -> str | None:
    """The child session a ``tool/call`` event runs, or None."""
    if event.type != TOOL_CALL:
        return None
    child = event.data.get("subagentSessionId")
    return child if isinstance(child, str) and child else None


def _title(arguments: Any) -> str | None:
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        return None
    if not isinstance(args, dict):
        return None
    for key in _TITLE_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip().splitlines()[0][:200]
    return None


def _result_text(data: dict[str, Any]) -> str:
    message = data.get("message") or {}
    texts: list[str] = []
    for block in message.get("content") or []:
        for inner in block.get("content") or [] if isinstance(block, dict) else []:
            if isinstance(inner, dict) and isinstance(inner.get("text"), str):
                texts.append(inner["text"])
    return "\n".join(texts) or "the subagent failed"


def _idle(data: dict[str, Any], failed: bool) -> dict[str, Any]:
    error = data.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    if code in CANCELLED_CODES:
        return {"state": "idle", "stopReason": "cancelled"}
    if failed:
        message = _result_text(data)
        return {
            "state": "idle",
            "stopReason": "error",
            "error": {"code": -32603, "message": message},
        }
    return {"state": "idle", "stopReason": "end_turn"}


def child_idle(last: SessionEvent | None) -> dict[str, Any] | None:
    """The idle state a child's own last ``turn/start`` or ``turn/end`` says: None while its
    last turn is open; ``end_turn`` for a completed turn, ``cancelled`` for an aborted or
    interrupted one, else ``error`` with the turn's error (as `SessionStore.children` counts
    completed, aborted, interrupted and failed)."""
    if last is None or last.type != TURN_END:
        return None
    reason = last.data.get("reason")
    kind = reason.get("kind") if isinstance(reason, dict) else None
    if kind == "completed":
        return {"state": "idle", "stopReason": "end_turn"}
    if kind in ("aborted", "interrupted"):
        return {"state": "idle", "stopReason": "cancelled"}
    error = reason.get("error") if isinstance(reason, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    text = message if isinstance(message, str) and message else "the subagent failed"
    return {"state": "idle", "stopReason": "error", "error": {"code": -32603, "message": text}}


class SubagentCalls:
    """The subagent calls of one session shown to a client so far (call id → child id)."""

    __slots__ = ("calls", "children", "exists")

    def __init__(self, exists: Callable[[str], bool] | None = None) -> None:
        self.children: dict[str, str] = {}
        self.calls: dict[str, tuple[str, int]] = {}
        """Child id -> the call id and seq of the ``tool/call`` that announced it."""
        self.exists = exists
        """Whether a child session exists (None: announce every child named)."""

    def updates(self, event: SessionEvent, shown: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The ``subagent_update`` that follows ``shown`` (the event's own wire updates)."""
        if not shown:
            return []
        if event.type == TOOL_CALL:
            child = child_of(event)
            if child is None or (self.exists is not None and not self.exists(child)):
                return []
            call_id = str(event.data.get("callId"))
            self.children[call_id] = child
            self.calls[child] = (call_id, event.seq)
            update: dict[str, Any] = {"sessionUpdate": "subagent_update", "sessionId": child}
            title = _title(event.data.get("arguments"))
            if title is not None:
                update["title"] = title
            update["state"] = {"state": "running"}
            return [update]
        if event.type == TOOL_RESULT:
            answered = shown[0].get("toolCallId")
            ended = self.children.pop(str(answered), None)
            if ended is None:
                return []
            failed = shown[0].get("status") == "failed"
            state = _idle(event.data, failed)
            return [{"sessionUpdate": "subagent_update", "sessionId": ended, "state": state}]
        return []
