"""Hostile input of the issue's campaign, each case a typed error that names what was wrong."""

from __future__ import annotations

import pytest
from factories import T0, header, turn

from todo_sessions import (
    InvalidEventError,
    SessionEvent,
    SessionHeader,
    SessionStore,
    import_lines,
    parse_lines,
)
from todo_sessions._jsonl import header_line
from todo_sessions.core.envelope import MAX_INT

GOOD = [e.to_json() for e in turn(0)]
HEADER = header_line(header("h"))


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("[" * 5000 + "]" * 5000, "line 1: header is not JSON"),
        ('{"kind": "todo-sessions/session", "formatVersion": ' + "9" * 5000 + "}", "line 1"),
        ('{"kind":"todo-sessions/session","kind":"x"}', "duplicate key"),
        ('{"kind":"todo-sessions/session","formatVersion":0,"header":5}', "invalid header"),
        (
            '{"kind":"todo-sessions/session","formatVersion":0,"header":{"id":"h","createdAt":'
            + str(2**53)
            + "}}",
            "createdAt",
        ),
        ('{"kind":"todo-sessions/session","formatVersion":NaN}', "header is not JSON"),
    ],
)
def test_bad_header_lines_are_one_line_typed_errors(line: str, fragment: str) -> None:
    with pytest.raises(InvalidEventError) as caught:
        parse_lines([line, *GOOD])
    assert fragment in str(caught.value)
    assert "\n" not in str(caught.value)


def test_undecodable_bytes_name_their_line() -> None:
    with pytest.raises(InvalidEventError, match=r"line 3: not UTF-8 text \(byte 0xff"):
        parse_lines([HEADER.encode(), GOOD[0].encode(), b'{"type":"\xff"}'])


def test_a_file_that_breaks_the_turn_structure_is_refused() -> None:
    events = turn(0)
    del events[3]  # step/start gone: step/end closes a step that never started
    lines = [HEADER, *(e.replace(seq=i).to_json() for i, e in enumerate(events))]
    with pytest.raises(InvalidEventError, match=r"^line 5: "):
        parse_lines(lines)


def test_a_huge_id_is_not_echoed_whole() -> None:
    with pytest.raises(InvalidEventError) as caught:
        SessionHeader(id="x" * 10_000, created_at=T0)
    assert len(str(caught.value)) < 300 and "10000 characters" in str(caught.value)


@pytest.mark.parametrize(
    "field", ["created_at", "seed_length", "delegation_depth", "format_version"]
)
def test_header_integers_stop_at_the_json_safe_limit(field: str) -> None:
    with pytest.raises(InvalidEventError) as caught:
        SessionHeader(**{"id": "h", "created_at": T0, field: MAX_INT + 1})
    assert caught.value.field is not None


@pytest.mark.parametrize(("field", "value"), [("seq", MAX_INT + 1), ("time", -MAX_INT - 1)])
def test_seqs_and_times_stop_at_the_json_safe_limit(field: str, value: int) -> None:
    with pytest.raises(InvalidEventError) as caught:
        SessionEvent(**{"type": "request/context", "seq": 0, "time": 0, "data": {}, field: value})
    assert caught.value.field == field


async def test_the_largest_header_integers_store_on_every_backend(db_url: str) -> None:
    big = SessionHeader(
        id="big",
        created_at=MAX_INT,
        seed_length=MAX_INT,
        delegation_depth=MAX_INT,
    )
    async with SessionStore(db_url) as store:
        await store.create(big)
        await store.append("big", [SessionEvent("request/context", 0, MAX_INT, {})])
        assert await store.header("big") == big
        assert (await store.read_from("big"))[0].time == MAX_INT


async def test_model_validate_is_translated_like_the_constructor(db_url: str) -> None:
    with pytest.raises(InvalidEventError, match="invalid session header: createdAt"):
        SessionHeader.model_validate({"id": "h", "createdAt": "soon"})
    with pytest.raises(InvalidEventError, match="invalid session header"):
        SessionHeader.model_validate_json('{"id": 5}')
    async with SessionStore(db_url) as store:
        with pytest.raises(InvalidEventError):
            await import_lines(store, ['{"kind":"todo-sessions/session"}', *GOOD])
        assert await store.list() == []
