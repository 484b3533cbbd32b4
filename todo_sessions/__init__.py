"""todo_sessions: the append-only session log of an AI coding-agent harness.

Everything a session does is stored as typed events; projections rebuild the todo list and
the model's message history from them. See README.md and SPEC.md.
"""

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
from .core.todos import TodoItem
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
from .store.migrate import migrate
from .store.results import SessionSummary, StoredLog
from .store.store import SessionStore

__version__ = "0.1.0"

__all__ = [
    "EVENT_TYPES",
    "FORMAT_VERSION",
    "AssistantMessage",
    "ContentBlock",
    "CorruptSessionError",
    "EventType",
    "FormatUnsupportedError",
    "InvalidEventError",
    "Message",
    "SchemaError",
    "SeqConflictError",
    "SessionEvent",
    "SessionExistsError",
    "SessionHeader",
    "SessionNotFoundError",
    "SessionStore",
    "SessionSummary",
    "StoreBusyError",
    "StoreError",
    "StoredLog",
    "StructureError",
    "SurfaceOp",
    "SurfaceReplace",
    "TodoItem",
    "TodoSessionsError",
    "UserMessage",
    "__version__",
    "migrate",
    "register_event_type",
    "validate_event",
]
