r"""Whether orjson read a JSON text as the strict parser does (`read_as_written`).

`SessionEvent.from_json` parses with orjson first (`todo_sessions.core.envelope`); the strict
parser (`jsonvalue.decode_json`) reads only what this cannot vouch for. Pure text arithmetic:
no parsing.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["read_as_written"]

_ESCAPED_BACKSLASH_QUOTE = '\\\\"'  # \\" : a backslash, escaped, then a quote
_ESCAPED_QUOTE_COLON = '\\":'  # \": an escaped quote inside a string, then a colon
_SPACED_COLON = re.compile(r'"[ \t\r\n]+:')
_BIG_FLOAT = 2.0**63


def read_as_written(text: str, wire: dict[str, Any]) -> bool:
    r"""Whether orjson read ``text`` (any spacing, key order, escapes, number forms) as
    ``wire`` the way the strict parser does. They differ in two ways only: orjson keeps the
    last of duplicate keys and makes integers past 64 bits floats. Everything else the strict
    path refuses, orjson refuses too (NaN, Infinity, 1e999, lone surrogates, control
    characters, bad syntax) or `canonical_fast` declines (-0.0, deep nesting), and the strict
    path then names it.

    Duplicate keys: outside strings, every key ends with a quote and then its colon; inside
    a string a quote is always escaped (``\"``). So when no string has an escaped backslash
    before a quote (no ``\\"`` in the text) and no key has space before its colon, the count
    of ``":`` less the count of ``\":`` is the number of keys written (plus strings that
    start with a colon, which only make it larger): equal to the number of keys read means
    none was repeated. Anything else returns False (the strict path reads it): a slower
    reading, never a different one.
    """
    if _ESCAPED_BACKSLASH_QUOTE in text:
        return False
    if ('" ' in text or '"\t' in text or '"\n' in text or '"\r' in text) and _SPACED_COLON.search(
        text
    ):
        return False
    # -1 (a float past 2**63) never equals the count, which is at least 0: every \": holds a ":
    return _keys_read(wire) == text.count('":') - text.count(_ESCAPED_QUOTE_COLON)


def _keys_read(value: Any) -> int:
    """How many object keys ``value`` holds at every depth; -1 if it holds a float past 2**63
    in size (orjson's reading of an integer past 64 bits, or a float: either way the strict
    path decides)."""
    count = len(value) if type(value) is dict else 0
    item: Any
    for item in value.values() if type(value) is dict else value:
        kind = type(item)
        if kind is dict or kind is list:
            inner = _keys_read(item)
            if inner < 0:
                return -1
            count += inner
        elif kind is float and not -_BIG_FLOAT < item < _BIG_FLOAT:
            return -1
    return count
