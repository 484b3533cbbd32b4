"""todo_sessions: the append-only session log of an AI coding-agent harness.

Everything a session does is stored as typed events; projections rebuild the todo list and
the model's message history from them. See README.md and docs/.
"""

from typing import TYPE_CHECKING, Any

from .agent.loop import AgentLoop, TurnOutcome
from .agent.model import (
    Finish,
    Model,
    ModelDelta,
    ReasoningDelta,
    ScriptedModel,
    ScriptedResponse,
    TextDelta,
    ToolCallDelta,
)
from .core.catalog import (
    EVENT_TYPES,
    FORMAT_VERSION,
    EventType,
    register_event_type,
    validate_event,
)
from .core.envelope import SessionEvent, SurfaceOp, SurfaceReplace
from .core.header import SessionHeader
from .core.messages import (
    AssistantMessage,
    ContentBlock,
    Message,
    UserMessage,
)
from .core.repair import interrupted_turn_closers
from .core.structure import check_structure
from .core.surface import MessageSnapshot, derive_messages, fold_surface
from .core.todos import TodoItem, current_todos, render_todos, standing_plan
from .errors import (
    CorruptSessionError,
    FormatUnsupportedError,
    InvalidEventError,
    SchemaError,
    SeqConflictError,
    SessionExistsError,
    SessionNotFoundError,
    StoreBusyError,
    StoreError,
    StructureError,
    TodoSessionsError,
)
from .service import SessionService
from .session import Session
from .store.migrate import migrate
from .store.results import SessionSummary, StoredLog
from .store.store import SessionStore
from .tools import TodoWriteTool, ToolContext, ToolRegistry, ToolResult

__version__ = "0.1.0"


if TYPE_CHECKING:
    from .acp.mapping import todos_to_plan


def __getattr__(name: str) -> Any:
    # The ACP SDK takes half a second to import: load it only when the bridge is used.
    if name == "todos_to_plan":
        from .acp.mapping import todos_to_plan

        return todos_to_plan
    raise AttributeError(f"module 'todo_sessions' has no attribute {name!r}")


__all__ = [
    "EVENT_TYPES",
    "FORMAT_VERSION",
    "AgentLoop",
    "AssistantMessage",
    "ContentBlock",
    "CorruptSessionError",
    "EventType",
    "Finish",
    "FormatUnsupportedError",
    "InvalidEventError",
    "Message",
    "MessageSnapshot",
    "Model",
    "ModelDelta",
    "ReasoningDelta",
    "SchemaError",
    "ScriptedModel",
    "ScriptedResponse",
    "SeqConflictError",
    "Session",
    "SessionEvent",
    "SessionExistsError",
    "SessionHeader",
    "SessionNotFoundError",
    "SessionService",
    "SessionStore",
    "SessionSummary",
    "StoreBusyError",
    "StoreError",
    "StoredLog",
    "StructureError",
    "SurfaceOp",
    "SurfaceReplace",
    "TextDelta",
    "TodoItem",
    "TodoSessionsError",
    "TodoWriteTool",
    "ToolCallDelta",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "TurnOutcome",
    "UserMessage",
    "__version__",
    "check_structure",
    "current_todos",
    "derive_messages",
    "fold_surface",
    "interrupted_turn_closers",
    "migrate",
    "register_event_type",
    "render_todos",
    "standing_plan",
    "todos_to_plan",
    "validate_event",
]


def __dir__() -> list[str]:
    return sorted(__all__)
