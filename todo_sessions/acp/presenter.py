"""What one client is sent for a session's events: `Presenter`. Pure: no I/O.

`todo_sessions.acp.mapping.UpdateMapper` gives the legacy updates (what a client that
advertises nothing gets, unchanged); `Presenter` adds what the client opted into
(`ClientFeatures`): plan operations instead of the legacy ``plan``
(`todo_sessions.acp.plans`), compaction updates (`todo_sessions.acp.compaction_updates`) and
subagent announcements (`todo_sessions.acp.subagents`). The live stream of a turn and the
replay of ``session/load`` feed the same events through a presenter each, so both send the
same updates, as wire JSON, in the same order.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ..core.envelope import SessionEvent
from ..core.todos import TodoItem
from ..core.types import COMPACTION_END, TODO_WRITE, TOOL_CALL, TOOL_RESULT, USER_MESSAGE
from .capabilities import ClientFeatures
from .compaction_updates import COMPACTION_KINDS, compaction_updates
from .mapping import UpdateMapper, todos_to_plan, update_to_wire
from .plans import plan_operation
from .shown import PresentCall
from .subagents import SubagentCalls

__all__ = ["Presenter"]


class Presenter:
    """The wire updates of one session's log for one client, fed event by event in order."""

    __slots__ = ("_compacting", "_subagents", "features", "mapper")

    def __init__(
        self,
        features: ClientFeatures | None = None,
        *,
        present_call: PresentCall | None = None,
        children: Collection[str] | None = None,
    ) -> None:
        """``children``: the child sessions that exist (a replay's; None: live, every child
        a call names is announced, the relay holding back those never started)."""
        self.features = features or ClientFeatures()
        self.mapper = UpdateMapper(present_call=present_call)
        self._compacting = False
        self._subagents = SubagentCalls(None if children is None else children.__contains__)

    def feed(self, event: SessionEvent) -> list[dict[str, Any]]:
        """The updates ``event`` shows the client (often none), as wire JSON."""
        kind = event.type
        features = self.features
        if kind in COMPACTION_KINDS:
            self._compacting = kind != COMPACTION_END
            return compaction_updates(event) if features.compaction else []
        if (
            features.compaction
            and self._compacting
            and kind == USER_MESSAGE
            and event.surface_op not in (None, "append")
        ):
            return []  # the summary: shown as the compaction's
        wire = self.mapper.feed_wire(event)
        if features.plans and kind == TODO_WRITE:
            wire = [plan_operation(u) if u["sessionUpdate"] == "plan" else u for u in wire]
        elif features.subagents and kind in (TOOL_CALL, TOOL_RESULT):
            wire = wire + self._subagents.updates(event, wire)
        return wire

    def live(self) -> Presenter:
        """This presenter, fed live from now on (a replay's: every child a call names is
        announced, the relay holding back those never started). Returns itself."""
        self._subagents.exists = None
        return self

    def subagent_call(self, child_id: str) -> tuple[str, int] | None:
        """The call id and seq of the ``tool/call`` that announced ``child_id``, if any."""
        return self._subagents.calls.get(child_id)

    def plan(self, todos: Sequence[TodoItem]) -> dict[str, Any]:
        """The todo list sent again at the start of a prompt, as this client wants it."""
        wire = update_to_wire(todos_to_plan(todos))
        return plan_operation(wire) if self.features.plans else wire
