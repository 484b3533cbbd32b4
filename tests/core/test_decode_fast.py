"""The read path's decoder gives exactly what the stdlib parser gives, whatever the text."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from todo_sessions.core.jsonvalue import canonical_json, decode_fast

STDLIB = json.JSONDecoder()


def same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down (1 is not 1.0, -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return math.copysign(1, a) == math.copysign(1, b) and (a == b or (a != a and b != b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@pytest.mark.parametrize(
    "text",
    [
        '{"a":18446744073709551616}',
        '{"a":-9223372036854775809}',
        "[" + "9" * 4000 + "]",
        '["\\ud800"]',
        '{"a":1,"a":2}',
        '{"x":1e-05,"y":1.0,"z":-0.0}',
        '{"b":1,"a":[]}',
        '{ "spaced" : true }',
        '"\\u00e9"',
    ],
)
def test_texts_the_fast_parser_reads_otherwise_fall_back(text: str) -> None:
    assert same(decode_fast(text), STDLIB.decode(text))


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", "-Infinity", "{", "", "nope"])
def test_what_is_not_lossless_json_is_refused(text: str) -> None:
    with pytest.raises(ValueError):  # LosslessJSONError for NaN and Infinity is a ValueError
        decode_fast(text)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=1500, deadline=None)
@given(JSON)
def test_canonical_text_decodes_to_the_same_value(value: Any) -> None:
    try:
        text = canonical_json(value)
    except UnicodeEncodeError:  # pragma: no cover - lone surrogates are refused before this
        return
    assert same(decode_fast(text), STDLIB.decode(text))
