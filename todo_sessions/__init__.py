"""todo_sessions: the append-only session log of an AI coding-agent harness.

Everything a session does is stored as typed events; projections rebuild the todo list and
the model's message history from them. See README.md and docs/.

This module is the persistence library's surface (``__all__``): events and their catalog,
projections, the store, live sessions, the service and the blocking API. The other products
live in subpackages with surfaces of their own:

- `todo_sessions.harness`: the agent loop, the model protocol and adapters, the provider
  formats and the tools (``todo_write``);
- `todo_sessions.acp`: the Agent Client Protocol bridge (extra ``[acp]``);
- `todo_sessions.web`: the browser viewer (extra ``[web]``);
- `todo_sessions.integrations`: session backends for the Claude Agent SDK and the OpenAI
  Agents SDK (extras ``[claude]``, ``[openai-agents]``);
- `todo_sessions.importers`: other agents' session files (Claude Code, Codex) into the store;
- `todo_sessions.alembic`: the hooks for a host application's own alembic environment;
- `todo_sessions.errors`: every exception of the package.

Other modules (``core``, ``store``, and the ``_``-named ones) are implementation: import from
here.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The public names, written once: where each lives. `__all__` and the lazy lookup below are
# made from this table; every name loads on first use (PEP 562).
_EXPORTS: dict[str, tuple[str, ...]] = {
    ".errors": (
        "AcknowledgedEventsLostError",
        "ChainKeyError",
        "CheckpointError",
        "CompactionError",
        "CorruptSessionError",
        "EventsNotStoredError",
        "FormatUnsupportedError",
        "ImportLimitError",
        "InvalidEventError",
        "LeaseLostError",
        "NamespaceError",
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
    ".core.catalog": (
        "EVENT_TYPES",
        "FORMAT_VERSION",
        "EventType",
        "register_event_type",
        "validate_event",
    ),
    ".core.checkpoint": ("LiveState",),
    ".core.compaction": (
        "CompactionResult",
        "PruneResult",
    ),
    ".core.envelope": (
        "SessionEvent",
        "SurfaceOp",
        "SurfaceReplace",
    ),
    ".core.header": ("SessionHeader",),
    ".core.messages": (
        "AssistantMessage",
        "ContentBlock",
        "Message",
        "UserMessage",
    ),
    ".core.repair": ("interrupted_turn_closers",),
    ".core.structure": ("check_structure",),
    ".core.surface": (
        "MessageSnapshot",
        "Replacement",
        "SurfaceFold",
        "derive_messages",
        "fold_surface",
    ),
    ".core.todos": (
        "TodoItem",
        "current_todos",
        "render_todos",
        "standing_plan",
    ),
    "._integrity": (
        "VerifyReport",
        "verify_all",
        "verify_session",
    ),
    "._jsonl": (
        "ImportResult",
        "export_lines",
        "import_lines",
        "parse_lines",
        "reference_lines",
    ),
    "._recovery": (
        "RecoveryResult",
        "recover",
    ),
    "._service": ("SessionService",),
    "._session": ("Session",),
    ".store.children": ("ChildSession",),
    ".store.leases": (
        "Lease",
        "LeaseHolder",
    ),
    ".store.migrate": ("migrate",),
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
    ".store.store": ("SessionStore",),
    ".sync": (
        "SyncSessionService",
        "SyncSessionStore",
    ),
}

_LAZY: dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted([*_LAZY, "__version__"])

if TYPE_CHECKING:  # the same names for type checkers (tests/test_light_import.py holds them equal)
    from ._integrity import VerifyReport as VerifyReport
    from ._integrity import verify_all as verify_all
    from ._integrity import verify_session as verify_session
    from ._jsonl import ImportResult as ImportResult
    from ._jsonl import export_lines as export_lines
    from ._jsonl import import_lines as import_lines
    from ._jsonl import parse_lines as parse_lines
    from ._jsonl import reference_lines as reference_lines
    from ._recovery import RecoveryResult as RecoveryResult
    from ._recovery import recover as recover
    from ._service import SessionService as SessionService
    from ._session import Session as Session
    from .core.catalog import EVENT_TYPES as EVENT_TYPES
    from .core.catalog import FORMAT_VERSION as FORMAT_VERSION
    from .core.catalog import EventType as EventType
    from .core.catalog import register_event_type as register_event_type
    from .core.catalog import validate_event as validate_event
    from .core.checkpoint import LiveState as LiveState
    from .core.compaction import CompactionResult as CompactionResult
    from .core.compaction import PruneResult as PruneResult
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
    from .errors import ChainKeyError as ChainKeyError
    from .errors import CheckpointError as CheckpointError
    from .errors import CompactionError as CompactionError
    from .errors import CorruptSessionError as CorruptSessionError
    from .errors import EventsNotStoredError as EventsNotStoredError
    from .errors import FormatUnsupportedError as FormatUnsupportedError
    from .errors import ImportLimitError as ImportLimitError
    from .errors import InvalidEventError as InvalidEventError
    from .errors import LeaseLostError as LeaseLostError
    from .errors import NamespaceError as NamespaceError
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
    from .store.children import ChildSession as ChildSession
    from .store.leases import Lease as Lease
    from .store.leases import LeaseHolder as LeaseHolder
    from .store.migrate import migrate as migrate
    from .store.namespace import Namespace as Namespace
    from .store.results import CheckpointInfo as CheckpointInfo
    from .store.results import PruneReport as PruneReport
    from .store.results import ResumedState as ResumedState
    from .store.results import SearchHit as SearchHit
    from .store.results import SessionSummary as SessionSummary
    from .store.results import SessionUsage as SessionUsage
    from .store.results import StoredLog as StoredLog
    from .store.store import SessionStore as SessionStore
    from .sync import SyncSessionService as SyncSessionService
    from .sync import SyncSessionStore as SyncSessionStore


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return list(__all__)
