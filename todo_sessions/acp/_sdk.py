"""The one place that imports the official ACP SDK (``agent-client-protocol``, ``import acp``).

Everything else in `todo_sessions.acp` uses the names defined here, so a rename or move in
the SDK touches this file only. Pinned range: ``agent-client-protocol>=0.12,<0.13`` (ACP
protocol version 1, schema v1.19).
"""

from __future__ import annotations

from typing import Any, get_args

try:
    import acp as _acp  # noqa: F401
except ImportError as exc:  # the [acp] extra is not installed
    raise ImportError(
        "the Agent Client Protocol bridge needs the agent-client-protocol package: "
        "pip install 'todo-sessions[acp]'"
    ) from exc

from acp import PROTOCOL_VERSION, Agent, Client, RequestError, run_agent, spawn_agent_process
from acp.agent.connection import AgentSideConnection
from acp.agent.router import build_agent_router
from acp.connection import Connection
from acp.router import Route
from acp.schema import (
    AgentCapabilities,
    AuthenticateResponse,
    AuthMethodAgent,
    CloseSessionResponse,
    Cost,
    DeleteSessionRequest,
    DeleteSessionResponse,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PlanUpdateItems,
    PromptResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionForkCapabilities,
    SessionInfo,
    SessionInfoUpdate,
    SessionListCapabilities,
    SessionNotification,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    UsageUpdate,
)
from acp.schema import AgentMessageChunk as AgentMessageChunk
from acp.schema import AgentPlanContentUpdate as PlanContentUpdate
from acp.schema import AgentPlanUpdate as PlanUpdate
from acp.schema import AgentThoughtChunk as AgentThoughtChunk
from acp.schema import ContentToolCallContent as ToolCallContent
from acp.schema import ImageContentBlock as ImageContent
from acp.schema import PermissionOption as PermissionOption
from acp.schema import PlanEntry as PlanEntry
from acp.schema import TextContentBlock as TextContent
from acp.schema import ToolCallProgress as ToolCallProgress
from acp.schema import ToolCallStart as ToolCallStart
from acp.schema import ToolCallUpdate as ToolCallUpdate
from acp.schema import ToolKind as ToolKind
from acp.schema import UserMessageChunk as UserMessageChunk
from acp.stdio import stdio_streams
from acp.utils import normalize_result, notify_model, request_model
from pydantic import BaseModel

__all__ = [
    "PROTOCOL_VERSION",
    "TOOL_KINDS",
    "Agent",
    "AgentCapabilities",
    "AgentMessageChunk",
    "AgentSideConnection",
    "AgentThoughtChunk",
    "AuthMethodAgent",
    "AuthenticateResponse",
    "Client",
    "CloseSessionResponse",
    "Connection",
    "ContentBlock",
    "Cost",
    "DeleteSessionRequest",
    "DeleteSessionResponse",
    "ForkSessionResponse",
    "ImageContent",
    "Implementation",
    "InitializeResponse",
    "ListSessionsResponse",
    "LoadSessionResponse",
    "NewSessionResponse",
    "PermissionOption",
    "PlanContentUpdate",
    "PlanEntry",
    "PlanUpdate",
    "PlanUpdateItems",
    "PromptResponse",
    "RequestError",
    "RequestPermissionRequest",
    "RequestPermissionResponse",
    "ResumeSessionResponse",
    "Route",
    "SessionCapabilities",
    "SessionCloseCapabilities",
    "SessionDeleteCapabilities",
    "SessionForkCapabilities",
    "SessionInfo",
    "SessionInfoUpdate",
    "SessionListCapabilities",
    "SessionNotification",
    "SessionResumeCapabilities",
    "SessionUpdate",
    "SetSessionConfigOptionResponse",
    "TextContent",
    "ToolCallContent",
    "ToolCallProgress",
    "ToolCallStart",
    "ToolCallUpdate",
    "ToolKind",
    "UsageUpdate",
    "UserMessageChunk",
    "build_agent_router",
    "normalize_result",
    "notify_model",
    "request_model",
    "run_agent",
    "spawn_agent_process",
    "stdio_streams",
    "wire_dump",
]

ContentBlock = TextContent | ImageContent
"""The ACP content blocks the mapping produces."""

SessionUpdate = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | PlanUpdate
    | PlanContentUpdate
    | SessionInfoUpdate
    | UsageUpdate
)
"""The ``session/update`` variants the agent sends (a subset of the SDK's union)."""

TOOL_KINDS: frozenset[str] = frozenset(get_args(ToolKind))
"""Every value the SDK accepts for a tool call's ``kind``."""


def wire_dump(model: BaseModel) -> dict[str, Any]:
    """Serialise an SDK model exactly as the SDK puts its params on the wire.

    Mirrors ``acp.utils.serialize_params`` (used for every request and notification):
    JSON mode, camelCase aliases, ``None`` and default-valued fields left out.
    """
    return model.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
