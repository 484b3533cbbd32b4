"""todo_sessions: the append-only session log of an AI coding-agent harness.

Everything a session does is stored as typed events; projections rebuild the todo list and
the model's message history from them. See README.md and docs/.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .errors import (
    CheckpointError,
    CorruptSessionError,
    EventsNotStoredError,
    FormatUnsupportedError,
    InvalidEventError,
    LeaseLostError,
    NamespaceError,
    SchemaError,
    SeqConflictError,
    SessionExistsError,
    SessionLeasedError,
    SessionNotFoundError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    StructureError,
    TodoSessionsError,
)

__version__ = "0.1.0"

# Everything else loads on first use (PEP 562), so `import todo_sessions` costs little: the
# store, alembic, pydantic models, the agent loop and the ACP SDK are imported when a name
# that needs them is first looked up.
_LAZY: dict[str, str] = {
    "AgentLoop": ".agent.loop",
    "AnthropicModel": ".agent.adapters",
    "AssistantMessage": ".core.messages",
    "ContentBlock": ".core.messages",
    "EVENT_TYPES": ".core.catalog",
    "EventType": ".core.catalog",
    "FORMAT_VERSION": ".core.catalog",
    "Finish": ".agent.model",
    "Lease": ".store.leases",
    "LeaseHolder": ".store.leases",
    "Message": ".core.messages",
    "MessageSnapshot": ".core.surface",
    "Model": ".agent.model",
    "ModelDelta": ".agent.model",
    "OpenAIChatModel": ".agent.adapters",
    "ReasoningDelta": ".agent.model",
    "RecoveryResult": ".recovery",
    "ScriptedModel": ".agent.model",
    "ScriptedResponse": ".agent.model",
    "Session": ".session",
    "SessionEvent": ".core.envelope",
    "SessionHeader": ".core.header",
    "SessionService": ".service",
    "SessionStore": ".store.store",
    "SessionSummary": ".store.results",
    "SessionUsage": ".store.results",
    "StoredLog": ".store.results",
    "SurfaceOp": ".core.envelope",
    "SyncSessionService": ".sync",
    "SyncSessionStore": ".sync",
    "SurfaceReplace": ".core.envelope",
    "TextDelta": ".agent.model",
    "TodoItem": ".core.todos",
    "TodoWriteTool": ".tools",
    "ToolCallDelta": ".agent.model",
    "ToolContext": ".tools",
    "ToolRegistry": ".tools",
    "ToolResult": ".tools",
    "TurnOutcome": ".agent.loop",
    "UserMessage": ".core.messages",
    "check_structure": ".core.structure",
    "current_todos": ".core.todos",
    "derive_messages": ".core.surface",
    "fold_surface": ".core.surface",
    "interrupted_turn_closers": ".core.repair",
    "alembic_include_name": ".store.migrate",
    "alembic_include_object": ".store.migrate",
    "metadata": ".store.schema",
    "Namespace": ".store.namespace",
    "migrate": ".store.migrate",
    "migrate_on": ".store.migrate",
    "recover": ".recovery",
    "register_event_type": ".core.catalog",
    "render_todos": ".core.todos",
    "standing_plan": ".core.todos",
    "todos_to_plan": ".acp.mapping",
    "validate_event": ".core.catalog",
}

if TYPE_CHECKING:
    from .acp.mapping import todos_to_plan
    from .agent.adapters import AnthropicModel, OpenAIChatModel
    from .agent.loop import (
        AgentLoop,
        TurnOutcome,
    )
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
    from .core.envelope import (
        SessionEvent,
        SurfaceOp,
        SurfaceReplace,
    )
    from .core.header import SessionHeader
    from .core.messages import (
        AssistantMessage,
        ContentBlock,
        Message,
        UserMessage,
    )
    from .core.repair import interrupted_turn_closers
    from .core.structure import check_structure
    from .core.surface import (
        MessageSnapshot,
        derive_messages,
        fold_surface,
    )
    from .core.todos import (
        TodoItem,
        current_todos,
        render_todos,
        standing_plan,
    )
    from .recovery import RecoveryResult, recover
    from .service import SessionService
    from .session import Session
    from .store.leases import Lease, LeaseHolder
    from .store.migrate import (
        alembic_include_name,
        alembic_include_object,
        migrate,
        migrate_on,
    )
    from .store.namespace import Namespace
    from .store.results import (
        SessionSummary,
        SessionUsage,
        StoredLog,
    )
    from .store.schema import metadata
    from .store.store import SessionStore
    from .sync import SyncSessionService, SyncSessionStore
    from .tools import (
        TodoWriteTool,
        ToolContext,
        ToolRegistry,
        ToolResult,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'todo_sessions' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # looked up once
    return value


__all__ = [
    "EVENT_TYPES",
    "FORMAT_VERSION",
    "AgentLoop",
    "AnthropicModel",
    "AssistantMessage",
    "CheckpointError",
    "ContentBlock",
    "CorruptSessionError",
    "EventType",
    "EventsNotStoredError",
    "Finish",
    "FormatUnsupportedError",
    "InvalidEventError",
    "Lease",
    "LeaseHolder",
    "LeaseLostError",
    "Message",
    "MessageSnapshot",
    "Model",
    "ModelDelta",
    "Namespace",
    "NamespaceError",
    "OpenAIChatModel",
    "ReasoningDelta",
    "RecoveryResult",
    "SchemaError",
    "ScriptedModel",
    "ScriptedResponse",
    "SeqConflictError",
    "Session",
    "SessionEvent",
    "SessionExistsError",
    "SessionHeader",
    "SessionLeasedError",
    "SessionNotFoundError",
    "SessionService",
    "SessionStore",
    "SessionSummary",
    "SessionUsage",
    "StoreBusyError",
    "StoreError",
    "StoreUnavailableError",
    "StoredLog",
    "StructureError",
    "SurfaceOp",
    "SurfaceReplace",
    "SyncSessionService",
    "SyncSessionStore",
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
    "alembic_include_name",
    "alembic_include_object",
    "check_structure",
    "current_todos",
    "derive_messages",
    "fold_surface",
    "interrupted_turn_closers",
    "metadata",
    "migrate",
    "migrate_on",
    "recover",
    "register_event_type",
    "render_todos",
    "standing_plan",
    "todos_to_plan",
    "validate_event",
]

# -- compaction (docs/format.md, "Compaction") ------------------------------------------------
from .errors import CompactionError  # noqa: E402

_LAZY.update(
    {
        "CompactionPolicy": ".agent.loop",
        "CompactionResult": ".core.compaction",
        "PruneResult": ".core.compaction",
    }
)
if TYPE_CHECKING:
    from .agent.loop import CompactionPolicy
    from .core.compaction import CompactionResult, PruneResult
__all__ += ["CompactionError", "CompactionPolicy", "CompactionResult", "PruneResult"]


def __dir__() -> list[str]:
    return sorted(__all__)
