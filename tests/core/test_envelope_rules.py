"""The event envelope: each rule at its exact limit, each refusal in full, the exact wire text,
value semantics, and the canonical-line fast path of `SessionEvent.from_json` (issue #17).

See docs/format.md, "Events and the envelope".
"""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Sequence
from typing import Any

import pytest

from todo_sessions.core import envelope
from todo_sessions.core.envelope import (
    MAX_INT,
    SessionEvent,
    SurfaceReplace,
    parse_surface_op,
)
from todo_sessions.core.jsonvalue import decode_json
from todo_sessions.errors import InvalidEventError


def refused(call: Any) -> InvalidEventError:
    with pytest.raises(InvalidEventError) as info:
        call()
    return info.value


def full(error: InvalidEventError) -> tuple[str, str | None, str | None, int | None]:
    return (str(error), error.field, error.event_type, error.seq)


def test_max_int_is_the_largest_exact_javascript_integer() -> None:
    assert MAX_INT == 9007199254740991


# -- the envelope at its limits ------------------------------------------------------------------


def test_limits_that_pass() -> None:
    for kind in ("t", "x" * 200, "é/ü 1"):
        assert SessionEvent(kind, 0, 0, None).type == kind
    for seq in (0, MAX_INT):
        assert SessionEvent("t", seq, 0, None).seq == seq
    for time in (-MAX_INT, 0, MAX_INT):
        assert SessionEvent("t", 0, time, None).time == time
    event = SessionEvent("t", 9, 0, None, source_event_seqs=[0, MAX_INT])
    assert event.source_event_seqs == (0, MAX_INT)
    assert SessionEvent("t", 0, 0, None, source_event_seqs=()).source_event_seqs == ()
    assert SessionEvent("t", 0, 0, None, source_event_seqs=range(3)).source_event_seqs == (0, 1, 2)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"type": ""},
            ("event type must be a printable string of 1-200 characters, got ''", "type", None, 3),
        ),
        (
            {"type": "x" * 201},
            (
                f"event type must be a printable string of 1-200 characters, got {'x' * 201!r}",
                "type",
                None,
                3,
            ),
        ),
        (
            {"type": 5},
            ("event type must be a printable string of 1-200 characters, got 5", "type", None, 3),
        ),
        (
            {"type": "a\tb"},
            (
                "event type must be a printable string of 1-200 characters, got 'a\\tb'",
                "type",
                None,
                3,
            ),
        ),
        (
            {"seq": -1},
            ("event 't' (seq -1): seq must be a non-negative integer, got -1", "seq", "t", None),
        ),
        (
            {"seq": MAX_INT + 1},
            (
                f"event 't' (seq {MAX_INT + 1}): seq must be a non-negative integer, "
                f"got {MAX_INT + 1}",
                "seq",
                "t",
                None,
            ),
        ),
        (
            {"seq": True},
            ("event 't' (seq ?): seq must be a non-negative integer, got True", "seq", "t", None),
        ),
        (
            {"seq": 1.0},
            ("event 't' (seq ?): seq must be a non-negative integer, got 1.0", "seq", "t", None),
        ),
        (
            {"time": 1.5},
            ("event 't' (seq 3): time must be an integer (Unix epoch ms), got 1.5", "time", "t", 3),
        ),
        (
            {"time": MAX_INT + 1},
            (
                f"event 't' (seq 3): time must be an integer (Unix epoch ms), got {MAX_INT + 1}",
                "time",
                "t",
                3,
            ),
        ),
        (
            {"time": -MAX_INT - 1},
            (
                f"event 't' (seq 3): time must be an integer (Unix epoch ms), got {-MAX_INT - 1}",
                "time",
                "t",
                3,
            ),
        ),
        (
            {"time": False},
            (
                "event 't' (seq 3): time must be an integer (Unix epoch ms), got False",
                "time",
                "t",
                3,
            ),
        ),
        (
            {"source_event_seqs": "12"},
            (
                "event 't' (seq 3): sourceEventSeqs must be a list of integers",
                "sourceEventSeqs",
                "t",
                3,
            ),
        ),
        (
            {"source_event_seqs": b"12"},
            (
                "event 't' (seq 3): sourceEventSeqs must be a list of integers",
                "sourceEventSeqs",
                "t",
                3,
            ),
        ),
        (
            {"source_event_seqs": {1: 1}},
            (
                "event 't' (seq 3): sourceEventSeqs must be a list of integers",
                "sourceEventSeqs",
                "t",
                3,
            ),
        ),
        (
            {"source_event_seqs": {1, 2}},
            (
                "event 't' (seq 3): sourceEventSeqs must be a list of integers",
                "sourceEventSeqs",
                "t",
                3,
            ),
        ),
        (
            {"source_event_seqs": 5},
            (
                "event 't' (seq 3): sourceEventSeqs must be a list of integers",
                "sourceEventSeqs",
                "t",
                3,
            ),
        ),
        (
            {"source_event_seqs": [0, -1]},
            (
                "event 't' (seq 3): sourceEventSeqs must hold non-negative integers, got [0, -1]",
                "sourceEventSeqs",
                "t",
                3,
            ),
        ),
        (
            {"source_event_seqs": [MAX_INT + 1]},
            (
                f"event 't' (seq 3): sourceEventSeqs must hold non-negative integers, "
                f"got [{MAX_INT + 1}]",
                "sourceEventSeqs",
                "t",
                3,
            ),
        ),
        (
            {"source_event_seqs": [1, True]},
            (
                "event 't' (seq 3): sourceEventSeqs must hold non-negative integers, got [1, True]",
                "sourceEventSeqs",
                "t",
                3,
            ),
        ),
        (
            {"source_event_seqs": [1.0]},
            (
                "event 't' (seq 3): sourceEventSeqs must hold non-negative integers, got [1.0]",
                "sourceEventSeqs",
                "t",
                3,
            ),
        ),
        (
            {"ignorable": 1},
            ("event 't' (seq 3): ignorable must be true when present, got 1", "ignorable", "t", 3),
        ),
        (
            {"ignorable": None},
            (
                "event 't' (seq 3): ignorable must be true when present, got None",
                "ignorable",
                "t",
                3,
            ),
        ),
        (
            {"data": {1: 2}},
            (
                "event 't' (seq 3): data is not losslessly JSON-serializable: "
                "data has a non-str key 1 (int)",
                "data",
                "t",
                3,
            ),
        ),
    ],
)
def test_envelope_refusals_in_full(kwargs: dict[str, Any], expected: tuple[Any, ...]) -> None:
    fields: dict[str, Any] = {"type": "t", "seq": 3, "time": 0, "data": {}, **kwargs}
    assert full(refused(lambda: SessionEvent(**fields))) == expected


def test_ignorable_false_is_the_default() -> None:
    assert SessionEvent("t", 0, 0, None, ignorable=False).ignorable is False
    assert SessionEvent("t", 0, 0, None).ignorable is False
    assert SessionEvent("t", 0, 0, None, ignorable=True).ignorable is True


# -- surface ops ---------------------------------------------------------------------------------

BAD_OPS: list[Any] = [
    "prepend",
    "",
    {"op": "replace", "start": 1},
    {"op": "replace", "start": 1, "end": 2, "x": 0},
    {"op": "swap", "start": 1, "end": 2},
    {"op": "replace", "start": 1, "end": True},
    {"op": "replace", "start": False, "end": 1},
    {"op": "replace", "start": 1.0, "end": 2},
    {"op": "replace", "start": -1, "end": 2},
    {"op": "replace", "start": 1, "end": -1},
    {"op": "replace", "start": MAX_INT + 1, "end": 2},
    {"op": "replace", "start": 1, "end": MAX_INT + 1},
    ["op", "start", "end"],
    5,
]


@pytest.mark.parametrize("op", BAD_OPS)
def test_bad_surface_ops(op: Any) -> None:
    error = refused(lambda: SessionEvent("t", 3, 0, {}, surface_op=op))
    assert full(error) == (
        f'event \'t\' (seq 3): surfaceOp must be "append" or {{"op": "replace", "start": int, '
        f'"end": int}}, got {op!r}',
        "surfaceOp",
        "t",
        3,
    )
    error = refused(lambda: parse_surface_op(op))
    assert (str(error).split(":")[0], error.event_type, error.seq) == (
        "event <invalid type> (seq ?)",
        None,
        None,
    )


@pytest.mark.parametrize(
    "op",
    [
        {"op": "replace", "start": 0, "end": 0},
        {"op": "replace", "start": MAX_INT, "end": MAX_INT},
        {"op": "replace", "start": 5, "end": 2},  # the order is the surface rules' business
    ],
)
def test_replace_ops_at_their_limits(op: dict[str, Any]) -> None:
    parsed = parse_surface_op(op)
    assert parsed == SurfaceReplace(op["start"], op["end"])
    assert parsed.to_wire() == op
    event = SessionEvent("t", 3, 0, {}, surface_op=op)
    assert event.surface_op == parsed
    assert json.loads(event.to_json())["surfaceOp"] == op


def test_append_and_none_and_replace_objects_pass_as_they_are() -> None:
    assert parse_surface_op(None) is None
    assert parse_surface_op("append") == "append"
    replace = SurfaceReplace(1, 2)
    assert parse_surface_op(replace) is replace
    assert SessionEvent("t", 3, 0, {}, surface_op=replace).surface_op is replace
    assert SessionEvent("t", 3, 0, {}, surface_op="append").surface_op == "append"


def test_surface_replace_is_a_frozen_value() -> None:
    replace = SurfaceReplace(1, 2)
    with pytest.raises(AttributeError):
        replace.start = 3  # type: ignore[misc]
    assert replace == SurfaceReplace(1, 2) and hash(replace) == hash(SurfaceReplace(1, 2))
    assert replace.to_wire() == {"op": "replace", "start": 1, "end": 2}


# -- wire text and dicts --------------------------------------------------------------------------


def test_the_exact_wire_text() -> None:
    event = SessionEvent(
        "t\u00e9",
        3,
        -4,
        {"a": [1, "é"]},
        surface_op={"op": "replace", "start": 1, "end": 2},
        source_event_seqs=[0, 1],
        ignorable=True,
    )
    line = (
        '{"type":"t\u00e9","seq":3,"time":-4,"data":{"a":[1,"é"]},'
        '"surfaceOp":{"op":"replace","start":1,"end":2},"sourceEventSeqs":[0,1],"ignorable":true}'
    )
    assert event.to_json() == line
    assert event.to_dict() == json.loads(line)
    assert SessionEvent("t", 0, 0, [], surface_op="append").to_json() == (
        '{"type":"t","seq":0,"time":0,"data":[],"surfaceOp":"append"}'
    )
    plain = SessionEvent('q"\\', 1, 2, None, source_event_seqs=[])
    assert (
        plain.to_json() == '{"type":"q\\"\\\\","seq":1,"time":2,"data":null,"sourceEventSeqs":[]}'
    )
    assert plain.to_dict() == {
        "type": 'q"\\',
        "seq": 1,
        "time": 2,
        "data": None,
        "sourceEventSeqs": [],
    }
    bare = SessionEvent("t", 0, 0, {})
    assert bare.to_dict() == {"type": "t", "seq": 0, "time": 0, "data": {}}
    assert bare.to_json() == '{"type":"t","seq":0,"time":0,"data":{}}'


def test_to_dict_is_a_fresh_mutable_copy() -> None:
    event = SessionEvent("t", 0, 0, {"a": [1]}, source_event_seqs=[0])
    wire = event.to_dict()
    wire["data"]["a"].append(2)
    wire["sourceEventSeqs"].append(5)
    assert event.data == {"a": [1]} and event.source_event_seqs == (0,)
    assert type(wire["data"]) is dict and type(wire["data"]["a"]) is list


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ([], ("an event must be a JSON object, got list", None, None, None)),
        (
            {"type": "t", "seq": 1, "time": 0, "data": {}, "x": 1, "b": 2},
            ("event 't' (seq 1): unknown top-level keys ['b', 'x']", "b", "t", 1),
        ),
        (
            {"type": "t", "seq": 1, "time": 0, "data": {}, 5: 1},
            ("event 't' (seq 1): unknown top-level keys ['5']", "5", "t", 1),
        ),
        (
            {"seq": 1, "time": 0, "data": {}},
            ("event <invalid type> (seq 1): missing required key 'type'", "type", None, 1),
        ),
        (
            {"type": "t", "time": 0, "data": {}},
            ("event 't' (seq ?): missing required key 'seq'", "seq", "t", None),
        ),
        (
            {"type": "t", "seq": 1, "data": {}},
            ("event 't' (seq 1): missing required key 'time'", "time", "t", 1),
        ),
        (
            {"type": "t", "seq": 1, "time": 0},
            ("event 't' (seq 1): missing required key 'data'", "data", "t", 1),
        ),
        (
            {"type": "t", "seq": 1, "time": 0, "data": {}, "ignorable": False},
            (
                "event 't' (seq 1): ignorable must be true when present, got False",
                "ignorable",
                "t",
                1,
            ),
        ),
        (
            {"type": "t", "seq": 1, "time": 0, "data": {}, "ignorable": None},
            (
                "event 't' (seq 1): ignorable must be true when present, got None",
                "ignorable",
                "t",
                1,
            ),
        ),
    ],
)
def test_from_dict_refusals_in_full(wire: Any, expected: tuple[Any, ...]) -> None:
    assert full(refused(lambda: SessionEvent.from_dict(wire))) == expected


def test_from_dict_takes_every_wire_key() -> None:
    wire = {
        "type": "t",
        "seq": 4,
        "time": 1,
        "data": {"k": [1]},
        "surfaceOp": {"op": "replace", "start": 0, "end": 1},
        "sourceEventSeqs": [2, 3],
        "ignorable": True,
    }
    event = SessionEvent.from_dict(wire)
    assert event.to_dict() == wire
    assert event.surface_op == SurfaceReplace(0, 1)
    assert event.source_event_seqs == (2, 3) and event.ignorable is True
    wire["data"]["k"].append(2)  # type: ignore[index]
    assert event.data == {"k": [1]}  # a dict given by a caller is copied
    plain = SessionEvent.from_dict({"type": "t", "seq": 4, "time": 1, "data": None})
    assert (plain.surface_op, plain.source_event_seqs, plain.ignorable) == (None, None, False)


# -- from_json: the canonical fast path and the strict path ----------------------------------------

CANONICAL_LINES = [
    '{"type":"t","seq":0,"time":0,"data":{}}',
    '{"type":"'
    + "x" * 200
    + '","seq":'
    + str(MAX_INT)
    + ',"time":'
    + str(-MAX_INT)
    + ',"data":[]}',
    '{"type":"t","seq":1,"time":' + str(MAX_INT) + ',"data":null,"surfaceOp":"append"}',
    '{"type":"t","seq":1,"time":0,"data":1,"surfaceOp":{"op":"replace","start":0,"end":'
    + str(MAX_INT)
    + "}}",
    '{"type":"t","seq":9,"time":0,"data":"é","sourceEventSeqs":[0,' + str(MAX_INT) + "]}",
    '{"type":"t","seq":9,"time":0,"data":{"a":[1.5,true]},"sourceEventSeqs":[],"ignorable":true}',
    '{"type":"t","seq":0,"time":0,"data":[1e-05,0.0001]}',
    '{"type":"t","seq":3,"time":0,"data":{},"surfaceOp":{"op":"replace","start":0,"end":1},'
    '"sourceEventSeqs":[1,2],"ignorable":true}',
]


def strict_calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    original = envelope.decode_json

    def spy(text: Any, **kwargs: Any) -> Any:
        calls.append(text)
        return original(text, **kwargs)

    monkeypatch.setattr(envelope, "decode_json", spy)
    return calls


@pytest.mark.parametrize("line", CANONICAL_LINES)
def test_canonical_lines_take_the_fast_path(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Our own lines (canonical form) are read without the strict parser, and come back
    byte-identical (the module's documented design; the strict path gives the same event)."""
    calls = strict_calls(monkeypatch)
    event = SessionEvent.from_json(line)
    assert calls == []
    assert event.to_json() == line
    assert calls == []
    assert event == SessionEvent._from_wire(decode_json(line), parsed=True)
    for ending in ("\n", "\r\n"):  # a JSONL line as read, with its line ending
        assert SessionEvent.from_json(line + ending) == event
    assert calls == []


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"t","seq":0,"time":0,"data":{},"ignorable":false}',
        '{"type":"t","seq":-1,"time":0,"data":{}}',
        '{"type":"t","seq":' + str(MAX_INT + 1) + ',"time":0,"data":{}}',
        '{"type":"t","seq":0,"time":' + str(MAX_INT + 1) + ',"data":{}}',
        '{"type":"t","seq":0,"time":' + str(-MAX_INT - 1) + ',"data":{}}',
        '{"type":"t","seq":true,"time":0,"data":{}}',
        '{"type":"t","seq":0,"time":1.0,"data":{}}',
        '{"type":5,"seq":0,"time":0,"data":{}}',
        '{"type":"","seq":0,"time":0,"data":{}}',
        '{"type":"' + "x" * 201 + '","seq":0,"time":0,"data":{}}',
        '{"type":"a\\nb","seq":0,"time":0,"data":{}}',
        '{"type":"t","seq":0,"time":0}',
        '{"type":"t","seq":0,"time":0,"data":{},"extra":1}',
        '{"type":"t","seq":0,"time":0,"data":{},"surfaceOp":"prepend"}',
        '{"type":"t","seq":0,"time":0,"data":{},"surfaceOp":["append"]}',
        '{"type":"t","seq":0,"time":0,"data":{},"surfaceOp":{"op":"replace","start":-1,"end":0}}',
        '{"type":"t","seq":0,"time":0,"data":{},"sourceEventSeqs":{"a":1}}',
        '{"type":"t","seq":0,"time":0,"data":{},"sourceEventSeqs":[-1]}',
        '{"type":"t","seq":0,"time":0,"data":{},"sourceEventSeqs":[' + str(MAX_INT + 1) + "]}",
        '{"type":"t","seq":0,"time":0,"data":{},"sourceEventSeqs":[true]}',
        '{"type":"t","seq":0,"time":0,"data":[-0.0]}',
        '{"type":"t","seq":0,"time":0,"data":{"a":1,"a":1}}',
        "[]",
        '"event"',
        "{",
    ],
)
def test_lines_the_strict_path_refuses(line: str) -> None:
    error = refused(lambda: SessionEvent.from_json(line))
    try:
        wire = envelope.decode_json(line)
    except Exception as exc:
        assert str(error) == f"event is not valid lossless JSON: {exc}"
        return
    strict = refused(lambda: SessionEvent._from_wire(wire, parsed=True))
    assert full(error) == full(strict)


@pytest.mark.parametrize(
    "line",
    [
        '{"seq":0,"type":"t","time":0,"data":{}}',
        '{"type":"t","seq":0,"time":0,"data":{"a":1.0E2}}',
        '{"type":"t","seq":0,"time":0,"data":{}, "ignorable":true}',
        '{"type":"t","seq":0,"time":0,"data":"\\u00e9"}',
        '{"type":"t","seq":0,"time":0,"data":[18446744073709551616]}',
        '{"type":"t","seq":0,"time":0,"data":{},"surfaceOp":{"end":1,"op":"replace","start":0}}',
        '{"type":"t","seq":0,"time":0,"data":{},"sourceEventSeqs":[ 1 ]}',
    ],
)
def test_other_lines_come_out_canonical(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = strict_calls(monkeypatch)
    event = SessionEvent.from_json(line)
    # Plain JSON from other producers is read by orjson when that reading is the strict one
    # (`_read_as_written`); otherwise by the strict parser. Either way, the strict event.
    assert calls in ([], [line])
    assert event == SessionEvent._from_wire(decode_json(line), parsed=True)
    again = SessionEvent.from_json(event.to_json())
    assert again == event and again.to_json() == event.to_json()
    assert event.to_dict() == json.loads(line)


def test_from_json_of_bytes() -> None:
    line = '{"type":"t","seq":0,"time":0,"data":"é"}'
    assert SessionEvent.from_json(line.encode()) == SessionEvent.from_json(line)
    error = refused(lambda: SessionEvent.from_json(b'{"type":"\xff"}'))
    assert str(error).startswith("event is not valid lossless JSON: not UTF-8:")


def test_fast_path_helper_declines() -> None:
    assert envelope._from_canonical_json(b'{"type":"t","seq":0,"time":0,"data":{}}') is None
    assert envelope._from_canonical_json('{"type":"t","seq":0,"time":0,"data":{} }') is None
    assert envelope._from_canonical_json("[" * 100_000) is None
    event = envelope._from_canonical_json('{"type":"t","seq":0,"time":0,"data":{}}')
    assert event == SessionEvent("t", 0, 0, {})


# -- value semantics -----------------------------------------------------------------------------


def test_equality_hash_and_the_key() -> None:
    a = SessionEvent("t", 1, 2, {"x": [1]}, surface_op="append", source_event_seqs=[0])
    b = SessionEvent.from_json(a.to_json())
    assert a == b and hash(a) == hash(b)
    assert (a == "x") is False and a != 5
    assert a.__eq__(5) is NotImplemented
    for change in (
        {"type": "u"},
        {"seq": 2},
        {"time": 3},
        {"data": {"x": [2]}},
        {"surface_op": None},
        {"source_event_seqs": [0, 1]},
        {"ignorable": True},
    ):
        assert a.replace(**change) != a, change
    assert SessionEvent("t", 1, 2, 1) != SessionEvent("t", 1, 2, 1.0)  # the text differs


def test_events_are_immutable() -> None:
    event = SessionEvent("t", 1, 2, {"x": [1]})
    with pytest.raises(AttributeError, match=r"^SessionEvent is immutable \(cannot set 'seq'\)$"):
        event.seq = 5  # type: ignore[misc]
    with pytest.raises(
        AttributeError, match=r"^SessionEvent is immutable \(cannot delete 'seq'\)$"
    ):
        del event.seq  # type: ignore[misc]
    assert event.seq == 1
    with pytest.raises(TypeError):
        event.data["x"].append(2)


def test_data_views_and_copies() -> None:
    event = SessionEvent("t", 1, 2, {"x": [1]})
    assert event.data is event.data  # frozen once, then kept
    copied = event.data_copy()
    copied["x"].append(2)
    assert event.data == {"x": [1]} and event.data_json == '{"x":[1]}'
    trusted = SessionEvent._trusted("t", 1, 2, {"x": [1]}, '{"x":[1]}', None, None, False)
    assert trusted == event and trusted.data == {"x": [1]}


def test_replace_validates_like_a_new_event() -> None:
    event = SessionEvent("t", 1, 2, {"x": 1}, surface_op="append", source_event_seqs=[0])
    moved = event.replace(seq=7)
    assert (moved.seq, moved.type, moved.time, moved.data) == (7, "t", 2, {"x": 1})
    assert (moved.surface_op, moved.source_event_seqs, moved.ignorable) == ("append", (0,), False)
    assert event.replace() == event
    with pytest.raises(TypeError, match=r"^unknown SessionEvent fields: \['bogus', 'zz'\]$"):
        event.replace(bogus=1, zz=2)
    assert refused(lambda: event.replace(seq=-1)).field == "seq"


def test_repr() -> None:
    event = SessionEvent(
        "t", 1, 2, {"a": 1}, surface_op="append", source_event_seqs=[0], ignorable=True
    )
    assert repr(event) == (
        "SessionEvent('t', seq=1, time=2, data={\"a\":1}, surface_op='append', "
        "source_event_seqs=[0], ignorable=True)"
    )
    assert repr(SessionEvent("t", 1, 2, None)) == "SessionEvent('t', seq=1, time=2, data=null)"
    exact = "x" * 78  # JSON text of 80 characters: shown whole
    assert (
        repr(SessionEvent("t", 1, 2, exact))
        == f"SessionEvent('t', seq=1, time=2, data=\"{exact}\")"
    )
    longer = "x" * 79
    assert repr(SessionEvent("t", 1, 2, longer)) == (
        f"SessionEvent('t', seq=1, time=2, data=\"{longer[:76]}...)"
    )


def test_pickle_and_copy_round_trip() -> None:
    event = SessionEvent("t", 1, 2, {"a": [1.5]}, surface_op=SurfaceReplace(0, 1), ignorable=True)
    again = pickle.loads(pickle.dumps(event))
    assert again == event and again.to_json() == event.to_json()
    assert copy.deepcopy(event) == event


class Seqs(Sequence[int]):
    def __init__(self, *items: int) -> None:
        self.items = items

    def __getitem__(self, index: Any) -> Any:
        return self.items[index]

    def __len__(self) -> int:
        return len(self.items)


def test_any_sequence_of_seqs_is_taken_as_a_tuple() -> None:
    assert SessionEvent("t", 5, 0, None, source_event_seqs=Seqs(1, 2)).source_event_seqs == (1, 2)
    assert SessionEvent("t", 5, 0, None, source_event_seqs=(3,)).source_event_seqs == (3,)


def test_the_strict_path_does_not_copy_what_its_own_parser_produced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A payload fresh from the strict parser is nobody else's: it is checked (canonical_parsed)
    but not copied again (lossless_copy), as `_Parsed` says."""
    copies: list[Any] = []
    original = envelope.lossless_copy

    def spy(value: Any, **kwargs: Any) -> Any:
        copies.append(value)
        return original(value, **kwargs)

    monkeypatch.setattr(envelope, "lossless_copy", spy)
    event = SessionEvent.from_json('{ "type": "t", "seq": 0, "time": 0, "data": {"a": [1]} }')
    assert event.data == {"a": [1]} and event.data_json == '{"a":[1]}'
    assert copies == []
    SessionEvent.from_dict({"type": "t", "seq": 0, "time": 0, "data": {"a": [1]}})
    assert copies == [{"a": [1]}]


def test_surface_op_is_a_usable_public_type() -> None:
    """`SurfaceOp` is exported for annotations, and validates at runtime like the envelope."""
    from pydantic import TypeAdapter, ValidationError

    adapter: TypeAdapter[Any] = TypeAdapter(envelope.SurfaceOp)
    assert adapter.validate_python("append") == "append"
    replace = SurfaceReplace(1, 2)
    assert adapter.validate_python(replace) is replace
    with pytest.raises(ValidationError):
        adapter.validate_python("prepend")
    with pytest.raises(ValidationError):
        adapter.validate_python("")


def test_surface_replace_is_slotted() -> None:
    replace = SurfaceReplace(1, 2)
    assert not hasattr(replace, "__dict__")
    with pytest.raises((AttributeError, TypeError)):
        replace.extra = 1  # type: ignore[attr-defined]


# -- plain JSON from other producers (json.dumps with its spaces) --------------------------------


def test_plain_json_of_other_producers_is_read_fast_and_as_the_strict_path_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = strict_calls(monkeypatch)
    events = [
        SessionEvent("t", 3, 5, {"z": [1, 2.5, "é", None, True], "say": 'a "quoted": word'}),
        SessionEvent(
            "t", 4, 5, {"k": {"k": {}}}, surface_op={"op": "replace", "start": 0, "end": 2}
        ),
        SessionEvent("t", 5, 5, [18446744073709551615, -(2**63)], source_event_seqs=[1, 2]),
        SessionEvent("t", 6, 5, {"x": ["a", "b"]}, ignorable=True),
    ]
    for event in events:
        for text in (json.dumps(event.to_dict()), json.dumps(event.to_dict(), indent=1)):
            assert SessionEvent.from_json(text) == event
            assert SessionEvent.from_json(text).to_json() == event.to_json()
    assert calls == []


@pytest.mark.parametrize(
    "data",
    [
        '{"a": 1, "a": 2}',
        '{"a" : 1, "a": 2}',
        '{"a":\n1, "a": 2}',
        '{"a\\\\": 1, "a\\\\": 2}',
        '{"a\\"": 1, "a\\"": 2}',
        '{"a": 1, "b": "\\u003a", "a": 2}',
        '{"k": ":v", "k": 1}',
        '{"k": {"x": 1, "x": 1}}',
        '{":starts with a colon": ":", "ok": [1, 2]}',
        "[18446744073709551616]",
        "[-9223372036854775809]",
        "[1e999]",
        "[-0.0]",
        "[NaN]",
        '["\\ud800"]',
    ],
)
def test_plain_json_keeps_every_refusal_and_every_integer(data: str) -> None:
    line = '{"type": "t", "seq": 0, "time": 0, "data": ' + data + "}"
    try:
        wire = envelope.decode_json(line)
    except Exception as exc:
        error = refused(lambda: SessionEvent.from_json(line))
        assert str(error) == f"event is not valid lossless JSON: {exc}"
        return
    try:
        strict = SessionEvent._from_wire(wire, parsed=True)
    except InvalidEventError as exc:
        assert full(refused(lambda: SessionEvent.from_json(line))) == full(exc)
        return
    event = SessionEvent.from_json(line)
    assert event == strict and event.data_json == strict.data_json  # 2**64 stays an integer
    assert event.data_json == json.dumps(json.loads(data), separators=(",", ":"))


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"t","seq":0,"time":0,"data":"\\u00e9"}',
        '{"type":"t","seq":0,"time":0,"data":{"a":1.0E2}}',
        '{"type":"t","seq":0,"time":0,"data":{}, "ignorable":true}',
    ],
)
def test_compact_lines_not_in_canonical_form_skip_the_strict_parser_too(
    line: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """They start like ours, so the canonical comparison comes first; when it fails, the plain
    reading (not the strict parser) takes them, with the strict path's event."""
    calls = strict_calls(monkeypatch)
    event = SessionEvent.from_json(line)
    assert calls == []
    assert event == SessionEvent._from_wire(decode_json(line), parsed=True)
    assert event.to_json() != line


@pytest.mark.parametrize("key", ["surfaceOp", "sourceEventSeqs"])
@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": ")])
def test_a_null_surface_field_alone_is_refused_on_every_reading(
    key: str, separators: tuple[str, str]
) -> None:
    """``"surfaceOp": null`` or ``"sourceEventSeqs": null``, each on its own, in our compact
    form and in other producers' spaced form: refused, naming the key (never read as absent)."""
    data = {"id": "u", "role": "user", "source": {"kind": "user"}, "content": []}
    wire: dict[str, Any] = {"type": "user/message", "seq": 3, "time": 0, "data": data, key: None}
    if key == "sourceEventSeqs":
        wire["surfaceOp"] = "append"
    with pytest.raises(InvalidEventError) as caught:
        SessionEvent.from_json(json.dumps(wire, separators=separators))
    assert caught.value.field == key and "null" in str(caught.value)
