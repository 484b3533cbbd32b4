"""The event catalog, format 0: one payload model per event type, and the registry.

See docs/format.md, "The catalog".

Embedders add their own types with `register_event_type`. `validate_event` checks an event
against the registry, the surface rules that need no other event (docs/format.md, "Surface
rules"), and the durable rules of ``todo/write`` (docs/format.md, "Todos"). Each model is also
compiled into a fast check (`fastcheck`) when it is registered; the model itself validates
only payloads the fast check cannot vouch for, so it stays the source of every error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator

from ..errors import InvalidEventError
from .compaction_events import COMPACTION_EVENT_TYPES
from .envelope import SessionEvent, _mark_checked
from .messages import (
    AssistantMessage,
    ContentBlock,
    MessageSource,
    ToolResultBlock,
    UserMessage,
    WireModel,
)
from .meta import meta_problem
from .registry import _CHECKS, _REGISTRY, EVENT_TYPES, EventType, register_event_type
from .request_header import RequestContextData, RequestHeaderData
from .todos import TodoItem, todo_list_problem
from .types import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    SESSION_END_SEED,
    SESSION_META,
    STEP_END,
    STEP_START,
    TODO_WRITE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)

__all__ = [
    "EVENT_TYPES",
    "FORMAT_VERSION",
    "AssistantChunkData",
    "AssistantMessageData",
    "EventType",
    "RequestContextData",
    "RequestHeaderData",
    "RequestRecordData",
    "SessionEndSeedData",
    "SessionMetaData",
    "StepData",
    "TodoWriteData",
    "ToolCallData",
    "ToolResultData",
    "TurnEndData",
    "TurnEndReason",
    "TurnStartData",
    "register_event_type",
    "validate_event",
]

FORMAT_VERSION = 0
"""The session log format this version writes and reads."""

Positive = Annotated[int, Field(ge=1)]


class TurnStartData(WireModel):
    turn: Positive


class TurnError(WireModel):
    message: str
    code: str | None = None


class TurnEndReason(WireModel):
    """``{kind}``; kinds other than the known ones are kept as they are."""

    kind: str = Field(min_length=1)
    error: TurnError | None = None

    @model_validator(mode="after")
    def _error_kind_has_error(self) -> TurnEndReason:
        if self.kind == "error" and self.error is None:
            raise ValueError('reason of kind "error" needs error: {message, code?}')
        return self


class TurnEndData(WireModel):
    turn: Positive
    reason: TurnEndReason


class StepData(WireModel):
    turn: Positive
    step: Positive


class UserMessageData(UserMessage):
    """``user/message``: the data is the user message itself."""


class AssistantChunkData(StepData):
    chunk: dict[str, Any]


class AssistantMessageData(StepData):
    message: AssistantMessage
    usage: dict[str, Any] | None = None
    interrupted: bool | None = None


class ToolCallData(StepData):
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: str
    """The raw JSON string the model produced."""
    subagent_session_id: str | None = Field(default=None, min_length=1, max_length=200)
    """The child session a ``subagent`` call runs in (docs/format.md, "Subagent sessions")."""


class ToolSource(MessageSource):
    kind: Literal["tool"]
    call_id: str = Field(min_length=1)


class ToolResultMessage(WireModel):
    id: str = Field(min_length=1)
    role: Literal["user"]
    source: ToolSource
    content: list[ContentBlock]

    @model_validator(mode="after")
    def _one_matching_result_block(self) -> ToolResultMessage:
        blocks = self.content
        if len(blocks) != 1 or not isinstance(blocks[0], ToolResultBlock):
            raise ValueError("content must be exactly one tool-result block")
        if blocks[0].tool_call_id != self.source.call_id:
            raise ValueError(
                f"toolCallId {blocks[0].tool_call_id!r} differs from "
                f"source.callId {self.source.call_id!r}"
            )
        return self


class ToolError(WireModel):
    name: str
    code: str


class ToolResultData(StepData):
    message: ToolResultMessage
    error: ToolError | None = None
    meta: Any = None


class TodoWriteData(WireModel):
    todos: list[TodoItem]


class RequestRecordData(WireModel):
    """An opaque record: any object (kept for embedders that registered their own types
    with it; ``request/header`` and ``request/context`` have their own models now)."""


class SessionEndSeedData(WireModel):
    """``session/end-seed``: marks where an inherited (forked) prefix ends."""


class SessionMetaData(WireModel):
    """``session/meta``: sets the session's title, tags or metadata object; each key present
    replaces that field (docs/format.md, "Session metadata"). Further rules: `meta_problem`."""

    title: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None


for _name, _model, _surface in (
    (TURN_START, TurnStartData, False),
    (TURN_END, TurnEndData, False),
    (STEP_START, StepData, False),
    (STEP_END, StepData, False),
    (USER_MESSAGE, UserMessageData, True),
    (ASSISTANT_CHUNK, AssistantChunkData, False),
    (ASSISTANT_MESSAGE, AssistantMessageData, True),
    (TOOL_CALL, ToolCallData, False),
    (TOOL_RESULT, ToolResultData, True),
    (TODO_WRITE, TodoWriteData, False),
    (REQUEST_HEADER, RequestHeaderData, False),
    (REQUEST_CONTEXT, RequestContextData, False),
    (SESSION_END_SEED, SessionEndSeedData, False),
    (SESSION_META, SessionMetaData, False),
):
    register_event_type(_name, _model, surface=_surface)

# The compaction records (docs/format.md, "Compaction"): log-only.
for _record, _record_model in COMPACTION_EVENT_TYPES.items():
    register_event_type(_record, _record_model)


def _where(event: SessionEvent) -> str:
    return f"event {event.type!r} (seq {event.seq})"


def _field_path(loc: tuple[Any, ...]) -> str:
    path = "data"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _payload_error(event: SessionEvent, exc: ValidationError) -> InvalidEventError:
    first = exc.errors(include_url=False)[0]
    # A tagged-union location carries the tag as a path part; keep only field names and indexes.
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p.startswith("block:")))
    field = _field_path(loc)
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return InvalidEventError(
        f"invalid {_where(event)}: {field}: {first['msg']}{more}",
        event_type=event.type,
        seq=event.seq,
        field=field,
    )


def _check_surface_fields(event: SessionEvent, entry: EventType) -> None:
    """``surfaceOp`` and ``sourceEventSeqs`` only on surface types; the seqs unique, each
    before the event, and not empty (but on ``assistant/message``)."""
    seqs = event.source_event_seqs
    if not entry.surface:
        field = "surfaceOp" if event.surface_op is not None else "sourceEventSeqs"
        raise InvalidEventError(
            f"{_where(event)} may not carry {field}: only surface events "
            "(user/message, assistant/message, tool/result) do",
            event_type=event.type,
            seq=event.seq,
            field=field,
        )
    if seqs is None:
        return
    problem = None
    if len(set(seqs)) != len(seqs):
        problem = "must be unique"
    elif seqs and max(seqs) >= event.seq:
        problem = "must each be smaller than the event's own seq"
    elif not seqs and event.type != ASSISTANT_MESSAGE:
        problem = "must not be empty (only assistant/message may cite nothing)"
    if problem:
        raise InvalidEventError(
            f"{_where(event)}: sourceEventSeqs {list(seqs)} {problem}",
            event_type=event.type,
            seq=event.seq,
            field="sourceEventSeqs",
        )


def _todos_problem(data: Any) -> tuple[str, str] | None:
    problem = todo_list_problem(data.get("todos"))
    return None if not problem else ("data.todos", problem)


def _meta_problem(data: Any) -> tuple[str, str] | None:
    found = meta_problem(data)
    return None if found is None else (found[0], f"{found[0]}: {found[1]}")


_PAYLOAD_RULES: dict[str, Callable[[Any], tuple[str, str] | None]] = {
    TODO_WRITE: _todos_problem,
    SESSION_META: _meta_problem,
}
"""The rules of a payload its model does not express: ``(field, message)`` or None."""


def validate_event(event: SessionEvent) -> None:
    """Check one event against the catalog; raise `InvalidEventError` naming type, seq, field.

    Unregistered types pass only when marked ``ignorable``. A surface-eligible type needs a
    ``surfaceOp``; surface fields are allowed only on surface-eligible types;
    ``sourceEventSeqs`` must be unique, each smaller than the event's own seq, and non-empty
    (except on ``assistant/message``). An event that passed once is not checked again (events
    are immutable, and so are the entries of the registry).
    """
    entry = _REGISTRY.get(event.type)
    if entry is not None and getattr(event, "_checked", None) is entry:
        return  # this event passed already (the store does not check a live session's twice)
    if entry is None:
        if event.ignorable:
            return
        raise InvalidEventError(
            f"unknown {_where(event)}: the type is not registered and the event is not "
            "marked ignorable",
            event_type=event.type,
            seq=event.seq,
            field="type",
        )
    if event.surface_op is not None or event.source_event_seqs is not None:
        _check_surface_fields(event, entry)
    data = event.payload
    check = _CHECKS.get(event.type)
    try:
        valid = check is not None and check(data)
    except Exception:  # e.g. nesting deep enough to exhaust the stack: pydantic decides
        valid = False
    if not valid:
        try:
            entry.model.model_validate(data)
        except ValidationError as exc:
            raise _payload_error(event, exc) from None
    if entry.surface and event.surface_op is None:
        raise InvalidEventError(
            f"{_where(event)} is surface-eligible and requires a surfaceOp marker "
            '("append" or a replace)',
            event_type=event.type,
            seq=event.seq,
            field="surfaceOp",
        )
    rule = _PAYLOAD_RULES.get(event.type)
    if rule is not None:
        found = rule(data)
        if found is not None:
            raise InvalidEventError(
                f"invalid {_where(event)}: {found[1]}",
                event_type=event.type,
                seq=event.seq,
                field=found[0],
            )
    _mark_checked(event, entry)


# The rest of the reference's vocabulary registers itself on import (into the registry).
from . import vocabulary as _vocabulary  # noqa: E402, F401

# -- SDK session backends (todo_sessions.integrations; docs/format.md, "SDK sessions") -----------


class ClaudeEntryData(WireModel):
    """``claude/entry``: one Claude Code transcript line, kept whole (``type`` is required)."""

    type: str


class AgentsItemData(WireModel):
    """``agents/item``: one OpenAI Agents SDK input item, kept whole."""


class AgentsRetractData(WireModel):
    """``agents/retract``: ``pop_item`` / ``clear_session``: the ``agents/item`` events (by
    seq) that no projection shows any more. A surface type: it replaces the retracted items'
    surface events, so `derive_messages` stops showing them; the log keeps them."""

    items: list[int]
    """Seqs of ``agents/item`` events (a seq that names none retracts nothing)."""
    reason: Literal["pop", "clear"]


_SDK_TYPES: tuple[tuple[str, type[WireModel], bool], ...] = (
    ("claude/entry", ClaudeEntryData, False),
    ("agents/item", AgentsItemData, False),
    ("agents/retract", AgentsRetractData, True),
)
for _sdk_name, _sdk_model, _sdk_surface in _SDK_TYPES:
    register_event_type(_sdk_name, _sdk_model, surface=_sdk_surface)
