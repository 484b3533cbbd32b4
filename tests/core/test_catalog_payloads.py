"""The catalog: payload rules with the exact errors they give, the surface fields, the registry
(issue #17).

Every refusal of `validate_event` is an `InvalidEventError` naming the event type, the seq and
the field, in one line (docs/format.md, "The catalog" and "Surface rules").
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from todo_sessions.core import catalog, registry, vocabulary
from todo_sessions.core.catalog import (
    EVENT_TYPES,
    FORMAT_VERSION,
    EventType,
    RequestRecordData,
    StepData,
    TurnStartData,
    register_event_type,
    validate_event,
)
from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.messages import WireModel
from todo_sessions.errors import InvalidEventError

SOURCE = {"kind": "model", "provider": "p", "model": "m"}


def user(content: list[Any] | None = None) -> dict[str, Any]:
    return {
        "id": "u1",
        "role": "user",
        "content": [{"type": "text", "text": "hi"}] if content is None else content,
        "source": {"kind": "user"},
    }


def tool_result(content: list[Any], call_id: str = "c1") -> dict[str, Any]:
    return {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "m1",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": content,
        },
    }


def result_block(call_id: str = "c1") -> dict[str, Any]:
    return {"type": "tool-result", "toolCallId": call_id, "content": []}


def refusal(event: SessionEvent) -> tuple[str, str | None]:
    with pytest.raises(InvalidEventError) as info:
        validate_event(event)
    error = info.value
    assert (error.event_type, error.seq) == (event.type, event.seq)
    return str(error), error.field


def fast_and_slow(event: SessionEvent) -> tuple[str, str | None] | None:
    """What `validate_event` says, first with the compiled checks, then with the models alone
    (a fresh event each time: a checked event is not checked again)."""
    results = []
    for fast in (True, False):
        saved = dict(catalog._CHECKS)
        if not fast:
            catalog._CHECKS.clear()
        try:
            validate_event(event.replace())
            results.append(None)
        except InvalidEventError as exc:
            results.append((str(exc), exc.field))
        finally:
            catalog._CHECKS.clear()
            catalog._CHECKS.update(saved)
    assert results[0] == results[1]
    return results[0]


PAYLOAD_ERRORS: list[tuple[str, Any, dict[str, Any], str, str]] = [
    ("turn/start", {"turn": 0}, {}, "data.turn", "Input should be greater than or equal to 1"),
    ("turn/start", {"turn": 1.0}, {}, "data.turn", "Input should be a valid integer"),
    (
        "turn/start",
        [],
        {},
        "data",
        "Input should be a valid dictionary or instance of TurnStartData",
    ),
    (
        "step/start",
        {"turn": 0, "step": 0},
        {},
        "data.turn",
        "Input should be greater than or equal to 1 (and 1 more)",
    ),
    ("step/end", {"turn": 1}, {}, "data.step", "Field required"),
    (
        "turn/end",
        {"turn": 1, "reason": {"kind": "error"}},
        {},
        "data.reason",
        'Value error, reason of kind "error" needs error: {message, code?}',
    ),
    (
        "turn/end",
        {"turn": 1, "reason": {"kind": ""}},
        {},
        "data.reason.kind",
        "String should have at least 1 character",
    ),
    (
        "turn/end",
        {"turn": 1, "reason": {"kind": "error", "error": {"code": "x"}}},
        {},
        "data.reason.error.message",
        "Field required",
    ),
    (
        "user/message",
        user([{"type": "text", "text": 1}]),
        {},
        "data.content[0].text",
        "Input should be a valid string",
    ),
    (
        "user/message",
        user([{"type": "tool-result", "toolCallId": "c", "content": [{"type": "image"}]}]),
        {},
        "data.content[0].content[0].mediaType",
        "Field required (and 1 more)",
    ),
    (
        "tool/result",
        tool_result([]),
        {},
        "data.message",
        "Value error, content must be exactly one tool-result block",
    ),
    (
        "tool/result",
        tool_result([{"type": "text", "text": "x"}]),
        {},
        "data.message",
        "Value error, content must be exactly one tool-result block",
    ),
    (
        "tool/result",
        tool_result([result_block(), result_block()]),
        {},
        "data.message",
        "Value error, content must be exactly one tool-result block",
    ),
    (
        "tool/result",
        tool_result([result_block("d")]),
        {},
        "data.message",
        "Value error, toolCallId 'd' differs from source.callId 'c1'",
    ),
    (
        "tool/result",
        {**tool_result([result_block()]), "error": {"name": "E"}},
        {},
        "data.error.code",
        "Field required",
    ),
    (
        "tool/call",
        {"turn": 1, "step": 1, "callId": "", "name": "read", "arguments": "{}"},
        {},
        "data.callId",
        "String should have at least 1 character",
    ),
    (
        "tool/call",
        {"turn": 1, "step": 1, "callId": "c", "name": "", "arguments": "{}"},
        {},
        "data.name",
        "String should have at least 1 character",
    ),
    (
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": {"id": "a", "role": "assistant", "content": [], "source": SOURCE},
            "usage": 1,
        },
        {},
        "data.usage",
        "Input should be a valid dictionary",
    ),
    (
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": {"id": "a", "role": "assistant", "content": [], "source": SOURCE},
            "interrupted": "yes",
        },
        {},
        "data.interrupted",
        "Input should be a valid boolean",
    ),
    (
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": []},
        {},
        "data.chunk",
        "Input should be a valid dictionary",
    ),
    ("todo/write", {"todos": {}}, {}, "data.todos", "Input should be a valid list"),
]


@pytest.mark.parametrize(("kind", "data", "extra", "field", "text"), PAYLOAD_ERRORS)
def test_payload_errors_in_full(
    kind: str, data: Any, extra: dict[str, Any], field: str, text: str
) -> None:
    event = SessionEvent(kind, 5, 0, data, **extra)
    assert refusal(event) == (f"invalid event {kind!r} (seq 5): {field}: {text}", field)
    assert fast_and_slow(event) == (f"invalid event {kind!r} (seq 5): {field}: {text}", field)


VALID: list[tuple[str, Any, dict[str, Any]]] = [
    ("turn/start", {"turn": 1}, {}),
    ("turn/end", {"turn": 1, "reason": {"kind": "error", "error": {"message": "m"}}}, {}),
    ("turn/end", {"turn": 1, "reason": {"kind": "cancelled"}}, {}),
    ("step/start", {"turn": 1, "step": 1}, {}),
    ("user/message", user(), {"surface_op": "append", "source_event_seqs": [4]}),
    ("user/message", user(), {"surface_op": {"op": "replace", "start": 1, "end": 2}}),
    ("tool/call", {"turn": 1, "step": 1, "callId": "c", "name": "n", "arguments": ""}, {}),
    ("tool/result", tool_result([result_block()]), {"surface_op": "append"}),
    (
        "tool/result",
        {**tool_result([result_block()]), "error": {"name": "E", "code": "x"}, "meta": [1]},
        {"surface_op": "append"},
    ),
    (
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": {"id": "a", "role": "assistant", "content": [], "source": SOURCE},
        },
        {"surface_op": "append", "source_event_seqs": []},
    ),
    ("todo/write", {"todos": [{"content": "a", "status": "in_progress"}]}, {}),
    ("request/header", {"header": {"config": {"provider": "p", "model": "m"}}}, {}),
    ("request/header", {"provider": "p", "model": "m", "tools": [], "x": [1]}, {}),
    ("request/context", {}, {}),
    ("session/end-seed", {}, {}),
]


@pytest.mark.parametrize(("kind", "data", "extra"), VALID)
def test_valid_payloads(kind: str, data: Any, extra: dict[str, Any]) -> None:
    event = SessionEvent(kind, 5, 0, data, **extra)
    validate_event(event)
    assert fast_and_slow(event) is None


# -- surface fields ------------------------------------------------------------------------------

NOT_SURFACE = "only surface events (user/message, assistant/message, tool/result) do"


@pytest.mark.parametrize(
    ("kind", "data"), [("todo/write", {"todos": []}), ("turn/start", {"turn": 1})]
)
def test_surface_fields_only_on_surface_events(kind: str, data: Any) -> None:
    op = SessionEvent(kind, 5, 0, data, surface_op="append")
    assert refusal(op) == (
        f"event {kind!r} (seq 5) may not carry surfaceOp: {NOT_SURFACE}",
        "surfaceOp",
    )
    both = SessionEvent(kind, 5, 0, data, surface_op="append", source_event_seqs=[1])
    assert refusal(both)[1] == "surfaceOp"
    seqs = SessionEvent(kind, 5, 0, data, source_event_seqs=[1])
    assert refusal(seqs) == (
        f"event {kind!r} (seq 5) may not carry sourceEventSeqs: {NOT_SURFACE}",
        "sourceEventSeqs",
    )


@pytest.mark.parametrize(
    ("seqs", "problem"),
    [
        ([4, 4], "[4, 4] must be unique"),
        ([1, 2, 1], "[1, 2, 1] must be unique"),
        ([5], "[5] must each be smaller than the event's own seq"),
        ([0, 6], "[0, 6] must each be smaller than the event's own seq"),
        ([], "[] must not be empty (only assistant/message may cite nothing)"),
    ],
)
def test_source_event_seqs_rules(seqs: list[int], problem: str) -> None:
    event = SessionEvent("user/message", 5, 0, user(), source_event_seqs=seqs)
    assert refusal(event) == (
        f"event 'user/message' (seq 5): sourceEventSeqs {problem}",
        "sourceEventSeqs",
    )


def test_source_event_seqs_at_their_limits() -> None:
    validate_event(
        SessionEvent("user/message", 5, 0, user(), surface_op="append", source_event_seqs=[0, 4])
    )
    validate_event(
        SessionEvent(
            "tool/result",
            1,
            0,
            tool_result([result_block()]),
            surface_op="append",
            source_event_seqs=[0],
        )
    )


def test_unknown_types() -> None:
    event = SessionEvent("no/such", 5, 0, {})
    assert refusal(event) == (
        "unknown event 'no/such' (seq 5): the type is not registered and the event is not "
        "marked ignorable",
        "type",
    )
    validate_event(SessionEvent("no/such", 5, 0, {"x": 1}, ignorable=True, surface_op="append"))


def test_a_todo_write_breaking_a_durable_rule() -> None:
    twice = [{"content": "a", "status": "pending"}, {"content": "a", "status": "pending"}]
    event = SessionEvent("todo/write", 5, 0, {"todos": twice})
    assert refusal(event) == (
        "invalid event 'todo/write' (seq 5): todos[1]: duplicate content \"a\"",
        "data.todos",
    )


# -- checked once ------------------------------------------------------------------------------


def test_an_event_that_passed_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    event = SessionEvent("turn/start", 0, 0, {"turn": 1})
    validate_event(event)
    assert event._checked is EVENT_TYPES["turn/start"]
    calls: list[Any] = []
    monkeypatch.setitem(catalog._CHECKS, "turn/start", lambda data: calls.append(data) or True)
    validate_event(event)
    assert calls == []
    validate_event(SessionEvent("turn/start", 1, 0, {"turn": 1}))
    assert calls == [{"turn": 1}]


def test_a_refused_event_is_not_marked() -> None:
    event = SessionEvent("turn/start", 0, 0, {"turn": 0})
    refusal(event)
    assert not hasattr(event, "_checked")
    refusal(event)


def test_the_compiled_check_decides_when_it_vouches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A payload the fast check vouches for is not validated by the model (that is the point of
    the fast check); one it does not vouch for is."""
    calls: list[Any] = []

    class Spy(RequestRecordData):
        @classmethod
        def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append(obj)
            return super().model_validate(obj, *args, **kwargs)

    monkeypatch.setitem(catalog._REGISTRY, "request/header", EventType("request/header", Spy))
    monkeypatch.setitem(catalog._CHECKS, "request/header", lambda data: "slow" not in data)
    validate_event(SessionEvent("request/header", 0, 0, {"fast": 1}))
    assert calls == []
    validate_event(SessionEvent("request/header", 0, 0, {"slow": 1}))
    assert calls == [{"slow": 1}]


def test_a_check_that_raises_leaves_the_answer_to_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def boom(data: Any) -> bool:
        raise RecursionError

    monkeypatch.setitem(catalog._CHECKS, "turn/start", boom)
    validate_event(SessionEvent("turn/start", 0, 0, {"turn": 1}))
    assert refusal(SessionEvent("turn/start", 0, 0, {"turn": 0}))[1] == "data.turn"


# -- the registry ----------------------------------------------------------------------------------


CORE = "todo_sessions.core."


def test_the_built_in_catalog() -> None:
    assert FORMAT_VERSION == 0
    # the core's own types (whatever else this process loaded: the adapters' vocabularies,
    # registered from their side, and a test's own types)
    other = {n for n, e in EVENT_TYPES.items() if not e.model.__module__.startswith(CORE)}
    surface = {n for n, e in EVENT_TYPES.items() if e.surface and n not in other}
    assert surface == {"user/message", "assistant/message", "tool/result"}
    assert {n: e.model.__name__ for n, e in EVENT_TYPES.items() if n not in other} == {
        "turn/start": "TurnStartData",
        "turn/end": "TurnEndData",
        "step/start": "StepData",
        "step/end": "StepData",
        "user/message": "UserMessageData",
        "assistant/chunk": "AssistantChunkData",
        "assistant/message": "AssistantMessageData",
        "tool/call": "ToolCallData",
        "tool/result": "ToolResultData",
        "todo/write": "TodoWriteData",
        "request/header": "RequestHeaderData",
        "request/context": "RequestContextData",
        "session/end-seed": "SessionEndSeedData",
        "session/meta": "SessionMetaData",
        **{name: model.__name__ for name, model in vocabulary._TYPES},
        "compaction/start": "CompactionStartData",
        "compaction/summary": "CompactionSummaryData",
        "compaction/end": "CompactionEndData",
        "compaction/prune": "CompactionPruneData",
    }
    with pytest.raises(TypeError):
        EVENT_TYPES["x/y"] = EVENT_TYPES["turn/start"]  # type: ignore[index]


class Ping(WireModel):
    n: int


class Pong(WireModel):
    n: int


def _private_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the registry for one test, seen by registration and validation alike."""
    types, checks = dict(registry._REGISTRY), dict(registry._CHECKS)
    for module in (registry, catalog):
        monkeypatch.setattr(module, "_REGISTRY", types)
        monkeypatch.setattr(module, "_CHECKS", checks)


def test_register_event_type(monkeypatch: pytest.MonkeyPatch) -> None:
    _private_registry(monkeypatch)
    entry = register_event_type("ext/ping", Ping, surface=True)
    assert entry == EventType("ext/ping", Ping, True)
    assert registry._REGISTRY["ext/ping"] is entry
    check = registry._CHECKS["ext/ping"]
    assert check is not None and check({"n": 1}) and not check({"n": "1"})
    assert register_event_type("ext/ping", Ping, surface=True) == entry  # again: harmless
    assert registry._REGISTRY["ext/ping"] is entry
    with pytest.raises(ValueError) as info:
        register_event_type("ext/ping", Pong, surface=True)
    assert str(info.value) == f"event type 'ext/ping' is already registered with {Ping!r}"
    with pytest.raises(ValueError):
        register_event_type("ext/ping", Ping)  # another surface flag is another entry
    assert register_event_type("ext/pong", Pong).surface is False
    validate_event(SessionEvent("ext/ping", 3, 0, {"n": 1}, surface_op="append"))
    assert refusal(SessionEvent("ext/ping", 3, 0, {"n": "1"})) == (
        "invalid event 'ext/ping' (seq 3): data.n: Input should be a valid integer",
        "data.n",
    )


def test_a_model_without_a_compiled_check_validates_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    class Lax(BaseModel):
        model_config = ConfigDict(strict=False)
        n: int

    _private_registry(monkeypatch)
    register_event_type("ext/lax", Lax)
    assert registry._CHECKS["ext/lax"] is None
    validate_event(SessionEvent("ext/lax", 0, 0, {"n": "1"}))
    assert refusal(SessionEvent("ext/lax", 0, 0, {"n": "x"}))[1] == "data.n"


@pytest.mark.parametrize("name", ["", "x" * 201, "a\nb", 5, None])
def test_event_type_names_are_printable_strings_of_1_to_200_characters(name: Any) -> None:
    with pytest.raises(ValueError) as info:
        register_event_type(name, Ping)
    assert str(info.value) == (
        f"event type name must be a printable string of 1-200 chars: {name!r}"
    )


def test_the_longest_event_type_name(monkeypatch: pytest.MonkeyPatch) -> None:
    _private_registry(monkeypatch)
    assert register_event_type("x" * 200, Ping).name == "x" * 200
    assert register_event_type("y", Ping).name == "y"


def test_a_model_must_be_a_pydantic_model() -> None:
    with pytest.raises(TypeError) as info:
        register_event_type("ext/bad", dict)
    assert str(info.value) == "model for 'ext/bad' must be a pydantic model class"


# -- payload models --------------------------------------------------------------------------------


def test_payload_model_defaults() -> None:
    data = catalog.AssistantMessageData.model_validate(
        {
            "turn": 1,
            "step": 2,
            "message": {"id": "a", "role": "assistant", "content": [], "source": SOURCE},
        }
    )
    assert (data.usage, data.interrupted) == (None, None)
    assert data.message.role == "assistant"
    result = catalog.ToolResultData.model_validate(tool_result([result_block()]))
    assert (result.error, result.meta) == (None, None)
    assert result.message.source.kind == "tool" and result.message.role == "user"
    assert catalog.TurnError(message="m").code is None
    assert catalog.TurnEndReason(kind="done").error is None
    assert StepData(turn=1, step=1) == StepData.model_validate({"turn": 1, "step": 1})
    assert TurnStartData(turn=1).turn == 1


def test_a_tool_result_source_is_a_tool() -> None:
    data = tool_result([result_block()])
    data["message"]["source"]["kind"] = "user"
    assert refusal(SessionEvent("tool/result", 5, 0, data)) == (
        "invalid event 'tool/result' (seq 5): data.message.source.kind: Input should be 'tool'",
        "data.message.source.kind",
    )
    data["message"]["source"] = {"kind": "tool", "callId": ""}
    assert refusal(SessionEvent("tool/result", 5, 0, data))[1] == "data.message.source.callId"


def test_field_path() -> None:
    assert catalog._field_path(()) == "data"
    assert catalog._field_path(("a", 0, "b", 12)) == "data.a[0].b[12]"


def test_tool_result_message_fields() -> None:
    assert catalog.ToolSource(kind="tool", call_id="c").kind == "tool"
    message = catalog.ToolResultMessage.model_validate(
        {
            "id": "m",
            "role": "user",
            "source": {"kind": "tool", "callId": "c"},
            "content": [result_block("c")],
        }
    )
    assert (message.id, message.role, message.source.call_id) == ("m", "user", "c")
    result = tool_result([result_block("c")], "c")
    validate_event(SessionEvent("tool/result", 5, 0, result, surface_op="append"))
    data = tool_result([result_block()])
    data["message"]["id"] = ""
    assert refusal(SessionEvent("tool/result", 5, 0, data)) == (
        "invalid event 'tool/result' (seq 5): data.message.id: "
        "String should have at least 1 character",
        "data.message.id",
    )


def test_event_types_are_frozen() -> None:
    entry = EVENT_TYPES["turn/start"]
    with pytest.raises(AttributeError):
        entry.surface = True  # type: ignore[misc]
    assert entry.surface is False and not hasattr(entry, "__dict__")


def test_an_event_type_is_not_a_surface_type_unless_said() -> None:
    assert EventType("ext/x", Ping).surface is False
    assert EventType("ext/x", Ping) == EventType("ext/x", Ping, False)
