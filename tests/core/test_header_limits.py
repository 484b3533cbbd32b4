"""Session headers and ids at their exact limits, with the errors they give (issue #17).

See docs/format.md, "Session headers": ids are 1-200 characters without control characters or
lone surrogates; header integers lie in 0..2**53-1; header text holds no NUL and no lone
surrogate; ``cwd`` is absolute (POSIX or Windows); every refusal is an `InvalidEventError`
naming the field, whichever way the header was built.
"""

from __future__ import annotations

from typing import Any

import pytest

from todo_sessions.core.catalog import FORMAT_VERSION
from todo_sessions.core.envelope import MAX_INT
from todo_sessions.core.header import SessionHeader, check_session_id, check_text, shown
from todo_sessions.errors import InvalidEventError

T0 = 1_700_000_000_000


def refused(call: Any) -> InvalidEventError:
    with pytest.raises(InvalidEventError) as info:
        call()
    return info.value


# -- session ids ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["x", "x" * 200, "a\u2028b", "tab-free id é😀"])
def test_ids_of_1_to_200_printable_or_format_characters_pass(value: str) -> None:
    assert check_session_id(value) is value


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("", "session id must be a string of 1-200 characters, got ''"),
        (5, "session id must be a string of 1-200 characters, got 5"),
        (None, "session id must be a string of 1-200 characters, got None"),
        (
            "x" * 201,
            "session id must be a string of 1-200 characters, got '"
            + "x" * 59
            + "… (201 characters)",
        ),
        ("a\x00b", "session id must not contain control characters: 'a\\x00b'"),
        ("a\x9fb", "session id must not contain control characters: 'a\\x9fb'"),
        ("a\x7f", "session id must not contain control characters: 'a\\x7f'"),
        ("a\ud800", "session id must not contain control characters: 'a\\ud800'"),
        ("\udfff", "session id must not contain control characters: '\\udfff'"),
    ],
)
def test_bad_ids_are_refused_naming_the_field(value: Any, text: str) -> None:
    error = refused(lambda: check_session_id(value))
    assert str(error) == text
    assert (error.field, error.event_type, error.seq) == ("session_id", None, None)


# -- shown ---------------------------------------------------------------------------------------


def test_shown_cuts_long_values_at_the_limit() -> None:
    exact = "y" * 58  # repr: 60 characters
    assert shown(exact) == repr(exact)
    longer = "y" * 59
    assert shown(longer) == repr(longer)[:60] + "… (59 characters)"
    assert shown(list(range(30))) == repr(list(range(30)))[:60] + "…"  # no size for a non-str
    assert shown("abcdef", limit=4) == "'abc… (6 characters)"
    assert shown("ab", limit=4) == "'ab'"


# -- header text ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", "plain", "tab\tand\nnewline", "é😀\u2028"])
def test_header_text_may_hold_anything_but_nul_and_lone_surrogates(value: str) -> None:
    assert check_text(value) is value
    header = SessionHeader(id="h", created_at=T0, title=value, origin=value)
    assert (header.title, header.origin) == (value, value)


@pytest.mark.parametrize("value", ["a\x00b", "\x00", "a\ud800", "\udc00b"])
def test_nul_or_a_lone_surrogate_in_header_text_is_refused(value: str) -> None:
    with pytest.raises(ValueError) as info:
        check_text(value)
    assert str(info.value) == (f"must not contain NUL or lone surrogate characters: {shown(value)}")
    for field in ("title", "origin", "cwd"):
        fields = {field: "/" + value}
        error = refused(lambda: SessionHeader(id="h", created_at=T0, **fields))  # noqa: B023
        assert error.field == field
        assert str(error) == (
            f"invalid session header: {field}: must not contain NUL or lone surrogate "
            f"characters: {shown('/' + value)}"
        )


# -- integers ------------------------------------------------------------------------------------

INTEGERS = ["created_at", "seed_length", "delegation_depth", "format_version"]


@pytest.mark.parametrize("field", INTEGERS)
def test_header_integers_run_from_0_to_max_int(field: str) -> None:
    for value in (0, MAX_INT):
        header = SessionHeader(**{"id": "h", "created_at": T0, field: value})
        assert getattr(header, field) == value
    for value in (-1, MAX_INT + 1):
        fields = {"id": "h", "created_at": T0, field: value}
        error = refused(lambda: SessionHeader(**fields))  # noqa: B023
        assert error.field == field
        bound = "greater than or equal to 0" if value < 0 else f"less than or equal to {MAX_INT}"
        assert str(error) == f"invalid session header: {field}: Input should be {bound}"


@pytest.mark.parametrize("value", ["1", 1.0, True, None])
def test_header_integers_are_strict(value: Any) -> None:
    error = refused(lambda: SessionHeader(id="h", created_at=value))
    assert error.field == "created_at"


def test_defaults() -> None:
    header = SessionHeader(id="h", created_at=T0)
    assert header.model_dump() == {
        "id": "h",
        "created_at": T0,
        "cwd": None,
        "parent_session": None,
        "seed_length": None,
        "origin": None,
        "delegation_depth": 0,
        "title": None,
        "format_version": FORMAT_VERSION,
    }
    assert FORMAT_VERSION == 0
    assert header.to_wire() == {
        "id": "h",
        "createdAt": T0,
        "cwd": None,
        "parentSession": None,
        "seedLength": None,
        "origin": None,
        "delegationDepth": 0,
        "title": None,
        "formatVersion": 0,
    }


def test_wire_keys_and_python_names_both_build_a_header() -> None:
    wire = {"id": "h", "createdAt": T0, "parentSession": "p", "seedLength": 3, "cwd": "/w"}
    header = SessionHeader.model_validate(wire)
    assert header == SessionHeader(
        id="h", created_at=T0, parent_session="p", seed_length=3, cwd="/w"
    )
    assert SessionHeader.model_validate(header.to_wire()) == header
    assert SessionHeader.model_validate_json(SessionHeader(id="h", created_at=1).model_dump_json())
    assert hash(header) == hash(SessionHeader.model_validate(wire))


def test_a_header_is_frozen_and_closed() -> None:
    header = SessionHeader(id="h", created_at=T0)
    with pytest.raises(Exception) as info:
        header.title = "x"  # type: ignore[misc]
    assert "frozen" in str(info.value)
    assert header.title is None
    error = refused(lambda: SessionHeader(id="h", created_at=T0, colour="red"))
    assert (error.field, str(error)) == (
        "colour",
        "invalid session header: colour: Extra inputs are not permitted",
    )


def test_ids_in_a_header_follow_the_id_rule() -> None:
    error = refused(lambda: SessionHeader(id="", created_at=T0))
    assert str(error) == (
        "invalid session header: id: session id must be a string of 1-200 characters, got ''"
    )
    assert error.field == "id"
    error = refused(lambda: SessionHeader(id="h", created_at=T0, parent_session="p\x00"))
    assert error.field == "parent_session"
    assert str(error) == (
        "invalid session header: parent_session: session id must not contain control "
        "characters: 'p\\x00'"
    )
    assert SessionHeader(id="h", created_at=T0, parent_session="x" * 200).parent_session


# -- cwd -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("cwd", ["/", "/work/x", "C:\\", "c:/", "Z:\\Users\\me", "d:/tmp"])
def test_an_absolute_cwd_passes(cwd: str) -> None:
    assert SessionHeader(id="h", created_at=T0, cwd=cwd).cwd == cwd


@pytest.mark.parametrize("cwd", ["", "rel", "C:", "C:x", "1:\\x", ":\\x", "CC\\x", "C;\\x", "C:x/"])
def test_a_relative_cwd_is_refused(cwd: str) -> None:
    error = refused(lambda: SessionHeader(id="h", created_at=T0, cwd=cwd))
    assert error.field == "cwd"
    assert str(error) == f"invalid session header: cwd: cwd must be an absolute path, got {cwd!r}"


# -- how errors are reported ---------------------------------------------------------------------


def test_more_errors_are_counted() -> None:
    error = refused(lambda: SessionHeader(id="h", created_at=T0, cwd="rel", title="a\x00"))
    assert str(error) == (
        "invalid session header: cwd: cwd must be an absolute path, got 'rel' (and 1 more)"
    )
    error = refused(lambda: SessionHeader(id="", created_at=-1, cwd="rel"))
    assert str(error).endswith(" (and 2 more)")


def test_model_validate_reports_like_the_constructor() -> None:
    by_name = refused(lambda: SessionHeader(id="h", created_at=-1))
    via_validate = refused(lambda: SessionHeader.model_validate({"id": "h", "created_at": -1}))
    assert (str(via_validate), via_validate.field) == (str(by_name), "created_at")
    wire = refused(lambda: SessionHeader.model_validate({"id": "h", "createdAt": -1}))
    assert (str(wire), wire.field) == (
        "invalid session header: createdAt: Input should be greater than or equal to 0",
        "createdAt",
    )
    text = refused(
        lambda: SessionHeader.model_validate_json('{"id":"h","createdAt":1,"cwd":"rel"}')
    )
    assert (str(text), text.field) == (
        "invalid session header: cwd: cwd must be an absolute path, got 'rel'",
        "cwd",
    )


def test_a_header_that_is_not_an_object() -> None:
    error = refused(lambda: SessionHeader.model_validate("x"))
    assert error.field == "header"
    assert str(error).startswith("invalid session header: header: Input should be a valid")
    error = refused(lambda: SessionHeader.model_validate_json("[1]"))
    assert (str(error), error.field) == (
        "invalid session header: header: Input should be an object",
        "header",
    )
    error = refused(lambda: SessionHeader.model_validate_json("{"))
    assert error.field == "header"
