"""The event envelope, lossless JSON, wire format and the catalog.

See docs/format.md, "Events and the envelope" and "The catalog".
"""

from __future__ import annotations

import copy
import datetime
import decimal
import json
import math
import pickle
from typing import Any

import pytest
from pydantic import BaseModel

from todo_sessions import (
    EVENT_TYPES,
    InvalidEventError,
    SessionEvent,
    SessionHeader,
    SurfaceReplace,
    register_event_type,
    validate_event,
)


def tool_result_data(call_id: str = "c1", block_id: str | None = None) -> dict[str, Any]:
    return {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "m-res",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": block_id or call_id,
                    "content": [{"type": "text", "text": "ok"}],
                }
            ],
        },
    }


VALID: list[tuple[str, Any, dict[str, Any]]] = [
    ("turn/start", {"turn": 1}, {}),
    ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}, {}),
    ("turn/end", {"turn": 1, "reason": {"kind": "error", "error": {"message": "x"}}}, {}),
    ("turn/end", {"turn": 2, "reason": {"kind": "some-future-kind", "extra": 1}}, {}),
    ("step/start", {"turn": 1, "step": 1}, {}),
    ("step/end", {"turn": 1, "step": 3}, {}),
    (
        "user/message",
        {
            "id": "u1",
            "role": "user",
            "content": [{"type": "text", "text": "hi"}],
            "source": {"kind": "user"},
        },
        {"surface_op": "append"},
    ),
    (
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "h"}},
        {},
    ),
    (
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "a1",
                "role": "assistant",
                "content": [
                    {"type": "reasoning", "text": "think"},
                    {"type": "text", "text": "hello"},
                    {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"},
                    {"type": "image", "mediaType": "image/png", "data": "AAAA"},
                    {"type": "future-block", "whatever": [1, 2]},
                ],
                "source": {"kind": "model", "provider": "p", "model": "m"},
            },
            "usage": {"inputTokens": 3},
        },
        {"surface_op": "append", "source_event_seqs": []},
    ),
    (
        "tool/call",
        {"turn": 1, "step": 1, "callId": "c1", "name": "read", "arguments": '{"path": "a"}'},
        {},
    ),
    ("tool/result", tool_result_data(), {"surface_op": "append", "source_event_seqs": [0]}),
    ("todo/write", {"todos": []}, {}),
    (
        "todo/write",
        {"todos": [{"content": "a", "status": "pending"}, {"content": "b", "status": "completed"}]},
        {},
    ),
    ("request/header", {"header": {"config": {"provider": "p", "model": "x"}}, "more": [1]}, {}),
    ("request/context", {}, {}),
    ("session/end-seed", {}, {}),
]


@pytest.mark.parametrize(("kind", "data", "extra"), VALID)
def test_valid_events_pass_and_round_trip(kind: str, data: Any, extra: dict[str, Any]) -> None:
    event = SessionEvent(kind, 5, 1_700_000_000_000, data, **extra)
    validate_event(event)
    text = event.to_json()
    again = SessionEvent.from_json(text)
    assert again == event
    assert again.to_json() == text
    assert json.loads(text)["data"] == data
    assert event.to_dict() == json.loads(text)


INVALID: list[tuple[str, Any, dict[str, Any], str]] = [
    ("turn/start", {"turn": 0}, {}, "data.turn"),
    ("turn/start", {"turn": "1"}, {}, "data.turn"),
    ("turn/start", {"turn": True}, {}, "data.turn"),
    ("turn/start", [], {}, "data"),
    ("turn/end", {"turn": 1, "reason": {"kind": "error"}}, {}, "data.reason"),
    ("step/start", {"turn": 1}, {}, "data.step"),
    (
        "user/message",
        {"id": "u", "role": "assistant", "content": [], "source": {"kind": "u"}},
        {},
        "data.role",
    ),
    (
        "tool/call",
        {"turn": 1, "step": 1, "callId": "c", "name": "n", "arguments": {}},
        {},
        "data.arguments",
    ),
    ("tool/result", tool_result_data("c1", "other"), {}, "data.message"),
    ("todo/write", {"todos": [{"content": " ", "status": "pending"}]}, {}, "data.todos"),
    ("todo/write", {"todos": [{"content": "a", "status": "done"}]}, {}, "data.todos[0].status"),
    (
        "todo/write",
        {"todos": [{"content": "a", "status": "pending", "id": 1}]},
        {},
        "data.todos[0].id",
    ),
    (
        "todo/write",
        {
            "todos": [
                {"content": "a", "status": "pending"},
                {"content": " a", "status": "completed"},
            ]
        },
        {},
        "data.todos",
    ),
    ("turn/start", {"turn": 1}, {"surface_op": "append"}, "surfaceOp"),
    ("todo/write", {"todos": []}, {"source_event_seqs": [1]}, "sourceEventSeqs"),
    (
        "tool/result",
        tool_result_data(),
        {"surface_op": "append", "source_event_seqs": []},
        "sourceEventSeqs",
    ),
    (
        "tool/result",
        tool_result_data(),
        {"surface_op": "append", "source_event_seqs": [1, 1]},
        "sourceEventSeqs",
    ),
    (
        "tool/result",
        tool_result_data(),
        {"surface_op": "append", "source_event_seqs": [5]},
        "sourceEventSeqs",
    ),
    ("no/such-type", {}, {}, "type"),
]


@pytest.mark.parametrize(("kind", "data", "extra", "field"), INVALID)
def test_invalid_events_name_type_seq_and_field(
    kind: str, data: Any, extra: dict[str, Any], field: str
) -> None:
    event = SessionEvent(kind, 5, 0, data, **extra)
    with pytest.raises(InvalidEventError) as info:
        validate_event(event)
    err = info.value
    assert (err.event_type, err.seq, err.field) == (kind, 5, field)
    assert kind in str(err) and "seq 5" in str(err)


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (b"bytes", "bytes"),
        ({1, 2}, "set"),
        (math.nan, "nan"),
        (math.inf, "inf"),
        (-0.0, "-0.0"),
        (datetime.datetime(2026, 1, 1), "datetime"),
        (decimal.Decimal("1.5"), "Decimal"),
        (Opaque(), "Opaque"),
        ((1, 2), "tuple"),
        ({1: "a"}, "non-str key"),
        ("\ud800", "surrogate"),
    ],
)
def test_non_lossless_data_is_refused_naming_type_and_seq(value: Any, why: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        SessionEvent("tool/call", 7, 0, {"nested": [{"v": value}]})
    message = str(info.value)
    assert "'tool/call'" in message and "seq 7" in message
    assert "is not losslessly JSON-serializable" in message
    assert why in message
    assert info.value.field == "data"


def test_reference_cycle_is_refused() -> None:
    data: dict[str, Any] = {}
    data["self"] = data
    with pytest.raises(InvalidEventError, match="cycle"):
        SessionEvent("x/y", 0, 0, data, ignorable=True)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"type": "", "seq": 0, "time": 0}, "type"),
        ({"type": "a\nb", "seq": 0, "time": 0}, "type"),
        ({"type": "t", "seq": -1, "time": 0}, "seq"),
        ({"type": "t", "seq": True, "time": 0}, "seq"),
        ({"type": "t", "seq": 1.0, "time": 0}, "seq"),
        ({"type": "t", "seq": 0, "time": 1.5}, "time"),
        ({"type": "t", "seq": 0, "time": "now"}, "time"),
        ({"type": "t", "seq": 0, "time": 0, "surface_op": "prepend"}, "surfaceOp"),
        (
            {"type": "t", "seq": 0, "time": 0, "surface_op": {"op": "replace", "start": 1}},
            "surfaceOp",
        ),
        ({"type": "t", "seq": 0, "time": 0, "source_event_seqs": "12"}, "sourceEventSeqs"),
        ({"type": "t", "seq": 0, "time": 0, "source_event_seqs": [-1]}, "sourceEventSeqs"),
        ({"type": "t", "seq": 0, "time": 0, "ignorable": 1}, "ignorable"),
    ],
)
def test_envelope_checks(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        SessionEvent(data={}, **kwargs)
    assert info.value.field == field


def test_events_are_immutable_and_inputs_are_copied() -> None:
    data = {"todos": [{"content": "a", "status": "pending"}]}
    event = SessionEvent("todo/write", 0, 0, data)
    data["todos"][0]["content"] = "changed"
    data["todos"].append({"content": "b", "status": "pending"})
    assert event.data == {"todos": [{"content": "a", "status": "pending"}]}
    with pytest.raises(AttributeError):
        event.seq = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        event.data["todos"] = []
    with pytest.raises(TypeError):
        event.data["todos"].append({})
    with pytest.raises(TypeError):
        event.data["todos"][0]["status"] = "completed"
    mutable = event.data_copy()
    mutable["todos"].clear()
    assert copy.deepcopy(event.data) == event.data
    assert len(event.data["todos"]) == 1
    assert pickle.loads(pickle.dumps(event)) == event
    assert json.dumps(event.data) == event.data_json.replace(",", ", ").replace(":", ": ")


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"t","seq":0,"time":0}',
        '{"type":"t","seq":0,"time":0,"data":{},"extra":1}',
        '{"type":"t","seq":0,"time":0,"data":{},"ignorable":false}',
        '{"type":"t","seq":0,"time":0,"data":NaN}',
        '{"type":"t","seq":0,"time":0,"data":{"a":1,"a":2}}',
        '{"type":"t","seq":0,"time":0.5,"data":{}}',
        "[1, 2]",
        "{not json",
        '{"type":"t","seq":0,"time":0,"data":-0.0}',
    ],
)
def test_from_json_raises_invalid_event_error_never_a_raw_parser_error(line: str) -> None:
    with pytest.raises(InvalidEventError):
        SessionEvent.from_json(line)


def test_wire_keys_are_camel_case_and_surface_ops_round_trip() -> None:
    event = SessionEvent(
        "tool/result",
        9,
        1,
        tool_result_data(),
        surface_op={"op": "replace", "start": 3, "end": 4},
        source_event_seqs=[3, 4],
    )
    assert event.surface_op == SurfaceReplace(3, 4)
    wire = json.loads(event.to_json())
    assert list(wire) == ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"]
    assert wire["surfaceOp"] == {"op": "replace", "start": 3, "end": 4}
    ignorable = SessionEvent("vendor/x", 1, 1, [1, "a", None], ignorable=True)
    assert json.loads(ignorable.to_json())["ignorable"] is True
    assert SessionEvent.from_json(ignorable.to_json()) == ignorable


def test_unknown_payload_keys_and_blocks_are_kept_verbatim() -> None:
    data = {
        "id": "u1",
        "role": "user",
        "content": [{"type": "text", "text": "hi", "cache": True}, {"type": "video", "url": "x"}],
        "source": {"kind": "user", "client": "zed"},
        "futureKey": {"nested": [1, 2.5]},
    }
    event = SessionEvent("user/message", 0, 0, data, surface_op="append")
    validate_event(event)
    assert SessionEvent.from_json(event.to_json()).data == data


def test_register_event_type_extends_the_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    class Ping(BaseModel):
        n: int

    from todo_sessions.core import registry

    # the type is gone again after the test (the registry has no way to unregister)
    monkeypatch.setitem(registry._REGISTRY, "test/ping", None)
    monkeypatch.setitem(registry._CHECKS, "test/ping", None)
    del registry._REGISTRY["test/ping"], registry._CHECKS["test/ping"]
    register_event_type("test/ping", Ping)
    register_event_type("test/ping", Ping)  # idempotent
    assert "test/ping" in EVENT_TYPES
    validate_event(SessionEvent("test/ping", 0, 0, {"n": 1}))
    with pytest.raises(InvalidEventError, match="test/ping"):
        validate_event(SessionEvent("test/ping", 0, 0, {"n": "x"}))
    with pytest.raises(ValueError, match="already registered"):
        register_event_type("test/ping", BaseModel)
    with pytest.raises(ValueError, match="already registered"):
        register_event_type("turn/start", Ping)


def test_unregistered_type_passes_only_when_ignorable() -> None:
    validate_event(SessionEvent("vendor/thing", 0, 0, {"a": 1}, ignorable=True))
    with pytest.raises(InvalidEventError, match="not marked ignorable"):
        validate_event(SessionEvent("vendor/thing", 0, 0, {"a": 1}))


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"id": "", "created_at": 0}, "id"),
        ({"id": "a\x00b", "created_at": 0}, "id"),
        ({"id": "x" * 201, "created_at": 0}, "id"),
        ({"id": "ok", "created_at": -1}, "created_at"),
        ({"id": "ok", "created_at": 1.5}, "created_at"),
        ({"id": "ok", "created_at": 0, "cwd": "relative/path"}, "cwd"),
        ({"id": "ok", "created_at": 0, "bogus": 1}, "bogus"),
    ],
)
def test_header_validation(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        SessionHeader(**fields)
    assert info.value.field == field


def test_header_accepts_absolute_paths_and_round_trips_wire() -> None:
    header = SessionHeader(id="s", created_at=1, cwd="/home/me", parent_session="p", seed_length=3)
    assert header.to_wire()["parentSession"] == "p"
    assert SessionHeader.model_validate(header.to_wire()) == header


def _nested(depth: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth - 1):
        node.append([])
        node = node[0]
    return root


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"t","seq":0,"time":0,"data":1e999}',
        '{"type":"t","seq":0,"time":0,"data":' + "9" * 5000 + "}",
        '{"type":"t","seq":0,"time":0,"data":' + "[" * 3000 + "]" * 3000 + "}",
        '{"type":"t","seq":0,"time":0,"data":' + "[" * 300 + "]" * 300 + "}",
        '{"type":"t","seq":0,"time":0,"data":"\\ud800"}',
    ],
    ids=["inf", "huge-int", "very-deep", "deep", "lone-surrogate"],
)
def test_hostile_json_lines_are_invalid_events(line: str) -> None:
    with pytest.raises(InvalidEventError):
        SessionEvent.from_json(line)


def test_nesting_depth_is_capped_and_deep_but_allowed_data_stays_usable() -> None:
    from todo_sessions.core.jsonvalue import MAX_DEPTH

    with pytest.raises(InvalidEventError, match="nests deeper"):
        SessionEvent("x/y", 0, 0, _nested(2000), ignorable=True)
    with pytest.raises(InvalidEventError, match="nests deeper"):
        SessionEvent("x/y", 0, 0, _nested(MAX_DEPTH + 1), ignorable=True)
    event = SessionEvent("x/y", 0, 0, _nested(MAX_DEPTH), ignorable=True)
    assert SessionEvent.from_json(event.to_json()) == event
    assert event.data == _nested(MAX_DEPTH)


@pytest.mark.parametrize("field", ["cwd", "title", "origin"])
@pytest.mark.parametrize("bad", ["nul\x00inside", "lone\udcffsurrogate"])
def test_header_text_must_be_storable_on_every_backend(field: str, bad: str) -> None:
    value = "/" + bad if field == "cwd" else bad
    with pytest.raises(InvalidEventError) as info:
        SessionHeader(id="s", created_at=0, **{field: value})
    assert info.value.field == field
