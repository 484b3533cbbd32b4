"""Tools that ask the user first: `PermissionGate` and ``session/request_permission``.

A tool whose ``requires_permission`` attribute is true runs only after the client allowed it
(allow once, allow always for the session, reject); a rejected (or unanswerable) request is
an error result the model reads: "not run: …".
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from ..harness.tools.base import ToolContext, ToolResult
from ..harness.tools.registry import ToolRegistry
from . import _sdk

__all__ = ["AskPermission", "PermissionGate", "ask_client"]

logger = logging.getLogger("todo_sessions.acp")

PermissionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]
_PERMISSION_OPTIONS: tuple[tuple[str, str, PermissionKind], ...] = (
    ("allow-once", "Allow", "allow_once"),
    ("allow-always", "Always allow in this session", "allow_always"),
    ("reject-once", "Reject", "reject_once"),
)

AskPermission = Callable[[str, Any, ToolContext], Awaitable[str | None]]
"""``ask(name, args, context)``: None when the call may run, else why not."""


class PermissionGate(ToolRegistry):
    """The agent's tools; those with ``requires_permission`` ask the client first."""

    def __init__(self, tools: ToolRegistry, ask: AskPermission) -> None:
        super().__init__()
        for name in tools.names():
            tool = tools.get(name)
            if tool is not None:
                self.register(tool)
        self._ask = ask

    async def execute(
        self, name: str, args: dict[str, Any] | str | None, context: ToolContext
    ) -> ToolResult:
        tool = self.get(name)
        if tool is not None and getattr(tool, "requires_permission", False):
            refused = await self._ask(name, args, context)
            if refused is not None:
                return ToolResult.error(f"not run: {refused}")
        return await super().execute(name, args, context)


async def ask_client(
    conn: Any,
    session_id: str,
    call_id: str,
    name: str,
    args: Any,
    shown: Mapping[str, Any] | None,
) -> tuple[str | None, bool]:
    """Ask the client whether call ``call_id`` of tool ``name`` may run (``shown``: how the
    tool presents the call). ``(None, always)`` when allowed (``always``: for the rest of
    the session), else ``(why not, False)``."""
    shown = shown or {}
    kind = shown.get("kind")
    tool_call = _sdk.ToolCallUpdate(
        tool_call_id=call_id,
        title=shown.get("title") or name,
        kind=kind if kind in _sdk.TOOL_KINDS else "other",
        status="pending",
        raw_input=shown.get("raw_input", args),
    )
    options = [
        _sdk.PermissionOption(option_id=option, name=label, kind=kind_)
        for option, label, kind_ in _PERMISSION_OPTIONS
    ]
    try:
        response = await conn.request_permission(
            session_id=session_id, tool_call=tool_call, options=options
        )
    except Exception as exc:
        logger.warning("session/request_permission failed: %s", exc)
        return f"{name} needs the user's permission and the client could not be asked", False
    outcome = response.outcome
    if getattr(outcome, "outcome", None) != "selected":
        return "the permission request was cancelled", False
    if outcome.option_id in ("allow-once", "allow-always"):
        return None, outcome.option_id == "allow-always"
    return f"the user did not allow this call of {name}", False
