"""request/header in the reference's shape and the upcaster of our earlier shape (issue 25,
item 5); a null surface field named as such (item 3)."""

from __future__ import annotations

import pytest

from todo_sessions.core.catalog import validate_event
from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.request_header import is_legacy_request_header, upcast_request_header
from todo_sessions.errors import InvalidEventError

OLD = {"provider": "p", "model": "m", "system": "s", "tools": [{"name": "t"}], "x": 1}


def test_the_earlier_shape_is_upcast_keeping_every_key() -> None:
    assert is_legacy_request_header(OLD)
    assert upcast_request_header(OLD, reason="change") == {
        "header": {
            "config": {"provider": "p", "model": "m"},
            "system": "s",
            "tools": [{"name": "t"}],
            "x": 1,
        },
        "reason": "change",
    }
    new = {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"}
    assert not is_legacy_request_header(new)
    assert upcast_request_header(new) == new and upcast_request_header(new) is not new
    assert not is_legacy_request_header({"model": "m"})  # no provider: not ours either


def test_both_shapes_validate_and_a_header_without_provider_does_not() -> None:
    validate_event(SessionEvent("request/header", 3, 0, OLD))
    validate_event(SessionEvent("request/header", 3, 0, upcast_request_header(OLD)))
    bad = {"header": {"config": {"provider": "", "model": "m"}}, "reason": "initial"}
    with pytest.raises(InvalidEventError) as caught:
        validate_event(SessionEvent("request/header", 3, 0, bad))
    assert caught.value.field == "data.header.config.provider"


def test_a_null_surface_field_is_named() -> None:
    wire = {"type": "user/message", "seq": 2, "time": 0, "data": {}, "surfaceOp": None}
    with pytest.raises(InvalidEventError) as caught:
        SessionEvent.from_dict(wire)
    assert str(caught.value) == (
        "event 'user/message' (seq 2) carries an invalid surfaceOp: null (leave the key out "
        "instead)"
    )
    wire = {"type": "step/end", "seq": 2, "time": 0, "data": {}, "sourceEventSeqs": None}
    with pytest.raises(InvalidEventError) as caught:
        SessionEvent.from_dict(wire)
    assert str(caught.value) == (
        "event 'step/end' (seq 2) may not carry sourceEventSeqs (not even null): only surface "
        "events do"
    )


def test_reasoning_effort_when_given_is_not_empty() -> None:
    config = {"provider": "p", "model": "m"}
    good = {"header": {"config": {**config, "reasoningEffort": "h"}}, "reason": "initial"}
    validate_event(SessionEvent("request/header", 3, 0, good))
    bad = {"header": {"config": {**config, "reasoningEffort": ""}}, "reason": "initial"}
    with pytest.raises(InvalidEventError) as caught:
        validate_event(SessionEvent("request/header", 3, 0, bad))
    assert caught.value.field == "data.header.config.reasoningEffort"


@pytest.mark.parametrize("field", ["provider", "model"])
def test_provider_and_model_are_not_empty(field: str) -> None:
    config = {"provider": "p", "model": "m", field: ""}
    with pytest.raises(InvalidEventError) as caught:
        validate_event(SessionEvent("request/header", 3, 0, {"header": {"config": config}}))
    assert caught.value.field == f"data.header.config.{field}"
