"""The hash chain's pure functions (`core.chain`): what is hashed, how values link, keys."""

from __future__ import annotations

from hashlib import blake2b
from typing import Any

import pytest

from todo_sessions.core.chain import (
    BOUND_HEADER_FIELDS,
    CHAIN_SIZE,
    chain_values,
    derive_key,
    event_text,
    genesis,
    link,
)

HEADER: dict[str, Any] = {
    "id": "s",
    "format_version": 1,
    "created_at": 1,
    "cwd": "/w",
    "parent_session": None,
    "seed_length": None,
    "origin": None,
    "delegation_depth": 0,
    "title": "a title",
}


def row(at: int, **changes: Any) -> dict[str, Any]:
    base = {
        "type": "user/message",
        "seq": at,
        "time": 10 + at,
        "data": '{"a":1}',
        "surface_op": '"append"',
        "source_event_seqs": None,
        "ignorable": False,
    }
    return {**base, **changes}


def test_event_text_is_the_stored_columns_as_one_json_array() -> None:
    assert event_text(row(3)) == b'["user/message",3,13,{"a":1},"append",null,false]'
    text = event_text(row(0, type='a"b', surface_op=None, source_event_seqs="[1,2]", ignorable=1))
    assert text == b'["a\\"b",0,10,{"a":1},null,[1,2],true]'
    assert (
        event_text(row(0, data='{"t":"é"}'))
        == '["user/message",0,10,{"t":"é"},"append",null,false]'.encode()
    )


def test_every_stored_column_changes_the_value() -> None:
    start = genesis(HEADER)
    original = link(start, event_text(row(1)))
    for change in (
        {"type": "user/other"},
        {"seq": 2},
        {"time": 99},
        {"data": '{"a":2}'},
        {"surface_op": None},
        {"source_event_seqs": "[0]"},
        {"ignorable": True},
    ):
        assert link(start, event_text(row(1, **change))) != original, change


def test_genesis_binds_every_header_field_but_the_title() -> None:
    value = genesis(HEADER)
    assert len(value) == CHAIN_SIZE
    assert genesis({**HEADER, "title": "renamed"}) == value
    assert "title" not in BOUND_HEADER_FIELDS
    for name in BOUND_HEADER_FIELDS:
        assert genesis({**HEADER, name: "changed"}) != value, name
    with pytest.raises(KeyError):
        genesis({k: v for k, v in HEADER.items() if k != "cwd"})


def test_values_link_from_the_header_and_a_key_changes_them_all() -> None:
    rows = [row(0), row(1), row(2)]
    plain = list(chain_values(HEADER, rows))
    assert len(plain) == 3 and all(len(v) == 2 * CHAIN_SIZE for v in plain)
    value = genesis(HEADER)
    for r, expected in zip(rows, plain, strict=True):
        value = link(value, event_text(r))
        assert value.hex() == expected
    assert (
        value
        == blake2b(bytes.fromhex(plain[1]) + event_text(rows[2]), digest_size=CHAIN_SIZE).digest()
    )
    key = derive_key("secret")
    keyed = list(chain_values(HEADER, rows, key))
    assert all(a != b for a, b in zip(plain, keyed, strict=True))
    assert keyed == list(chain_values(HEADER, rows, derive_key(b"secret")))
    assert keyed != list(chain_values(HEADER, rows, derive_key("other")))
    assert link(genesis(HEADER, key), event_text(rows[0]), key).hex() == keyed[0]
    swapped = list(chain_values(HEADER, [rows[1], rows[0], rows[2]]))
    assert swapped[2] != plain[2]


def test_a_key_is_derived_to_32_bytes_and_an_empty_one_is_refused() -> None:
    assert len(derive_key("k")) == 32
    assert derive_key("k") != derive_key("K")
    assert derive_key("k") != blake2b(b"k", digest_size=32).digest()  # personalised
    with pytest.raises(ValueError, match="empty"):
        derive_key("")
    with pytest.raises(ValueError, match="empty"):
        derive_key(b"")
