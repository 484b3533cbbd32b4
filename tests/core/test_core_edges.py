"""Edges of the core that the other core tests pass by: the reference vocabulary's names, the
last moment there is, how large a float the fast JSON path still judges itself, and a search
query's terms being values."""

from __future__ import annotations

import dataclasses
import re

import orjson
import pytest

from todo_sessions.core.jsontext import read_as_written
from todo_sessions.core.moments import parse_moment
from todo_sessions.core.search import parse_query
from todo_sessions.core.vocabulary import REFERENCE_EVENT_TYPES


def test_the_reference_vocabulary_is_48_well_formed_names() -> None:
    # the reference's KNOWN_SESSION_EVENT_TYPES (docs/format.md, "The reference's vocabulary")
    assert len(REFERENCE_EVENT_TYPES) == 48
    malformed = [n for n in REFERENCE_EVENT_TYPES if not re.fullmatch(r"[a-z-]+(/[a-z-]+)+", n)]
    assert malformed == []
    assert {"request/header", "schedule/change", "team/member", "compaction/prune"} <= (
        REFERENCE_EVENT_TYPES
    )


def test_the_last_moment_is_the_end_of_the_year_9999() -> None:
    last = parse_moment("9999-12-31T23:59:59Z", now_ms=0)
    assert last.ms == 253_402_300_799_000 and not last.ago
    with pytest.raises(ValueError, match="out of range"):
        parse_moment("9999-12-31T23:59:59-00:01", now_ms=0)


@pytest.mark.parametrize(
    ("text", "judged"),
    [
        ('{"a":5e18,"b":1}', True),  # below 2**63: the fast path reads it as the strict one
        ('{"a":[-5e18]}', True),
        ('{"a":1e19}', False),  # past 2**63: left to the strict path
        ('{"a":{"b":-1e19}}', False),
    ],
)
def test_floats_up_to_2_to_the_63_are_judged_by_the_fast_path(text: str, judged: bool) -> None:
    assert read_as_written(text, orjson.loads(text)) is judged


def test_a_query_s_terms_are_values() -> None:
    term = parse_query("fix*").terms[0]
    assert term.prefix and term.words == ("fix",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        term.prefix = False  # type: ignore[misc]
