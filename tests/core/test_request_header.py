"""request/header in the reference's shape and the upcaster of our earlier shape (issue 25,
item 5); a null surface field named as such (item 3); its adapterDefaults markers checked as the
reference checks them (issue 35, item 9)."""

from __future__ import annotations

from typing import Any

import pytest

from todo_sessions import Session
from todo_sessions.core.catalog import validate_event
from todo_sessions.core.envelope import SessionEvent
from todo_sessions.core.header import SessionHeader
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
    for effort in ("", None):
        bad = {"header": {"config": {**config, "reasoningEffort": effort}}, "reason": "initial"}
        with pytest.raises(InvalidEventError) as caught:
            validate_event(SessionEvent("request/header", 3, 0, bad))
        assert caught.value.field == "data.header.config.reasoningEffort"
        assert caught.value.event_type == "request/header" and caught.value.seq == 3


@pytest.mark.parametrize("field", ["provider", "model"])
def test_provider_and_model_are_not_empty(field: str) -> None:
    config = {"provider": "p", "model": "m", field: ""}
    with pytest.raises(InvalidEventError) as caught:
        validate_event(SessionEvent("request/header", 3, 0, {"header": {"config": config}}))
    assert caught.value.field == f"data.header.config.{field}"


CONFIG = {"provider": "mock", "model": "model", "maxTokens": 256000}


def _with_defaults(defaults: Any, config: dict[str, Any] = CONFIG) -> dict[str, Any]:
    return {"header": {"config": config, "adapterDefaults": defaults}, "reason": "initial"}


@pytest.mark.parametrize(
    ("defaults", "problem"),
    [
        (None, "must be an object of markers {name: true}, not null (leave the key out instead)"),
        ([], "must be an object of markers {name: true}, not an array"),
        (
            {"unknown": True},
            "unknown marker 'unknown' (a marker names reasoningEffort or maxTokens)",
        ),
        ({"maxTokens": False}, "the marker 'maxTokens' must be true"),
        ({"maxTokens": 1}, "the marker 'maxTokens' must be true"),
        (
            {"reasoningEffort": True},
            "the marker 'reasoningEffort' names a value header.config does not set",
        ),
    ],
)
def test_adapter_defaults_the_reference_refuses_are_refused(defaults: Any, problem: str) -> None:
    """Issue 35, item 9: null, an unknown marker, a marker not ``true`` and a marker for a
    value the configuration does not set are refused, naming type, seq and field."""
    with pytest.raises(InvalidEventError) as caught:
        validate_event(SessionEvent("request/header", 4, 0, _with_defaults(defaults)))
    assert (caught.value.event_type, caught.value.seq) == ("request/header", 4)
    assert caught.value.field == "data.header.adapterDefaults"
    assert str(caught.value) == (
        "invalid event 'request/header' (seq 4): data.header.adapterDefaults: Value error, "
        + problem
    )


@pytest.mark.parametrize(
    "defaults",
    [{}, {"maxTokens": True}, {"maxTokens": True, "reasoningEffort": True}],
)
def test_markers_of_values_the_configuration_sets_are_kept(defaults: dict[str, bool]) -> None:
    data = _with_defaults(defaults, {**CONFIG, "reasoningEffort": "high"})
    event = SessionEvent("request/header", 0, 0, data)
    validate_event(event)
    assert event.to_dict()["data"] == data


def test_a_refused_marker_is_never_written() -> None:
    """Appended live or seeded, the refused header leaves the log as it was."""
    session = Session(SessionHeader(id="s", created_at=0))
    session.append("turn/start", {"turn": 1})
    with pytest.raises(InvalidEventError, match=r"'request/header' \(seq 1\)"):
        session.append("request/header", _with_defaults({"reasoningEffort": True}))
    assert [e.type for e in session.events] == ["turn/start"]
    session.append("request/header", _with_defaults({"maxTokens": True}))
    seed = [SessionEvent("request/header", 0, 0, _with_defaults(None))]
    with pytest.raises(InvalidEventError, match="adapterDefaults"):
        Session(SessionHeader(id="t", created_at=0), seed)
