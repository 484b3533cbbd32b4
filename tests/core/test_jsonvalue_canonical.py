"""Lossless JSON: canonical text, exact refusals with their paths, the strict parser, frozen
views, and the fast paths taken where the module says they are (issue #17).

See todo_sessions/core/jsonvalue.py and docs/format.md, "Lossless data".
"""

from __future__ import annotations

import copy
import json
import math
import pickle
from typing import Any

import pytest

from todo_sessions.core import jsonvalue
from todo_sessions.core.jsonvalue import (
    MAX_DEPTH,
    FrozenDict,
    FrozenList,
    LosslessJSONError,
    canonical_fast,
    canonical_json,
    canonical_parsed,
    decode_fast,
    decode_json,
    freeze,
    lossless_copy,
    thaw,
)


def nested_lists(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def reason(call: Any) -> str:
    with pytest.raises(LosslessJSONError) as info:
        call()
    assert isinstance(info.value, ValueError)
    assert str(info.value) == info.value.reason
    return info.value.reason


# -- canonical text ------------------------------------------------------------------------------


def test_canonical_text_is_compact_unescaped_and_ordered_as_given() -> None:
    value = {"b": [1, 2.5, "é\u2028😀"], "a": None, "c": {"t": True, "f": False}}
    expected = '{"b":[1,2.5,"é\u2028😀"],"a":null,"c":{"t":true,"f":false}}'
    assert canonical_json(value) == expected
    assert lossless_copy(value)[1] == expected
    assert canonical_fast(value) == expected
    assert canonical_parsed(value) == expected


def test_canonical_json_refuses_non_finite_floats() -> None:
    with pytest.raises(ValueError, match="Out of range float"):
        canonical_json([math.nan])


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e-05, "1e-05"),
        (1.5e-07, "1.5e-07"),
        ([0.0001, 0.00001], "[0.0001,1e-05]"),
        ({"k": 2.5e-6, "s": "0.00001"}, '{"k":2.5e-06,"s":"0.00001"}'),
        (1e16, "1e+16"),
        (0.1, "0.1"),
    ],
)
def test_small_floats_are_written_like_repr(value: Any, text: str) -> None:
    """orjson writes these otherwise (``0.00001``, ``1e-7``): the stdlib's text is canonical."""
    assert lossless_copy(value)[1] == text
    assert canonical_fast(value) == text
    assert canonical_parsed(value) == text


# -- lossless_copy: refusals name the path --------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"a": [1, {"b": math.nan}]}, "payload.a[1].b is nan"),
        ([math.inf], "payload[0] is inf"),
        ({"x": -math.inf}, "payload.x is -inf"),
        ([1.0, -0.0], "payload[1] is -0.0"),
        ({"a": (1,)}, "payload.a has type tuple"),
        ({"k": {2: 1}}, "payload.k has a non-str key 2 (int)"),
        ([["ok", "a\udc00"]], "payload[0][1] contains a lone surrogate"),
        ({"v": b"x"}, "payload.v has type bytes"),
    ],
)
def test_refusals_name_the_path(value: Any, text: str) -> None:
    assert reason(lambda: lossless_copy(value, path="payload")) == text
    assert reason(lambda: jsonvalue._stdlib_lossless_copy(value, "payload")) == text


def test_the_copy_is_fresh_and_equal() -> None:
    value = {"a": [1, {"b": [2.5, "x"]}], "c": None}
    copied, text = lossless_copy(value)
    assert copied == value and copied is not value
    assert copied["a"] is not value["a"] and copied["a"][1] is not value["a"][1]
    assert text == '{"a":[1,{"b":[2.5,"x"]}],"c":null}'
    slow_copy, slow_text = jsonvalue._stdlib_lossless_copy(value, "data")
    assert (slow_copy, slow_text) == (copied, text) and slow_copy is not value


def test_depth_limit_is_exact() -> None:
    assert lossless_copy(nested_lists(MAX_DEPTH))[1] == "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert jsonvalue._stdlib_lossless_copy(nested_lists(MAX_DEPTH), "data")[0] == nested_lists(
        MAX_DEPTH
    )
    too_deep = nested_lists(MAX_DEPTH + 1)
    assert reason(lambda: lossless_copy(too_deep)) == "data nests deeper than 256 levels"
    assert reason(lambda: jsonvalue._stdlib_lossless_copy(too_deep, "p")) == (
        "p nests deeper than 256 levels"
    )
    # many containers side by side are not deep
    wide = [[[]] for _ in range(300)]
    assert lossless_copy(wide)[0] == wide
    assert jsonvalue._too_deep(wide, canonical_json(wide)) is False
    mixed: Any = {"k": nested_lists(MAX_DEPTH - 1)}
    assert jsonvalue._too_deep(mixed, canonical_json(mixed)) is False
    mixed = {"k": nested_lists(MAX_DEPTH)}
    assert jsonvalue._too_deep(mixed, canonical_json(mixed)) is True
    assert jsonvalue._too_deep([mixed], "[]") is False  # few brackets: no walk at all


def test_too_deep_counts_dicts_and_lists() -> None:
    value: Any = {}
    for i in range(MAX_DEPTH):
        value = {"k": value} if i % 2 else [value]
    assert isinstance(value, dict)  # 257 levels: a dict, in a list, in a dict, ...
    assert jsonvalue._too_deep(value, canonical_json(value)) is True
    assert jsonvalue._too_deep(value["k"], canonical_json(value["k"])) is False
    assert jsonvalue._too_deep(value["k"][0], canonical_json(value["k"][0])) is False


def test_a_cycle_is_named() -> None:
    value: list[Any] = [1]
    value.append(value)
    assert reason(lambda: lossless_copy(value, path="p")) == "p contains a reference cycle"


def test_values_that_compare_unequal_after_a_round_trip_are_refused() -> None:
    class Weird(list[Any]):
        def __eq__(self, other: object) -> bool:
            return False

        def __ne__(self, other: object) -> bool:
            return True

        __hash__ = None  # type: ignore[assignment]

    assert reason(lambda: lossless_copy(Weird([1]))) == "data does not survive a JSON round trip"
    assert reason(lambda: jsonvalue._stdlib_lossless_copy(Weird([1]), "p")) == (
        "p does not survive a JSON round trip"
    )


def test_negative_zero_is_found_anywhere() -> None:
    for value in (-0.0, [1, [-0.0]], {"a": {"b": -0.0}}):
        assert jsonvalue._has_negative_zero(value) is True
    for value in (0.0, [0.0, "-0.0"], {"a": 0}, None, "x"):
        assert jsonvalue._has_negative_zero(value) is False
    assert reason(lambda: lossless_copy({"t": "-0.0", "v": [-0.0]})) == "data.v[0] is -0.0"
    assert lossless_copy({"t": "-0.0", "v": 0.0})[1] == '{"t":"-0.0","v":0.0}'


def test_non_finite_is_found_anywhere() -> None:
    for value in (math.inf, [1, [math.nan]], {"a": {"b": -math.inf}}):
        assert jsonvalue._has_non_finite(value) is True
    for value in (1.0, [0.0, "inf"], {"a": None}, None):
        assert jsonvalue._has_non_finite(value) is False


# -- canonical_fast and canonical_parsed -----------------------------------------------------------


@pytest.mark.parametrize(
    "value", [2**64, -(2**63) - 1, [-0.0], {"a": -0.0}, "a\ud800", nested_lists(300)]
)
def test_canonical_fast_declines_what_it_cannot_vouch_for(value: Any) -> None:
    assert canonical_fast(value) is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[1e999]", "data[0] is inf"),
        ('{"a":[-1e999]}', "data.a[0] is -inf"),
        ('["\\ud800"]', "data contains a lone surrogate"),
        ('{"a":-0.0}', "data.a is -0.0"),
        ("[" * 257 + "]" * 257, "data nests deeper than 256 levels"),
    ],
)
def test_canonical_parsed_refuses_what_a_round_trip_would_change(text: str, problem: str) -> None:
    value = json.loads(text)
    assert reason(lambda: canonical_parsed(value)) == problem


def test_canonical_parsed_refuses_very_deep_values() -> None:
    value = nested_lists(3000)
    assert reason(lambda: canonical_parsed(value)) == "data nests deeper than 256 levels"


def test_canonical_parsed_names_its_path() -> None:
    assert reason(lambda: canonical_parsed([math.inf], path="p")) == "p[0] is inf"
    assert reason(lambda: canonical_parsed(["\udc00"], path="p")) == "p contains a lone surrogate"


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("[null, 1]", "[null,1]"),
        ('{"a": null, "b": 1.5}', '{"a":null,"b":1.5}'),
        ("[18446744073709551616, -1]", "[18446744073709551616,-1]"),
        ("[1e-05, 1E5, 0.0]", "[1e-05,100000.0,0.0]"),
        ("[" * 256 + "]" * 256, "[" * 256 + "]" * 256),
        ('"-0.0"', '"-0.0"'),
    ],
)
def test_canonical_parsed_text(text: str, canonical: str) -> None:
    assert canonical_parsed(json.loads(text)) == canonical


# -- the strict parser ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"\xff", "not UTF-8: 'utf-8' codec can't decode byte 0xff in position 0: "
                   "invalid start byte"),
        (5, "expected JSON text, got int"),
        (None, "expected JSON text, got NoneType"),
        ('{"a":1,"b":2,"a":3}', "invalid JSON: duplicate key 'a'"),
        ('[{"x":{"k":1,"k":1}}]', "invalid JSON: duplicate key 'k'"),
        ("[NaN]", "invalid JSON: NaN is not allowed in lossless JSON"),
        ("-Infinity", "invalid JSON: -Infinity is not allowed in lossless JSON"),
        ("{", "invalid JSON: Expecting property name enclosed in double quotes: "
              "line 1 column 2 (char 1)"),
        ("[" * 100_000, "JSON nests deeper than 256 levels"),
    ],
)  # fmt: skip
def test_decode_json_refusals(text: Any, problem: str) -> None:
    assert reason(lambda: decode_json(text)) == problem


def test_decode_json_refuses_over_long_integers() -> None:
    assert reason(lambda: decode_json("9" * 5000)).startswith(
        "invalid JSON: Exceeds the limit (4300 digits) for integer string conversion"
    )
    assert decode_json("9" * 4300) == int("9" * 4300)


def test_decode_json_accepts_text_bytes_and_bytearray() -> None:
    expected = {"b": [1, 2.5, None], "a": "é"}
    text = '{"b":[1,2.5,null],"a":"é"}'
    for given in (text, text.encode(), bytearray(text.encode())):
        value = decode_json(given)
        assert value == expected and list(value) == ["b", "a"]


def test_duplicate_keys_pass_when_not_strict() -> None:
    assert decode_json('{"a":1,"a":2}', strict=False) == {"a": 2}
    assert reason(lambda: decode_json("[NaN]", strict=False)) == (
        "invalid JSON: NaN is not allowed in lossless JSON"
    )


def test_no_duplicate_keys_keeps_order_and_names_the_key() -> None:
    assert list(jsonvalue._no_duplicate_keys([("b", 1), ("a", 2)])) == ["b", "a"]
    assert reason(lambda: jsonvalue._no_duplicate_keys([("b", 1), ("a", 2), ("b", 3)])) == (
        "duplicate key 'b'"
    )
    assert reason(lambda: jsonvalue._no_duplicate_keys([("a", 1), ("b", 2), ("b", 3)])) == (
        "duplicate key 'b'"
    )


def test_decode_fast_refuses_constants_with_a_lossless_error() -> None:
    for text in ("NaN", "[Infinity]", '{"a":-Infinity}'):
        with pytest.raises(LosslessJSONError):
            decode_fast(text)


# -- fast paths are taken for the common case (the module's documented design) ---------------------


def counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    calls: list[Any] = []
    original = getattr(jsonvalue, name)

    def spy(*args: Any) -> Any:
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(jsonvalue, name, spy)
    return calls


def test_plain_values_are_copied_without_the_stdlib_encoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = counting(monkeypatch, "_stdlib_lossless_copy")
    assert lossless_copy({"a": [1, "x", 2.5, None, True]})[1] == '{"a":[1,"x",2.5,null,true]}'
    assert lossless_copy(freeze({"a": [1]}))[1] == '{"a":[1]}'
    assert calls == []
    assert reason(lambda: lossless_copy((1, 2))) == "data has type tuple"
    assert reason(lambda: lossless_copy([math.nan])) == "data[0] is nan"
    assert len(calls) == 2


def test_canonical_rows_are_decoded_without_the_stdlib_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = counting(monkeypatch, "_stdlib_decode")
    assert decode_fast('{"a":[1,"é",2.5,null]}') == {"a": [1, "é", 2.5, None]}
    assert calls == []
    assert decode_fast('{"a":1,"a":2}') == {"a": 2}  # not canonical: the stdlib reads it
    assert decode_fast("[1e-05]") == [1e-05]
    assert decode_fast("[18446744073709551616]") == [2**64]
    assert len(calls) == 3
    with pytest.raises(ValueError):
        decode_fast("{")
    assert len(calls) == 4


def test_the_unfreeze_hook_encodes_only_our_frozen_views() -> None:
    assert jsonvalue._unfreeze(FrozenDict({"a": 1})) == {"a": 1}
    assert type(jsonvalue._unfreeze(FrozenDict({"a": 1}))) is dict
    assert type(jsonvalue._unfreeze(FrozenList([1]))) is list
    with pytest.raises(TypeError, match=r"^tuple is not plain JSON$"):
        jsonvalue._unfreeze((1,))


def test_float_form_differs() -> None:
    assert jsonvalue._float_form_differs("[0.00001]")
    assert jsonvalue._float_form_differs("[1e-7]")
    assert jsonvalue._float_form_differs('{"a":2e-9}')
    assert not jsonvalue._float_form_differs("[0.0001]")
    assert not jsonvalue._float_form_differs("[1e-10]")  # two-digit exponents match repr
    assert not jsonvalue._float_form_differs("[0.01,1.000]")
    assert jsonvalue._float_form_differs("[1.5e16]") is False
    assert jsonvalue._float_form_differs("1e-7")  # the value itself
    assert jsonvalue._float_form_differs('{"a":[1,-1.2345678901234567e-5]}')
    assert jsonvalue._float_form_differs('{"id":"5f0c6d7e-1a2b","x":3e-5}')
    # text that merely looks like an exponent is not a float: a UUID's "7e-1a", a word
    assert jsonvalue._float_form_differs('{"id":"5f0c6d7e-1a2b","n":"e-1","w":"a1e-2"}') is False


def test_orjson_writes_what_the_stdlib_writes() -> None:
    assert jsonvalue._orjson_matches() is True


# -- frozen views --------------------------------------------------------------------------------

DICT_MUTATIONS: list[Any] = [
    lambda d: d.__setitem__("a", 2),
    lambda d: d.__delitem__("a"),
    lambda d: d.__ior__({"b": 1}),
    lambda d: d.clear(),
    lambda d: d.pop("a"),
    lambda d: d.popitem(),
    lambda d: d.setdefault("b", 1),
    lambda d: d.update(b=1),
]
LIST_MUTATIONS: list[Any] = [
    lambda v: v.__setitem__(0, 2),
    lambda v: v.__delitem__(0),
    lambda v: v.__iadd__([1]),
    lambda v: v.__imul__(2),
    lambda v: v.append(1),
    lambda v: v.extend([1]),
    lambda v: v.insert(0, 1),
    lambda v: v.pop(),
    lambda v: v.remove(1),
    lambda v: v.clear(),
    lambda v: v.sort(),
    lambda v: v.reverse(),
]


@pytest.mark.parametrize("mutate", DICT_MUTATIONS)
def test_a_frozen_dict_refuses_every_mutation(mutate: Any) -> None:
    frozen = freeze({"a": 1})
    with pytest.raises(
        TypeError, match=r"^FrozenDict is immutable: events never change once built$"
    ):
        mutate(frozen)
    assert frozen == {"a": 1}


@pytest.mark.parametrize("mutate", LIST_MUTATIONS)
def test_a_frozen_list_refuses_every_mutation(mutate: Any) -> None:
    frozen = freeze([1, 0])
    with pytest.raises(
        TypeError, match=r"^FrozenList is immutable: events never change once built$"
    ):
        mutate(frozen)
    assert frozen == [1, 0]


def test_freeze_and_thaw() -> None:
    value = {"a": [1, {"b": [2.5, "x"]}], "c": None}
    frozen = freeze(value)
    assert type(frozen) is FrozenDict and frozen == value
    assert type(frozen["a"]) is FrozenList and type(frozen["a"][1]) is FrozenDict
    assert frozen["a"][1]["b"][1] is value["a"][1]["b"][1]  # scalars are shared
    assert type(freeze(frozen)) is FrozenDict and type(freeze(frozen)["a"]) is FrozenList
    assert freeze((1, [2])) == (1, [2]) and type(freeze((1, [2]))[1]) is list
    thawed = thaw(frozen)
    assert thawed == value and type(thawed) is dict
    assert type(thawed["a"]) is list and type(thawed["a"][1]) is dict
    assert thaw(5) == 5 and thaw("x") == "x"


def test_copies_of_frozen_views_are_plain_and_pickles_stay_frozen() -> None:
    frozen = freeze({"a": [1, {"b": 2}]})
    shallow = copy.copy(frozen)
    assert type(shallow) is dict and shallow == frozen
    assert type(shallow["a"]) is FrozenList  # shallow: the inside is shared
    deep = copy.deepcopy(frozen)
    assert type(deep) is dict and type(deep["a"]) is list and type(deep["a"][1]) is dict
    assert type(copy.copy(frozen["a"])) is list
    assert type(copy.deepcopy(frozen["a"])) is list
    again = pickle.loads(pickle.dumps(frozen))
    assert type(again) is FrozenDict and again == frozen
    listed = pickle.loads(pickle.dumps(frozen["a"]))
    assert type(listed) is FrozenList and listed == [1, {"b": 2}]
    assert not hasattr(frozen, "__dict__") and not hasattr(frozen["a"], "__dict__")


# -- limits and fallbacks, exactly ---------------------------------------------------------------


def test_depth_is_counted_from_one_when_the_walk_runs() -> None:
    """More than 256 containers (so the walk runs) but no more than 256 levels: not too deep."""
    for value in (
        [nested_lists(MAX_DEPTH - 1), []],
        {"a": nested_lists(MAX_DEPTH - 1), "b": {}},
        [{"k": nested_lists(MAX_DEPTH - 2)}, {}],
    ):
        text = canonical_json(value)
        assert text.count("[") + text.count("{") > MAX_DEPTH
        assert jsonvalue._too_deep(value, text) is False
        assert lossless_copy(value)[0] == value
        assert canonical_parsed(value) == text
    for value in (
        [nested_lists(MAX_DEPTH), []],
        {"a": [nested_lists(MAX_DEPTH - 1)], "b": {}},
        [{"k": nested_lists(MAX_DEPTH - 1)}, {}],
    ):
        assert jsonvalue._too_deep(value, canonical_json(value)) is True
        assert reason(lambda: lossless_copy(value)) == "data nests deeper than 256 levels"  # noqa: B023


def test_a_negative_number_before_the_problem_is_not_negative_zero() -> None:
    assert reason(lambda: lossless_copy([-1.5, -2.0, math.nan])) == "data[2] is nan"
    assert reason(lambda: lossless_copy({"a": -1.5, "b": (1,)})) == "data.b has type tuple"


def test_naming_a_problem_too_deep_to_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    def recurse(value: Any, path: str) -> str | None:
        raise RecursionError

    monkeypatch.setattr(jsonvalue, "_find_problem", recurse)
    assert reason(lambda: jsonvalue._stdlib_lossless_copy({1}, "p")) == (
        "p nests deeper than 256 levels"
    )


def test_a_number_too_long_to_write() -> None:
    assert reason(lambda: canonical_parsed([10**5000], path="p")) == (
        "p holds a number JSON cannot represent"
    )


def test_canonical_fast_vouches_for_text_that_merely_looks_like_negative_zero() -> None:
    assert canonical_fast(["-0.0", {"-0.0": "x-0.0"}]) == '["-0.0",{"-0.0":"x-0.0"}]'
    assert canonical_fast([0.0, -1.0]) == "[0.0,-1.0]"


def test_decode_fast_reads_bytes_like_the_stdlib_parser() -> None:
    """decode_fast gives what the stdlib parser gives, for text of any type (here: a
    TypeError for bytes, which the read path never passes)."""
    for given in (b"[1]", bytearray(b"[1]")):
        with pytest.raises(TypeError):
            json.JSONDecoder().decode(given)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            decode_fast(given)  # type: ignore[arg-type]


def test_without_a_matching_orjson_the_stdlib_does_everything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(jsonvalue, "_ORJSON_MATCHES", False)
    value = {"a": [1, 1e-05, "é"]}
    copied, text = lossless_copy(value)
    assert (copied, text) == (value, '{"a":[1,1e-05,"é"]}') and copied is not value
    assert canonical_fast(value) is None
    assert canonical_parsed(value) == text
    assert decode_fast(text) == value
    assert reason(lambda: lossless_copy([math.inf])) == "data[0] is inf"


EDGES: dict[str, Any] = {
    "0": 0,
    "-1": -1,
    "2**63-1": 2**63 - 1,
    "-(2**63)": -(2**63),
    "2**64-1": 2**64 - 1,
    "true": True,
    "false": False,
    "null": None,
    "escapes": 'é\u2028\x00\x1f\x7f"\\/\U0001f600',
    "nested": {"k": [{}]},
    "empty list": [],
    "0.1": 0.1,
    "-1e-05": -1e-05,
    "5e-324": 5e-324,
}


@pytest.mark.parametrize("edge", EDGES.values(), ids=EDGES.keys())
def test_an_orjson_that_writes_an_edge_value_otherwise_is_not_used(
    edge: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`_orjson_matches` probes integers at the 64-bit edges, both bools, null, escapes,
    containers and floats: an orjson that writes any one of them differently fails it."""
    real = jsonvalue.orjson.dumps

    def dumps(obj: Any, *args: Any, **kwargs: Any) -> bytes:
        item = obj[0] if type(obj) is list and len(obj) == 1 else None
        if type(item) is type(edge) and item == edge:
            return b"[0.5]"
        return real(obj, *args, **kwargs)

    assert jsonvalue._orjson_matches() is True
    monkeypatch.setattr(jsonvalue.orjson, "dumps", dumps)
    assert jsonvalue._orjson_matches() is False
