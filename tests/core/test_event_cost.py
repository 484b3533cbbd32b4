"""Cheap events, same behaviour (issue "cheap events"; docs/format.md, "Events and the envelope").

Building an event copies its payload with orjson and validates it with a check compiled from
the pydantic model; reading one parses with orjson. These tests hold the fast paths to the
behaviour of the stdlib/pydantic paths they short-cut: every refusal, with the same error;
canonical text byte-identical to ``json.dumps``; validation outcomes identical to the model's;
and no process-wide side effects. No timing here: ``bench/events_bench.py`` measures.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import gc
import json
import math
import sys
import types
import unicodedata
import uuid
from typing import Annotated, Any

import pytest
from annotated_types import MaxLen, MinLen
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, field_validator

from todo_sessions import EVENT_TYPES, InvalidEventError, SessionEvent, validate_event
from todo_sessions.core import catalog, envelope, fastcheck, header, jsonvalue
from todo_sessions.core.fastcheck import compile_check
from todo_sessions.core.header import check_session_id
from todo_sessions.core.jsonvalue import (
    MAX_DEPTH,
    LosslessJSONError,
    canonical_fast,
    canonical_parsed,
    decode_json,
    freeze,
    lossless_copy,
)


def stdlib_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def same_json(a: Any, b: Any) -> bool:
    """Equal, and of the same JSON types all the way down (``True`` is not ``1``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same_json, a, b))
    return bool(a == b)


def nested(depth: int, kind: type = list) -> Any:
    root: Any = [] if kind is list else {}
    node = root
    for _ in range(depth - 1):
        child: Any = [] if kind is list else {}
        if kind is list:
            node.append(child)
        else:
            node["k"] = child
        node = child
    return root


def cycle() -> dict[str, Any]:
    data: dict[str, Any] = {}
    data["self"] = data
    return data


class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    HIGH = 3


class Name(enum.StrEnum):
    ADA = "ada"


class MyFloat(float):
    pass


class MyStr(str):
    pass


@dataclasses.dataclass
class Point:
    x: int


# -- refusals: the same error, with or without the fast path -------------------------------------

REFUSED: list[tuple[str, Any, str]] = [
    ("nan", math.nan, "data.nested[0].v is nan"),
    ("inf", math.inf, "data.nested[0].v is inf"),
    ("-inf", -math.inf, "data.nested[0].v is -inf"),
    ("-0.0", -0.0, "data.nested[0].v is -0.0"),
    ("-0.0 nested", {"a": [1.5, {"b": -0.0}]}, "data.nested[0].v.a[1].b is -0.0"),
    ("tuple", (1, 2), "data.nested[0].v has type tuple"),
    ("set", {1, 2}, "data.nested[0].v has type set"),
    ("bytes", b"x", "data.nested[0].v has type bytes"),
    ("bytearray", bytearray(b"x"), "data.nested[0].v has type bytearray"),
    ("datetime", datetime.datetime(2026, 1, 1), "data.nested[0].v has type datetime"),
    ("date", datetime.date(2026, 1, 1), "data.nested[0].v has type date"),
    ("uuid", uuid.UUID(int=1), "data.nested[0].v has type UUID"),
    ("decimal", decimal.Decimal("1.5"), "data.nested[0].v has type Decimal"),
    ("enum", Color.RED, "data.nested[0].v has type Color"),
    ("dataclass", Point(1), "data.nested[0].v has type Point"),
    ("object", object(), "data.nested[0].v has type object"),
    ("int key", {1: "a"}, "data.nested[0].v has a non-str key 1 (int)"),
    ("tuple key", {(1, 2): "a"}, "data.nested[0].v has a non-str key (1, 2) (tuple)"),
    ("none key", {None: "a"}, "data.nested[0].v has a non-str key None (NoneType)"),
    ("cycle", cycle(), "contains a reference cycle"),
    ("surrogate value", "a\ud800b", "data.nested[0].v contains a lone surrogate"),
    ("surrogate key", {"k\udfff": 1}, "data contains a lone surrogate"),
    ("deep list", nested(MAX_DEPTH + 1), "nests deeper than 256 levels"),
    ("deep dict", nested(MAX_DEPTH + 1, dict), "nests deeper than 256 levels"),
    ("very deep", nested(5000), "nests deeper than 256 levels"),
    ("5000 digits", 10**4999, "Exceeds the limit (4300 digits)"),
]


@pytest.mark.parametrize(("value", "reason"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_every_refusal_keeps_its_error(value: Any, reason: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        SessionEvent("tool/call", 7, 0, {"nested": [{"v": value}]})
    err = info.value
    assert (err.event_type, err.seq, err.field) == ("tool/call", 7, "data")
    assert "event 'tool/call' (seq 7): data is not losslessly JSON-serializable" in str(err)
    assert reason in str(err)
    # ... and exactly the reason the stdlib path (the code of before) gives
    with pytest.raises(LosslessJSONError) as fast:
        lossless_copy(value)
    with pytest.raises(LosslessJSONError) as slow:
        jsonvalue._stdlib_lossless_copy(value, "data")
    assert fast.value.reason == slow.value.reason


ACCEPTED: list[tuple[str, Any]] = [
    ("2**70", 2**70),
    ("-(2**70)", -(2**70)),
    ("2**64-1", 2**64 - 1),
    ("-(2**63)-1", -(2**63) - 1),
    ("4300 digits", 10**4299),
    ("bools stay bools", [True, 1, False, 0, None]),
    ("int enum", Level.HIGH),
    ("str enum", Name.ADA),
    ("float subclass", MyFloat(1.5)),
    ("str subclass and key", {MyStr("k"): MyStr("v")}),
    ("ordered dict", collections.OrderedDict([("b", 1), ("a", 2)])),
    ("frozen view", freeze({"a": [1, {"b": [2.5, "x"]}]})),
    ("depth 254", nested(254)),
    ("depth 255", nested(255)),
    ("depth 256 list", nested(MAX_DEPTH)),
    ("depth 256 dict", nested(MAX_DEPTH, dict)),
    ("small floats", [1e-4, 9.99e-5, 1e-5, 1.5e-7, 1e-9, 1e-10, 5e-324, 2.5e-308]),
    ("large floats", [1e15, 9999999999999998.0, 1e16, 1.5e17, 1e22, 1.7976931348623157e308]),
    ("0.0 and text like floats", [0.0, 1.0, "0.00001", "1e-7", "e-5", "-0.0"]),
    ("control and non-ASCII text", '\x00\x1f\x7f\u2028\u2029é😀"\\/'),
]


@pytest.mark.parametrize("value", [a[1] for a in ACCEPTED], ids=[a[0] for a in ACCEPTED])
def test_accepted_values_keep_their_copy_and_text(value: Any) -> None:
    copy, text = lossless_copy(value)
    old_copy, old_text = jsonvalue._stdlib_lossless_copy(value, "data")
    assert text == old_text
    assert same_json(copy, old_copy)
    event = SessionEvent("x/y", 3, 0, value, ignorable=True)
    assert event.data_json == old_text
    again = SessionEvent.from_json(event.to_json())
    assert again == event and again.to_json() == event.to_json()
    assert same_json(again.data_copy(), old_copy)


def test_the_copy_shares_nothing_with_the_input() -> None:
    data = {"a": [1, {"b": 2}], "c": "x"}
    event = SessionEvent("x/y", 0, 0, data, ignorable=True)
    data["a"][1]["b"] = 3  # type: ignore[index]
    assert event.data == {"a": [1, {"b": 2}], "c": "x"}


# -- canonical text: byte-identical to json.dumps -------------------------------------------------

finite_floats = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: not (f == 0.0 and math.copysign(1.0, f) < 0)
)
tiny_floats = st.builds(
    lambda mantissa, exponent: mantissa * 10.0**exponent,
    st.floats(1.0, 10.0, exclude_max=True),
    st.integers(-12, -3),
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(2**80), 2**80)
    | finite_floats
    | tiny_floats
    | st.text()
)
lossless_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(lossless_values)
@example(1e-5)
@example([1e-7, -1.5e-9, 1e16, 123456789.0])
@example({"e-5": "0.0000", "k": 2.5e-6})
def test_canonical_text_is_byte_identical_to_json_dumps(value: Any) -> None:
    expected = stdlib_text(value)
    copy, text = lossless_copy(value)
    assert text == expected
    assert same_json(copy, json.loads(expected))
    assert canonical_fast(value) in (expected, None)  # None: ints past 64 bits, deep nesting
    assert canonical_parsed(value) == expected
    event = SessionEvent("x/y", 1, 2, value, ignorable=True)
    line = event.to_json()
    assert line == f'{{"type":"x/y","seq":1,"time":2,"data":{expected},"ignorable":true}}'
    again = SessionEvent.from_json(line)
    assert again == event and again.to_json() == line
    assert same_json(again.data_copy(), copy)


@settings(max_examples=200, deadline=None)
@given(lossless_values)
def test_non_canonical_wire_text_comes_out_canonical_like_the_strict_parser(value: Any) -> None:
    wire = {"type": "x/y", "seq": 0, "time": 0, "data": value, "ignorable": True}
    for line in (
        json.dumps(wire),
        json.dumps(wire, indent=1),
        json.dumps(wire, ensure_ascii=False),
    ):
        event = SessionEvent.from_json(line)
        strict = SessionEvent._from_wire(decode_json(line), parsed=True)
        assert event == strict
        assert event.data_json == stdlib_text(value)


HOSTILE_LINES = {
    "duplicate key": '{"type":"t","seq":0,"time":0,"data":{"a":1,"a":2}}',
    "duplicate nested key": '{"type":"t","seq":0,"time":0,"data":[{"a":{"b":1,"b":1}}]}',
    "duplicate envelope key": '{"type":"t","seq":0,"seq":0,"time":0,"data":{}}',
    "NaN": '{"type":"t","seq":0,"time":0,"data":[NaN]}',
    "Infinity": '{"type":"t","seq":0,"time":0,"data":{"x":-Infinity}}',
    "1e999": '{"type":"t","seq":0,"time":0,"data":[1e999]}',
    "-0.0": '{"type":"t","seq":0,"time":0,"data":{"x":[-0.0]}}',
    "surrogate value": '{"type":"t","seq":0,"time":0,"data":"\\ud800"}',
    "surrogate key": '{"type":"t","seq":0,"time":0,"data":{"\\udc00":1}}',
    "depth 257": '{"type":"t","seq":0,"time":0,"data":' + "[" * 257 + "]" * 257 + "}",
    "depth 2000": '{"type":"t","seq":0,"time":0,"data":' + "[" * 2000 + "]" * 2000 + "}",
    "5000 digits": '{"type":"t","seq":0,"time":0,"data":' + "9" * 5000 + "}",
    "not an object": "[1,2]",
    "bad envelope": '{"type":"t","seq":-1,"time":0,"data":{}}',
}


@pytest.mark.parametrize("line", HOSTILE_LINES.values(), ids=HOSTILE_LINES.keys())
def test_hostile_lines_are_refused_as_before(line: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        SessionEvent.from_json(line)
    try:  # the strict path alone gives the same error
        SessionEvent._from_wire(decode_json(line), parsed=True)
    except LosslessJSONError as exc:
        assert str(info.value) == f"event is not valid lossless JSON: {exc.reason}"
    except InvalidEventError as exc:
        assert str(info.value) == str(exc) and info.value.field == exc.field
    else:
        pytest.fail("the strict path accepted it")


@pytest.mark.parametrize(
    "data_text",
    ["18446744073709551616", "-9223372036854775809", "1" + "0" * 40, "[2,1.5e-7,1E5,0.1e1]"],
)
def test_numbers_orjson_would_change_are_kept_exact(data_text: str) -> None:
    line = '{"type":"x/y","seq":0,"time":0,"data":' + data_text + ',"ignorable":true}'
    event = SessionEvent.from_json(line)
    value = json.loads(data_text)
    assert same_json(event.data_copy(), value)
    assert event.data_json == stdlib_text(value)


def test_orjson_is_used_only_if_it_writes_what_the_stdlib_writes() -> None:
    assert jsonvalue._ORJSON_MATCHES  # or every event would take the (correct) slow path


# -- validation: the compiled checks answer like the models --------------------------------------

TYPICAL: dict[str, Any] = {
    "assistant/message": {
        "turn": 3,
        "step": 2,
        "message": {
            "id": "m1",
            "role": "assistant",
            "content": [
                {"type": "text", "text": "done"},
                {"type": "reasoning", "text": "hm"},
                {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"},
                {"type": "image", "mediaType": "image/png", "data": "AA"},
                {"type": "future", "x": 1},
            ],
            "source": {"kind": "model", "provider": "p", "model": "m"},
        },
        "usage": {"inputTokens": 3},
        "interrupted": False,
    },
    "tool/call": {"turn": 1, "step": 1, "callId": "c1", "name": "read", "arguments": "{}"},
    "todo/write": {
        "todos": [{"content": f"item {i}", "status": "pending"} for i in range(5)],
    },
    "user/message": {
        "id": "u1",
        "role": "user",
        "content": [
            {"type": "text", "text": "hi"},
            {
                "type": "tool-result",
                "toolCallId": "c1",
                "content": [{"type": "text", "text": "ok"}],
                "isError": None,
            },
        ],
        "source": {"kind": "user"},
    },
    "assistant/chunk": {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": "h"}},
    "turn/start": {"turn": 1},
    "step/end": {"turn": 1, "step": 2},
    "request/context": {"provider": "p", "model": "x"},
}

KEYS = [
    "turn", "step", "message", "usage", "interrupted", "id", "role", "content", "source",
    "type", "text", "kind", "provider", "model", "callId", "call_id", "name", "arguments",
    "todos", "status", "mediaType", "media_type", "data", "toolCallId", "tool_call_id",
    "isError", "is_error", "chunk", "extra", "__class__", "_private", "model_config",
]  # fmt: skip
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-2, 3)
    | st.sampled_from([0.5, 1.0, 2.5, 0.0])
    | st.sampled_from(["", " ", "x", "text", "tool-call", "tool-result", "image", "reasoning"])
    | st.sampled_from(["user", "assistant", "model", "pending", "completed", "done", "c1"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS), children, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with a few random edits anywhere in it (replace, drop, add, wrap)."""
    if isinstance(value, dict):
        out = {k: draw(mutated(v)) if draw(st.integers(0, 3)) == 0 else v for k, v in value.items()}
        if out and draw(st.integers(0, 5)) == 0:
            out.pop(draw(st.sampled_from(sorted(out))))
        if draw(st.integers(0, 5)) == 0:
            out[draw(st.sampled_from(KEYS))] = draw(json_values)
        return out
    if isinstance(value, list):
        out_list = [draw(mutated(v)) if draw(st.integers(0, 3)) == 0 else v for v in value]
        if draw(st.integers(0, 6)) == 0:
            out_list.append(draw(json_values))
        return out_list
    return draw(json_values) if draw(st.integers(0, 2)) == 0 else value


def outcome(event: SessionEvent, *, fast: bool) -> tuple[Any, ...] | None:
    """What `validate_event` says (None: valid), with or without the compiled checks."""
    saved = dict(catalog._CHECKS)
    try:
        if not fast:
            catalog._CHECKS.clear()
        validate_event(event)
    except InvalidEventError as exc:
        return (str(exc), exc.field, exc.event_type, exc.seq)
    finally:
        catalog._CHECKS.clear()
        catalog._CHECKS.update(saved)
    return None


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(sorted(TYPICAL)).flatmap(lambda k: st.tuples(st.just(k), mutated(TYPICAL[k])))
)
def test_validation_outcome_is_the_models(case: tuple[str, Any]) -> None:
    kind, data = case
    event = SessionEvent(kind, 5, 0, data)
    check = catalog._CHECKS[kind]
    assert check is not None
    if check(event.payload):  # the check vouches: the model must accept
        EVENT_TYPES[kind].model.model_validate(event.payload)
    assert outcome(event, fast=True) == outcome(event, fast=False)


def test_the_typical_types_have_a_compiled_check() -> None:
    for kind, data in TYPICAL.items():
        check = catalog._CHECKS[kind]
        assert check is not None and check(SessionEvent(kind, 0, 0, data).payload), kind


def test_a_field_set_by_its_python_name_is_left_to_pydantic() -> None:
    data = {"turn": 1, "step": 1, "call_id": "c1", "name": "read", "arguments": "{}"}
    event = SessionEvent("tool/call", 0, 0, data)
    check = catalog._CHECKS["tool/call"]
    assert check is not None and not check(event.payload)
    assert outcome(event, fast=True) == outcome(event, fast=False)


class Strict(BaseModel):
    model_config = ConfigDict(strict=True)
    n: int


class Lax(BaseModel):
    n: int


class WithValidator(Strict):
    @field_validator("n")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError("odd")
        return value


class WithUpperBound(Strict):
    n: int = Field(le=3)


class WithFactory(Strict):
    items: list[int] = Field(default_factory=list)


class Floaty(Strict):
    f: float


class Root(RootModel[int]):
    pass


class TypedExtras(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    __pydantic_extra__: dict[str, int]
    n: int


@pytest.mark.parametrize(
    "model", [Lax, WithValidator, WithUpperBound, WithFactory, Floaty, Root, TypedExtras]
)
def test_models_outside_the_known_part_get_no_compiled_check(model: type[BaseModel]) -> None:
    assert compile_check(model) is None


class WithLengths(BaseModel):
    model_config = ConfigDict(strict=True)

    s: str = Field(min_length=1, max_length=3)
    t: Annotated[str, MinLen(2), MaxLen(2)] | None = None


def test_a_compiled_check_keeps_a_string_s_length_bounds() -> None:
    check = compile_check(WithLengths)
    assert check is not None
    for good in [{"s": "a"}, {"s": "abc"}, {"s": "ab", "t": "xy"}, {"s": "ab", "t": None}]:
        assert check(good) and WithLengths.model_validate(good)
    for bad in [{"s": ""}, {"s": "abcd"}, {"s": 1}, {"s": "a", "t": "x"}, {"s": "a", "t": "xyz"}]:
        assert not check(bad)
        with pytest.raises(ValidationError):
            WithLengths.model_validate(bad)


def test_a_compiled_check_refuses_what_strict_pydantic_refuses() -> None:
    check = compile_check(Strict)
    assert check is not None
    assert check({"n": 1}) and check({"n": 1, "extra": [1]})
    bad_values: list[Any] = [{"n": True}, {"n": 1.0}, {"n": "1"}, {"m": 1}, {}, [], None]
    for bad in bad_values:
        assert not check(bad)
        with pytest.raises(ValidationError):
            Strict.model_validate(bad)


# -- no process-wide side effects ----------------------------------------------------------------


def container_sizes(*modules: types.ModuleType) -> dict[str, int]:
    return {
        f"{module.__name__}.{name}": len(value)
        for module in modules
        for name, value in vars(module).items()
        if isinstance(value, set | dict | list) and not name.startswith("__")
    }


def test_building_validating_and_parsing_touch_no_global_state() -> None:
    modules = (envelope, jsonvalue, catalog, fastcheck, header)
    gc_before = (gc.isenabled(), gc.get_threshold())
    sizes = container_sizes(*modules)
    recursion = sys.getrecursionlimit()
    for i in range(1000):
        session_id = f"session-{i}-é"
        assert check_session_id(session_id) == session_id
        for kind, data in TYPICAL.items():
            op = "append" if catalog.EVENT_TYPES[kind].surface else None
            payload = {**data} if isinstance(data, dict) else data
            event = SessionEvent(kind, i, i, payload, surface_op=op)
            validate_event(event)
            assert SessionEvent.from_json(event.to_json()) == event
    assert (gc.isenabled(), gc.get_threshold()) == gc_before == (True, gc_before[1])
    assert container_sizes(*modules) == sizes
    assert sys.getrecursionlimit() == recursion


def old_check_session_id(value: Any) -> bool:
    """The rule as it was written before (unicodedata per character)."""
    return (
        isinstance(value, str)
        and 1 <= len(value) <= 200
        and not any(unicodedata.category(ch) in ("Cc", "Cs") for ch in value)
    )


def test_session_id_rule_is_unchanged_for_every_code_point() -> None:
    for start in range(0, sys.maxunicode + 1, 150):
        chunk = "".join(map(chr, range(start, min(start + 150, sys.maxunicode + 1))))
        for ch in chunk if not old_check_session_id(chunk) else ():
            candidate = f"id{ch}"
            try:
                check_session_id(candidate)
                accepted = True
            except InvalidEventError as exc:
                accepted = False
                assert exc.field == "session_id"
            assert accepted == old_check_session_id(candidate), hex(ord(ch))


@pytest.mark.parametrize(
    "value", ["", "x" * 201, 5, None, b"id", "a\x00b", "tab\tid", "\x85", "sur\ud800", "del\x7f"]
)
def test_bad_session_ids_are_refused(value: Any) -> None:
    with pytest.raises(InvalidEventError) as info:
        check_session_id(value)
    assert info.value.field == "session_id"


@pytest.mark.parametrize("value", ["s", "x" * 200, "sessión 1", "a\u2028b", "emoji 😀", "a b"])
def test_good_session_ids_pass(value: str) -> None:
    assert check_session_id(value) is value
