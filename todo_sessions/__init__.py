"""todo_sessions: the append-only session log of an AI coding-agent harness.

Everything a session does is stored as typed events; projections rebuild the todo list and
the model's message history from them. See README.md and docs/.

The public names are the ones below (``__all__``); the subpackages (``store``, ``core``,
``agent``, ``tools``, ``providers``, ``web``) are implementation, with the exceptions their own
docstrings name (``todo_sessions.acp``, ``todo_sessions.web``, the ``providers`` formats).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The public names, written once: where each lives. `__all__` and the lazy lookup below are
# made from this table. Everything loads on first use (PEP 562), so `import todo_sessions`
# costs little: the store, alembic, pydantic models, the agent loop and the ACP SDK are
# imported when a name that needs them is first looked up.
_EXPORTS: dict[str, tuple[str, ...]] = {
    ".errors": (
        "AcknowledgedEventsLostError",
        "CheckpointError",
        "CompactionError",
        "CorruptSessionError",
        "EventsNotStoredError",
        "FormatUnsupportedError",
        "InvalidEventError",
        "LeaseLostError",
        "ModelAuthError",
        "ModelError",
        "ModelRequestError",
        "NamespaceError",
        "ProviderResponseError",
        "SchemaError",
        "SearchQueryError",
        "SeqConflictError",
        "SessionExistsError",
        "SessionLeasedError",
        "SessionNotFoundError",
        "StandbyServerError",
        "StoreBusyError",
        "StoreError",
        "StoreUnavailableError",
        "StructureError",
        "TodoSessionsError",
    ),
    ".acp.agent": ("TodoSessionsAgent",),
    ".acp.mapping": ("todos_to_plan",),
    ".agent.adapters": (
        "AnthropicModel",
        "OpenAIChatModel",
        "OpenAIResponsesModel",
        "RetryPolicy",
        "model_from_spec",
    ),
    ".agent.loop": ("AgentLoop", "CompactionPolicy", "TurnOutcome"),
    ".agent.model": ("Model", "ScriptedModel", "ScriptedResponse"),
    ".core.catalog": (
        "EVENT_TYPES",
        "FORMAT_VERSION",
        "EventType",
        "register_event_type",
        "validate_event",
    ),
    ".core.checkpoint": ("LiveState",),
    ".core.compaction": ("CompactionResult", "PruneResult"),
    ".core.deltas": (
        "Finish",
        "ModelDelta",
        "ReasoningDelta",
        "TextDelta",
        "ToolCallDelta",
        "content_from_deltas",
    ),
    ".core.envelope": ("SessionEvent", "SurfaceOp", "SurfaceReplace"),
    ".core.header": ("SessionHeader",),
    ".core.messages": ("AssistantMessage", "ContentBlock", "Message", "UserMessage"),
    ".core.repair": ("interrupted_turn_closers",),
    ".core.structure": ("check_structure",),
    ".core.surface": (
        "MessageSnapshot",
        "Replacement",
        "SurfaceFold",
        "derive_messages",
        "fold_surface",
    ),
    ".core.todos": ("TodoItem", "current_todos", "render_todos", "standing_plan"),
    ".recovery": ("RecoveryResult", "recover"),
    ".service": ("SessionService",),
    ".session": ("Session",),
    ".store.leases": ("Lease", "LeaseHolder"),
    ".store.migrate": ("alembic_include_name", "alembic_include_object", "migrate", "migrate_on"),
    ".store.namespace": ("Namespace",),
    ".store.results": (
        "CheckpointInfo",
        "PruneReport",
        "ResumedState",
        "SearchHit",
        "SessionSummary",
        "SessionUsage",
        "StoredLog",
    ),
    ".store.schema": ("metadata",),
    ".store.store": ("SessionStore",),
    ".sync": ("SyncSessionService", "SyncSessionStore"),
    ".tools": ("TodoWriteTool", "ToolContext", "ToolRegistry", "ToolResult"),
}

_LAZY: dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted([*_LAZY, "__version__"])

if TYPE_CHECKING:  # the same names for type checkers (tests/test_light_import.py holds them equal)
    from .acp.agent import TodoSessionsAgent as TodoSessionsAgent
    from .acp.mapping import todos_to_plan as todos_to_plan
    from .agent.adapters import AnthropicModel as AnthropicModel
    from .agent.adapters import OpenAIChatModel as OpenAIChatModel
    from .agent.adapters import OpenAIResponsesModel as OpenAIResponsesModel
    from .agent.adapters import RetryPolicy as RetryPolicy
    from .agent.adapters import model_from_spec as model_from_spec
    from .agent.loop import AgentLoop as AgentLoop
    from .agent.loop import CompactionPolicy as CompactionPolicy
    from .agent.loop import TurnOutcome as TurnOutcome
    from .agent.model import Model as Model
    from .agent.model import ScriptedModel as ScriptedModel
    from .agent.model import ScriptedResponse as ScriptedResponse
    from .core.catalog import EVENT_TYPES as EVENT_TYPES
    from .core.catalog import FORMAT_VERSION as FORMAT_VERSION
    from .core.catalog import EventType as EventType
    from .core.catalog import register_event_type as register_event_type
    from .core.catalog import validate_event as validate_event
    from .core.checkpoint import LiveState as LiveState
    from .core.compaction import CompactionResult as CompactionResult
    from .core.compaction import PruneResult as PruneResult
    from .core.deltas import Finish as Finish
    from .core.deltas import ModelDelta as ModelDelta
    from .core.deltas import ReasoningDelta as ReasoningDelta
    from .core.deltas import TextDelta as TextDelta
    from .core.deltas import ToolCallDelta as ToolCallDelta
    from .core.deltas import content_from_deltas as content_from_deltas
    from .core.envelope import SessionEvent as SessionEvent
    from .core.envelope import SurfaceOp as SurfaceOp
    from .core.envelope import SurfaceReplace as SurfaceReplace
    from .core.header import SessionHeader as SessionHeader
    from .core.messages import AssistantMessage as AssistantMessage
    from .core.messages import ContentBlock as ContentBlock
    from .core.messages import Message as Message
    from .core.messages import UserMessage as UserMessage
    from .core.repair import interrupted_turn_closers as interrupted_turn_closers
    from .core.structure import check_structure as check_structure
    from .core.surface import MessageSnapshot as MessageSnapshot
    from .core.surface import Replacement as Replacement
    from .core.surface import SurfaceFold as SurfaceFold
    from .core.surface import derive_messages as derive_messages
    from .core.surface import fold_surface as fold_surface
    from .core.todos import TodoItem as TodoItem
    from .core.todos import current_todos as current_todos
    from .core.todos import render_todos as render_todos
    from .core.todos import standing_plan as standing_plan
    from .errors import AcknowledgedEventsLostError as AcknowledgedEventsLostError
    from .errors import CheckpointError as CheckpointError
    from .errors import CompactionError as CompactionError
    from .errors import CorruptSessionError as CorruptSessionError
    from .errors import EventsNotStoredError as EventsNotStoredError
    from .errors import FormatUnsupportedError as FormatUnsupportedError
    from .errors import InvalidEventError as InvalidEventError
    from .errors import LeaseLostError as LeaseLostError
    from .errors import ModelAuthError as ModelAuthError
    from .errors import ModelError as ModelError
    from .errors import ModelRequestError as ModelRequestError
    from .errors import NamespaceError as NamespaceError
    from .errors import ProviderResponseError as ProviderResponseError
    from .errors import SchemaError as SchemaError
    from .errors import SearchQueryError as SearchQueryError
    from .errors import SeqConflictError as SeqConflictError
    from .errors import SessionExistsError as SessionExistsError
    from .errors import SessionLeasedError as SessionLeasedError
    from .errors import SessionNotFoundError as SessionNotFoundError
    from .errors import StandbyServerError as StandbyServerError
    from .errors import StoreBusyError as StoreBusyError
    from .errors import StoreError as StoreError
    from .errors import StoreUnavailableError as StoreUnavailableError
    from .errors import StructureError as StructureError
    from .errors import TodoSessionsError as TodoSessionsError
    from .recovery import RecoveryResult as RecoveryResult
    from .recovery import recover as recover
    from .service import SessionService as SessionService
    from .session import Session as Session
    from .store.leases import Lease as Lease
    from .store.leases import LeaseHolder as LeaseHolder
    from .store.migrate import alembic_include_name as alembic_include_name
    from .store.migrate import alembic_include_object as alembic_include_object
    from .store.migrate import migrate as migrate
    from .store.migrate import migrate_on as migrate_on
    from .store.namespace import Namespace as Namespace
    from .store.results import CheckpointInfo as CheckpointInfo
    from .store.results import PruneReport as PruneReport
    from .store.results import ResumedState as ResumedState
    from .store.results import SearchHit as SearchHit
    from .store.results import SessionSummary as SessionSummary
    from .store.results import SessionUsage as SessionUsage
    from .store.results import StoredLog as StoredLog
    from .store.schema import metadata as metadata
    from .store.store import SessionStore as SessionStore
    from .sync import SyncSessionService as SyncSessionService
    from .sync import SyncSessionStore as SyncSessionStore
    from .tools import TodoWriteTool as TodoWriteTool
    from .tools import ToolContext as ToolContext
    from .tools import ToolRegistry as ToolRegistry
    from .tools import ToolResult as ToolResult


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'todo_sessions' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return list(__all__)
