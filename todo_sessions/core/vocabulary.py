"""The rest of the reference harness's known vocabulary: one payload model per event type.

See docs/format.md, "The reference's vocabulary". The list is the reference's
``KNOWN_SESSION_EVENT_TYPES`` (packages/core/session/src/known-event-types.ts at the commit named
there), less the types the catalog itself defines and the ``compaction/*`` types, which the
compaction module registers. `REFERENCE_EVENT_TYPES` is that whole list.

Every type here is log-only (no ``surfaceOp``), as in the reference. Each model declares the
fields of the reference's payload type with their types, and checks a field whenever it is
present; no field is required, because the reference's read path requires none of them (it
refuses only an unknown type, a malformed message or request header), and a log it accepts must
load here too. Keys a model does not declare are kept, as everywhere.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .messages import ContentBlock, Message, UserMessage, WireModel
from .registry import register_event_type

__all__ = ["REFERENCE_EVENT_TYPES", "REFERENCE_VOCABULARY_COMMIT"]

REFERENCE_VOCABULARY_COMMIT = "611615650f1bd789dc83cedc428acc17934614d3"
"""The reference commit whose ``known-event-types.ts`` this module follows."""

REFERENCE_EVENT_TYPES: frozenset[str] = frozenset(
    {
        "agent-preset/selected",
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "assistant/chunk",
        "assistant/message",
        "command/done",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "llm/retry",
        "llm/retry-started",
        "permission/preset",
        "plan/mode",
        "request/context",
        "request/header",
        "sandbox/mode",
        "schedule/change",
        "session/end-seed",
        "session/title",
        "session/title-llm-request",
        "step/end",
        "step/start",
        "subagent/descriptor",
        "team/member",
        "team/message/delivered",
        "team/message/queued",
        "team/task",
        "todo/write",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/run-end",
        "tool-workflow/run-start",
        "tool/call",
        "tool/code-dispatch",
        "tool/code-dispatch-start",
        "tool/result",
        "turn/end",
        "turn/start",
        "user/message",
        "web/deepseek-search-llm-request",
    }
)
"""The reference's ``KNOWN_SESSION_EVENT_TYPES``: 48 names."""

Id = str
"""A branded id of the reference (``CommandId``, ``TeamId``, ``RetryId``, …): a string."""
Seq = int


class AgentInboxSplicedData(WireModel):
    """``agent/inbox/spliced``: one change of an agent's pending-message lists."""

    target: Literal["next-turn", "next-step"] | None = None
    start: Seq | None = None
    removed_count: int | None = None
    inserted: list[UserMessage] | None = None
    outcome: Literal["canceled"] | None = None


class AgentPresetSelectedData(WireModel):
    agent_preset: str | None = None


class ApprovalAskedData(WireModel):
    id: Id | None = None
    tool_name: str | None = None
    call_id: Id | None = None
    reason: str | None = None


class ApprovalDecidedData(WireModel):
    id: Id | None = None
    outcome: Literal["allowed-once", "rejected", "cancelled", "unavailable"] | None = None


class ApprovalPolicyData(WireModel):
    policy: Literal["ask", "never"] | None = None
    source: Literal["delegation"] | None = None


class CommandDoneData(WireModel):
    command_id: Id | None = None
    kind: Literal["success", "error"] | None = None
    text: str | None = None
    source_event_seq: Seq | None = None


class CommandRunData(WireModel):
    command_id: Id | None = None
    name: str | None = None
    args: str | None = None
    source: dict[str, Any] | None = None
    """``CommandSource``: ``{kind, ...}``."""


class FeedbackRecordData(WireModel):
    text: str | None = None


class GoalChangeData(WireModel):
    """``goal/change`` (``GoalChangeMeta``): a goal snapshot change, or a clear."""

    kind: Literal["goal/change"] | None = None
    version: int | None = None
    operation: Literal["create", "edit", "pause", "resume", "complete", "block", "clear"] | None = (
        None
    )
    goal: dict[str, Any] | None = None
    rounds_started: int | None = None
    created_at: int | None = None
    updated_at: int | None = None
    cleared: dict[str, Any] | None = None
    cleared_at: int | None = None


class HookInvokedData(WireModel):
    turn: int | None = None
    point: str | None = None
    dialect: Literal["claude-code", "codex"] | None = None
    matcher: str | None = None
    handler_id: str | None = None


class HookResultData(WireModel):
    turn: int | None = None
    point: str | None = None
    handler_id: str | None = None
    decision: str | None = None
    exit_code: int | None = None
    stderr_summary: str | None = None
    duration_ms: int | float | None = None


class LlmFailure(WireModel):
    message: str | None = None
    code: str | None = None
    status: int | None = None
    provider_retry_after_ms: int | float | None = None
    request_id: str | None = None


class LlmRetryData(WireModel):
    """``llm/retry``: a failed model call that will be retried (``mode`` normal or always)."""

    retry_id: Id | None = None
    turn: int | None = None
    step: int | None = None
    provider: str | None = None
    mode: Literal["normal", "always"] | None = None
    policy_key: str | None = None
    retry: int | None = None
    max_retries: int | None = None
    delay_ms: int | float | None = None
    failure: LlmFailure | None = None


class LlmRetryStartedData(WireModel):
    retry_id: Id | None = None
    turn: int | None = None
    step: int | None = None
    retry: int | None = None


class PermissionPresetData(WireModel):
    preset: str | None = None


class PlanModeData(WireModel):
    active: bool | None = None


class SandboxModeData(WireModel):
    mode: Literal["read-only", "workspace-write", "danger-full-access"] | None = None
    source: Literal["delegation"] | None = None


class ScheduleChangeData(WireModel):
    """``schedule/change``: create (``schedule``), delete or dispatch (``id``) a schedule."""

    version: int | None = None
    operation: Literal["create", "delete", "dispatch"] | None = None
    schedule: dict[str, Any] | None = None
    id: Id | None = None
    accepted_at: str | None = None


class SessionTitleData(WireModel):
    """``session/title``: the session's title and the user messages it was made from."""

    title: str | None = None
    message_seqs: list[Seq] | None = None
    source: dict[str, Any] | None = None
    """``{kind: "fallback" | "provider" | "user", ...}``."""


class ModelProvenance(WireModel):
    provider: str | None = None
    model: str | None = None


class SessionTitleLlmRequestData(WireModel):
    title_provider: Id | None = None
    message_seqs: list[Seq] | None = None
    route: ModelProvenance | None = None
    system: str | None = None
    messages: list[Message] | None = None
    max_tokens: int | None = None


class SubagentDescriptorData(WireModel):
    """``subagent/descriptor``: a one-shot or continuable subagent."""

    version: int | None = None
    mode: Literal["one-shot", "continuable"] | None = None
    provider: str | None = None
    label: str | None = None
    agent_provider: str | None = None
    agent_model: str | None = None
    persona: str | None = None
    tool_filter: Any = None


class TeamMemberData(WireModel):
    version: int | None = None
    team_id: Id | None = None
    member: dict[str, Any] | None = None


class TeamMessageDeliveredData(WireModel):
    version: int | None = None
    team_id: Id | None = None
    message_id: Id | None = None
    target_id: Id | None = None


class TeamMessageQueuedData(WireModel):
    version: int | None = None
    team_id: Id | None = None
    message: dict[str, Any] | None = None


class TeamTaskData(WireModel):
    version: int | None = None
    team_id: Id | None = None
    task: dict[str, Any] | None = None


class ToolWorkflowRunStartData(WireModel):
    run_id: Id | None = None
    name: str | None = None


class ToolWorkflowAgentStartData(WireModel):
    run_id: Id | None = None
    seq: int | None = None
    label: str | None = None
    phase: str | None = None
    child_id: Id | None = None


class ToolWorkflowAgentEndData(WireModel):
    run_id: Id | None = None
    seq: int | None = None
    outcome: Literal["completed", "failed", "cancelled"] | None = None


class ToolWorkflowRunEndData(WireModel):
    run_id: Id | None = None
    stop_reason: Literal["completed", "cancelled", "error"] | None = None


class CodeDispatchStartData(WireModel):
    root_call_id: Id | None = None
    parent_call_id: Id | None = None
    sub_call_id: Id | None = None
    name: str | None = None
    arguments: Any = None


class CodeDispatchData(CodeDispatchStartData):
    is_error: bool | None = None
    content: list[ContentBlock] | None = None


class DeepSeekSearchRequestData(WireModel):
    endpoint: str | None = None
    api_version: str | None = None
    body: dict[str, Any] | None = Field(default=None)


_TYPES: tuple[tuple[str, type[WireModel]], ...] = (
    ("agent/inbox/spliced", AgentInboxSplicedData),
    ("agent-preset/selected", AgentPresetSelectedData),
    ("approval/asked", ApprovalAskedData),
    ("approval/decided", ApprovalDecidedData),
    ("approval/policy", ApprovalPolicyData),
    ("command/done", CommandDoneData),
    ("command/run", CommandRunData),
    ("feedback/record", FeedbackRecordData),
    ("goal/change", GoalChangeData),
    ("hook/invoked", HookInvokedData),
    ("hook/result", HookResultData),
    ("llm/retry", LlmRetryData),
    ("llm/retry-started", LlmRetryStartedData),
    ("permission/preset", PermissionPresetData),
    ("plan/mode", PlanModeData),
    ("sandbox/mode", SandboxModeData),
    ("schedule/change", ScheduleChangeData),
    ("session/title", SessionTitleData),
    ("session/title-llm-request", SessionTitleLlmRequestData),
    ("subagent/descriptor", SubagentDescriptorData),
    ("team/member", TeamMemberData),
    ("team/message/delivered", TeamMessageDeliveredData),
    ("team/message/queued", TeamMessageQueuedData),
    ("team/task", TeamTaskData),
    ("tool-workflow/agent-end", ToolWorkflowAgentEndData),
    ("tool-workflow/agent-start", ToolWorkflowAgentStartData),
    ("tool-workflow/run-end", ToolWorkflowRunEndData),
    ("tool-workflow/run-start", ToolWorkflowRunStartData),
    ("tool/code-dispatch", CodeDispatchData),
    ("tool/code-dispatch-start", CodeDispatchStartData),
    ("web/deepseek-search-llm-request", DeepSeekSearchRequestData),
)

for _name, _model in _TYPES:
    register_event_type(_name, _model)
