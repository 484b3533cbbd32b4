"""The todo list for a client that advertised ``plan``: ``plan_update`` / ``plan_removed``.

A client without the capability gets the legacy ``plan`` (the whole list; an emptied list is
an empty ``plan``). One that has it gets, for the same list, a ``plan_update`` of the item
plan `PLAN_ID` (stable per session: a session has one todo list) and, when the list is
emptied, ``plan_removed`` of that plan, never the legacy ``plan`` too. A subagent's list is
sent on its own session id, so it is a plan of its own.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PLAN_ID", "plan_operation"]

PLAN_ID = "main"
"""The ``planId`` of a session's todo list."""


def plan_operation(plan: dict[str, Any]) -> dict[str, Any]:
    """The legacy ``plan`` update (wire JSON) as the plan operation that replaces it."""
    entries = plan.get("entries") or []
    if not entries:
        return {"sessionUpdate": "plan_removed", "planId": PLAN_ID}
    return {
        "sessionUpdate": "plan_update",
        "plan": {"type": "items", "planId": PLAN_ID, "entries": entries},
    }
