"""core/meta.py: the ``session/meta`` rules and the projection of metadata and open todos.

Pure unit tests (the mutation gate judges core modules with tests/core/*); the store side is in
tests/test_session_meta.py and tests/test_list_filters.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from todo_sessions import InvalidEventError, SessionEvent, validate_event
from todo_sessions.core.meta import (
    MAX_TAGS,
    TAG_MAX_LENGTH,
    MetaChange,
    SessionMeta,
    add_usage,
    batch_change,
    fold_meta,
    fold_title,
    meta_problem,
    tag_problem,
    todos_open,
)


def meta(seq: int, **data: Any) -> SessionEvent:
    return SessionEvent("session/meta", seq, 0, data)


def todos(seq: int, *statuses: str) -> SessionEvent:
    items = [{"content": f"t{i}", "status": s} for i, s in enumerate(statuses)]
    return SessionEvent("todo/write", seq, 0, {"todos": items})


def other(seq: int) -> SessionEvent:
    return SessionEvent("turn/start", seq, 0, {"turn": 1})


# -- tags and payload rules ----------------------------------------------------------------------


def test_tag_rules() -> None:
    assert tag_problem("a") is None
    assert TAG_MAX_LENGTH == 200
    assert tag_problem("x" * 200) is None
    assert tag_problem("in between") is None
    assert tag_problem("ünï-✓") is None
    assert tag_problem(1) == "must be a string, got int"
    assert tag_problem("") == f"must be 1 to {TAG_MAX_LENGTH} characters, got 0"
    assert tag_problem("x" * 201) == "must be 1 to 200 characters, got 201"
    assert tag_problem("a\tb") == "must not contain control or other unprintable characters"
    assert tag_problem(" a") == "must not start or end with whitespace"
    assert tag_problem("a ") == "must not start or end with whitespace"


def test_payload_rules() -> None:
    assert meta_problem({}) is None
    assert meta_problem({"title": None, "tags": [], "metadata": {}}) is None
    assert meta_problem({"title": "t", "tags": ["a", "b"], "metadata": {"k": 1}}) is None
    assert MAX_TAGS == 100
    assert meta_problem({"tags": [str(i) for i in range(100)]}) is None
    assert meta_problem({"title": "a\x00"}) == ("data.title", "must not contain NUL characters")
    assert meta_problem({"tags": None}) == (
        "data.tags",
        "must be a list of tags ([] clears them), not null",
    )
    assert meta_problem({"tags": [str(i) for i in range(101)]}) == (
        "data.tags",
        "at most 100 tags, got 101",
    )
    assert meta_problem({"tags": ["a", "b", "a"]}) == ("data.tags[2]", "duplicate tag: 'a'")
    assert meta_problem({"tags": ["a", ""]}) == (
        "data.tags[1]",
        f"must be 1 to {TAG_MAX_LENGTH} characters, got 0: ''",
    )
    assert meta_problem({"metadata": None}) == (
        "data.metadata",
        "must be an object ({} clears it), not null",
    )
    assert meta_problem({"metadata": []}) is not None


def test_validate_event_applies_the_rules_after_the_model() -> None:
    validate_event(meta(3, title="ok", tags=["x"]))
    with pytest.raises(InvalidEventError) as caught:
        validate_event(meta(3, tags=["x", "x"]))
    error = caught.value
    assert (error.field, error.seq, error.event_type) == ("data.tags[1]", 3, "session/meta")
    assert str(error) == "invalid event 'session/meta' (seq 3): data.tags[1]: duplicate tag: 'x'"
    with pytest.raises(InvalidEventError) as caught:
        validate_event(meta(1, tags=[3]))  # the model's own error comes first
    assert caught.value.field == "data.tags[0]"


# -- open todos and the title's fold ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"todos": []}, False),
        ({"todos": [{"content": "a", "status": "completed"}]}, False),
        ({"todos": [{"content": "a", "status": "pending"}]}, True),
        ({"todos": [{"content": "a", "status": "in_progress"}]}, True),
        (
            {
                "todos": [
                    {"content": "a", "status": "completed"},
                    {"content": "b", "status": "pending"},
                ]
            },
            True,
        ),
        ({"todos": None}, False),
        ({}, False),
        (None, False),
        ({"todos": ["pending"]}, False),
    ],
)
def test_todos_open(data: Any, expected: bool) -> None:
    assert todos_open(data) is expected


def test_fold_title() -> None:
    assert fold_title(None) is None
    assert fold_title("Straße ÄB") == "strasse äb"
    assert fold_title("") == ""


# -- batch_change ------------------------------------------------------------------------------


def test_a_batch_without_meta_or_todos_changes_nothing() -> None:
    assert batch_change([]) is None
    assert batch_change([other(0), other(1)]) is None


def test_the_last_event_setting_a_field_wins() -> None:
    change = batch_change(
        [
            meta(0, title="one", tags=["a"]),
            other(1),
            meta(2, title="two", metadata={"k": 1}),
            todos(3, "pending"),
            meta(4, tags=["b", "c"]),
            todos(5, "completed"),
        ]
    )
    assert change == MetaChange(
        title_set=True, title="two", tags=("b", "c"), metadata={"k": 1}, open_todos=False
    )


def test_fields_left_out_stay_unset() -> None:
    assert batch_change([meta(0)]) == MetaChange()
    assert batch_change([todos(0, "in_progress")]) == MetaChange(open_todos=True)
    cleared = batch_change([meta(0, title=None, tags=[], metadata={})])
    assert cleared == MetaChange(title_set=True, title=None, tags=(), metadata={})
    assert batch_change([meta(0, tags=["a"])]) == MetaChange(tags=("a",))


def test_inherited_titles_do_not_replace_the_forks_own() -> None:
    events = [meta(0, title="old", tags=["t"]), meta(1, metadata={"m": 1})]
    change = batch_change(events, inherited_below=2)
    assert change == MetaChange(tags=("t",), metadata={"m": 1})
    after = batch_change([*events, meta(2, title="new")], inherited_below=2)
    assert after is not None and (after.title_set, after.title) == (True, "new")
    at_edge = batch_change([meta(5, title="edge")], inherited_below=5)
    assert at_edge == MetaChange(title_set=True, title="edge")


# -- SessionMeta and fold_meta -------------------------------------------------------------------


def test_values_are_frozen_and_slotted() -> None:
    for value in (MetaChange(), SessionMeta()):
        with pytest.raises(AttributeError):
            value.title = "x"  # type: ignore[misc]
        assert not hasattr(value, "__dict__")
    assert SessionMeta().open_todos is False
    assert (SessionMeta().title, SessionMeta().tags, dict(SessionMeta().metadata)) == (None, (), {})
    assert MetaChange().title_set is False and MetaChange().open_todos is None


def test_apply_keeps_what_a_change_does_not_set() -> None:
    start = SessionMeta(title="t", tags=("a",), metadata={"k": 1}, open_todos=True)
    assert start.apply(None) is start
    assert start.apply(MetaChange()) == start
    assert start.apply(MetaChange(title_set=True)) == SessionMeta(None, ("a",), {"k": 1}, True)
    assert start.apply(MetaChange(tags=())) == SessionMeta("t", (), {"k": 1}, True)
    assert start.apply(MetaChange(metadata={})) == SessionMeta("t", ("a",), {}, True)
    assert start.apply(MetaChange(open_todos=False)) == SessionMeta("t", ("a",), {"k": 1}, False)


def test_fold_meta_over_a_whole_log() -> None:
    assert fold_meta([]) == SessionMeta()
    assert fold_meta([], title="header") == SessionMeta(title="header")
    log = [meta(0, title="inherited"), todos(1, "pending"), meta(2, tags=["x"])]
    assert fold_meta(log, title="fork") == SessionMeta("inherited", ("x",), {}, True)
    assert fold_meta(log, title="fork", seed_length=1) == SessionMeta("fork", ("x",), {}, True)


# -- usage -----------------------------------------------------------------------------------------


def test_add_usage_sums_numeric_leaves() -> None:
    total: dict[str, int | float] = {}
    add_usage(total, {"in": 3, "out": 1.5, "details": {"cached": 2, "deep": {"x": 1}}})
    add_usage(total, {"in": 4, "flag": True, "name": "m", "list": [1, 2], "none": None})
    add_usage(total, None)
    add_usage(total, [1, 2])
    assert total == {"in": 7, "out": 1.5, "details.cached": 2, "details.deep.x": 1}
    prefixed: dict[str, int | float] = {"p.a": 1}
    add_usage(prefixed, {"a": 2}, "p.")
    assert prefixed == {"p.a": 3}
