"""`brief_repr`: the plain repr for ordinary values, a short bounded one for a value nested
deep or holding very many values (never a RecursionError)."""

from __future__ import annotations

from typing import Any

from todo_sessions.core.envelope import brief_repr


def nested(depth: int, outer: Any = list) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value] if outer is list else ((value,) if outer is tuple else {"k": value})
    return value


def test_ordinary_values_keep_their_repr() -> None:
    for value in ({"op": "replace", "start": 1, "end": 2, "x": 0}, [1, 2, 3], "s", 5, None):
        assert brief_repr(value) == repr(value)
    for outer in (list, tuple, dict):
        assert brief_repr(nested(32, outer)) == repr(nested(32, outer))
    assert brief_repr(list(range(9_999))) == repr(list(range(9_999)))


def test_deep_or_large_values_are_cut() -> None:
    for outer in (list, tuple, dict):
        shown = brief_repr(nested(33, outer))
        assert shown != repr(nested(33, outer)) and "..." in shown
        assert len(brief_repr(nested(100_000, outer))) < 200
    many = brief_repr(list(range(10_000)))
    assert many == "[0, 1, 2, 3, 4, 5, 6, 7, ...]"
    assert brief_repr({"a": nested(40)}).startswith("{'a': [[")


def test_the_short_form_is_exactly_this() -> None:
    """Three levels, 80 characters of a string or a number, 8 items."""
    assert brief_repr(nested(40)) == "[[[[...]]]]"
    big = brief_repr(["x" * 200, 2**300, *range(10_000)])
    assert big == (
        "['" + "x" * 37 + "..." + "x" * 38 + "', 203703597633448608...9763336706183397376, "
        "0, 1, 2, 3, 4, 5, ...]"
    )
