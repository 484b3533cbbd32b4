"""The hash chain of a session's log (tamper evidence; docs/design.md, "The hash chain").

Each stored event carries a chain value: ``link(previous, event_text(row))``, where the value
before seq 0 is ``genesis(header)`` (the header bound in, its title aside: ``session/meta``
events change that, and they are chained). A value is 32 bytes of BLAKE2b, written as 64 hex
digits; with a key (`derive_key`: a secret the database does not hold) it is keyed BLAKE2b, a
MAC (RFC 7693), so only a holder of the key can compute a chain that verifies.

Pure functions over the stored text of an event (`event_text`: the canonical JSON pieces the
store writes, `store.codec.event_row`), so the store, the migration that chains existing
rows, ``verify`` and an exported file all compute the same values.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from hashlib import blake2b
from typing import Any

from .jsonvalue import canonical_json

__all__ = [
    "BOUND_HEADER_FIELDS",
    "CHAIN_SIZE",
    "chain_values",
    "derive_key",
    "event_text",
    "genesis",
    "link",
]

CHAIN_SIZE = 32
"""Bytes of a chain value (stored as such; 64 hex digits where one is shown)."""

BOUND_HEADER_FIELDS = (
    "id",
    "format_version",
    "created_at",
    "cwd",
    "parent_session",
    "seed_length",
    "origin",
    "delegation_depth",
)
"""The header fields bound in at seq 0 (``sessions`` column names): all but the title."""

_GENESIS = b"todo-sessions chain 1\n"
_KEY_PERSON = b"todo-sessions-k1"
_encode_str = json.encoder.encode_basestring


def derive_key(secret: str | bytes) -> bytes:
    """The chain key of a secret of any length (refused: an empty one)."""
    raw = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    if not raw:
        raise ValueError("the chain key is empty")
    return blake2b(raw, digest_size=32, person=_KEY_PERSON).digest()


def genesis(header: Mapping[str, Any], key: bytes = b"") -> bytes:
    """The chain value before seq 0: the header's bound fields (a ``sessions`` row, or
    `store.codec.header_row` of a `SessionHeader`), as canonical JSON."""
    bound = {name: header[name] for name in BOUND_HEADER_FIELDS}
    text = canonical_json(bound, sort_keys=True)
    return blake2b(_GENESIS + text.encode("utf-8"), digest_size=CHAIN_SIZE, key=key).digest()


def event_text(row: Mapping[str, Any]) -> bytes:
    """What the chain hashes of an event: a JSON array of its stored fields (type, seq, time,
    data, surfaceOp, sourceEventSeqs, ignorable), each JSON column as the text stored."""
    op, seqs = row["surface_op"], row["source_event_seqs"]
    return (
        f"[{_encode_str(row['type'])},{row['seq']},{row['time']},{row['data']},"
        f"{'null' if op is None else op},{'null' if seqs is None else seqs},"
        f"{'true' if row['ignorable'] else 'false'}]"
    ).encode()


def link(previous: bytes, text: bytes, key: bytes = b"") -> bytes:
    """The chain value of an event: ``previous`` and its `event_text`, hashed."""
    return blake2b(previous + text, digest_size=CHAIN_SIZE, key=key).digest()


def chain_values(
    header: Mapping[str, Any], rows: Iterable[Mapping[str, Any]], key: bytes = b""
) -> Iterator[str]:
    """The chain value (hex) of each row, from seq 0."""
    value = genesis(header, key)
    for row in rows:
        value = blake2b(value + event_text(row), digest_size=CHAIN_SIZE, key=key).digest()
        yield value.hex()
