"""Agent Client Protocol bridge: event → ``session/update`` mapping and the agent.

See docs/design.md, "ACP bridge".

Every SDK type is imported in `todo_sessions.acp._sdk` only.
"""

from . import _sdk  # noqa: F401  (first: without the [acp] extra, its one line names that extra)
from .agent import TodoSessionsAgent
from .mapping import event_to_updates, replay_updates, todos_to_plan, update_to_wire

__all__ = [
    "TodoSessionsAgent",
    "event_to_updates",
    "replay_updates",
    "todos_to_plan",
    "update_to_wire",
]
