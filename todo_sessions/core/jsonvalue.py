"""Lossless JSON: the only values an event may carry, their canonical text, and frozen views.

A value is *lossless* when ``json.loads(canonical_json(v)) == v`` holds exactly: null, bool, str,
finite int/float, lists and str-keyed dicts of those. Tuples, sets, bytes, non-str keys, NaN,
±Infinity, -0.0, lone surrogates and arbitrary objects are refused, because a round trip through
the log would hand back something different.

See docs/format.md, "Lossless data" and "Canonical text and byte-exact round trips". The
canonical text is what ``json.dumps(v, ensure_ascii=False, separators=(",", ":"),
allow_nan=False)`` writes. orjson produces it for the common case (several times faster than
the stdlib encoder); the stdlib encoder remains the definition, the fallback, and the source of
every error message.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, NoReturn

import orjson

__all__ = [
    "MAX_DEPTH",
    "FrozenDict",
    "FrozenList",
    "LosslessJSONError",
    "canonical_fast",
    "canonical_json",
    "canonical_parsed",
    "decode_fast",
    "decode_json",
    "freeze",
    "lossless_copy",
    "thaw",
]

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_SORTED_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True
)

MAX_DEPTH = 256
"""Deepest nesting of lists and dicts a payload may have (deeper is refused, not truncated)."""


def _too_deep(value: Any, text: str) -> bool:
    """True if ``value`` nests deeper than `MAX_DEPTH` (the walk runs only for payloads with
    more containers than that, which the text tells at C speed)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, dict | list))
    return False


class LosslessJSONError(ValueError):
    """A value is not losslessly JSON-serializable; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def canonical_json(value: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON text of a value that is already known to be lossless: no whitespace,
    non-ASCII characters as they are, keys in the value's own order (``sort_keys``: sorted).
    The one spelling of the library's JSON: the store, the hash chain, the header line and
    every export write through it. ``ValueError`` for NaN or an infinity."""
    return (_SORTED_ENCODER if sort_keys else _ENCODER).encode(value)


def _describe(value: Any) -> str:
    return type(value).__name__


def _scalar_problem(value: Any, path: str) -> str | None:
    """What is wrong with a str or float (a lone surrogate, NaN, an infinity, -0.0), or None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{path} contains a lone surrogate"
        return None
    if not math.isfinite(value):
        return f"{path} is {value!r}"
    if value == 0.0 and math.copysign(1.0, value) < 0:
        return f"{path} is -0.0"
    return None


def _find_problem(value: Any, path: str) -> str | None:
    """Walk a value and name the first thing that is not lossless JSON (slow path, errors only)."""
    if value is None or isinstance(value, bool) or type(value) is int:
        return None
    if isinstance(value, str) or type(value) is float:
        return _scalar_problem(value, path)
    if isinstance(value, list):
        for i, item in enumerate(value):
            problem = _find_problem(item, f"{path}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path} has a non-str key {key!r} ({_describe(key)})"
            problem = _find_problem(item, f"{path}.{key}")
            if problem:
                return problem
        return None
    return f"{path} has type {_describe(value)}"


def _has_negative_zero(value: Any) -> bool:
    if type(value) is float:
        return value == 0.0 and math.copysign(1.0, value) < 0
    if isinstance(value, list):
        return any(_has_negative_zero(v) for v in value)
    if isinstance(value, dict):
        return any(_has_negative_zero(v) for v in value.values())
    return False


def _stdlib_lossless_copy(value: Any, path: str) -> tuple[Any, str]:
    """`lossless_copy` through the stdlib encoder: handles (and names) everything."""
    try:
        text = _ENCODER.encode(value)
    except RecursionError:
        raise LosslessJSONError(f"{path} nests deeper than {MAX_DEPTH} levels") from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ValueError) and "Circular reference" in str(exc):
            raise LosslessJSONError(f"{path} contains a reference cycle") from None
        try:
            problem = _find_problem(value, path)
        except RecursionError:
            problem = f"{path} nests deeper than {MAX_DEPTH} levels"
        raise LosslessJSONError(problem or str(exc)) from None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise LosslessJSONError(
            _find_problem(value, path) or f"{path} contains a lone surrogate"
        ) from None
    if _too_deep(value, text):
        raise LosslessJSONError(f"{path} nests deeper than {MAX_DEPTH} levels")
    copy = json.loads(text)
    if copy != value:
        raise LosslessJSONError(
            _find_problem(value, path) or f"{path} does not survive a JSON round trip"
        )
    if "-0.0" in text and _has_negative_zero(value):
        raise LosslessJSONError(_find_problem(value, path) or f"{path} contains -0.0")
    return copy, text


# -- the orjson fast path -----------------------------------------------------------------------
#
# orjson writes exactly the stdlib's compact ``ensure_ascii=False`` text for str (every code
# point), int, bool, None, list and dict, and Python's ``repr`` for floats, except in one band:
# floats below 1e-4 in magnitude, which it writes as ``0.00001`` (repr: ``1e-05``) or with a
# one-digit exponent ``1e-7`` (repr: ``1e-07``). `_float_form_differs` spots that band in its
# output (strings that merely look like it only cost a slower path), and `_ORJSON_MATCHES`
# checks the whole rule once at import against the stdlib, so an orjson that formats
# differently is simply not used.
#
# What orjson does not refuse is caught afterwards: it writes NaN and ±Infinity as null, and
# tuples, enums and UUIDs as their JSON forms, so the copy it parses back is compared with the
# input; any difference, and anything orjson refuses (subclasses of builtins, non-str keys,
# lone surrogates, ints past 64 bits, nesting past its limit of 254 levels, cycles), goes to
# the stdlib path, which accepts what it accepted before and names every problem as before.

_ORJSON_OPTIONS = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
_SHORT_NEGATIVE_EXPONENT = re.compile(r"e-[0-9](?![0-9])")  # a literal prefix: fast search
_MANTISSA_BEFORE = re.compile(r"(?:^|[\[:,])-?[0-9]+(?:\.[0-9]+)?$")
"""A number's mantissa ending where an exponent starts, as orjson writes it (after ``[``,
``:``, ``,`` or at the start): ``e-1`` inside a string (a UUID's ``7e-1a``) is not a float."""


def _float_form_differs(text: str) -> bool:
    """True if orjson's text may write a float otherwise than ``repr`` (see above).

    False positives (strings that look like it) only cost the slower stdlib encoder. It looks
    at the decoded text: ``in`` on bytes costs several times more than on str.
    """
    if "0.0" in text and "0.0000" in text:
        return True
    if "e-" not in text:
        return False
    # One C call settles the common case, an ``e-`` not followed by a lone digit (a model
    # named "claude-sonnet-4" puts ``e-`` in most events): no iterator, no generator.
    found = _SHORT_NEGATIVE_EXPONENT.search(text)
    while found is not None:
        start = found.start()  # a mantissa is at most 17 digits, a dot and a sign: 40 suffice
        if _MANTISSA_BEFORE.search(text, max(0, start - 40), start):
            return True
        found = _SHORT_NEGATIVE_EXPONENT.search(text, found.end())
    return False


def _unfreeze(value: Any) -> Any:
    """orjson ``default``: our own frozen views encode as the dict or list they are."""
    kind = type(value)
    if kind is FrozenDict:
        return dict(value)
    if kind is FrozenList:
        return list(value)
    raise TypeError(f"{kind.__name__} is not plain JSON")


def _orjson_matches() -> bool:
    """Does this orjson write what the stdlib writes (given `_float_form_differs`)?"""
    floats = [0.1, 0.30000000000000004, 1.0, 123.456, 1e15, 9999999999999998.0, 1e16, 1.5e17]
    floats += [1e22, 1.7976931348623157e308, 1e-4, 9.99e-5, 1e-5, 1.5e-7, 1e-10, 5e-324]
    sample: list[Any] = [*floats, *(-f for f in floats), 0, -1, 2**63 - 1, -(2**63), 2**64 - 1]
    sample += [True, False, None, 'é\u2028\x00\x1f\x7f"\\/\U0001f600', {"k": [{}]}, []]
    for item in sample:
        text = orjson.dumps([item], option=_ORJSON_OPTIONS).decode()
        if not _float_form_differs(text) and text != _ENCODER.encode([item]):
            return False
    return True


_ORJSON_MATCHES = _orjson_matches()


def lossless_copy(value: Any, *, path: str = "data") -> tuple[Any, str]:
    """Return ``(copy, canonical_text)`` of a lossless value, or raise `LosslessJSONError`.

    The copy shares nothing with the input, so later mutation of the input changes nothing.
    """
    if not _ORJSON_MATCHES:  # pragma: no cover - an orjson that formats otherwise
        return _stdlib_lossless_copy(value, path)
    try:
        raw = orjson.dumps(value, default=_unfreeze, option=_ORJSON_OPTIONS)
        copy = orjson.loads(raw)
        same = copy == value
    except Exception:  # refused by orjson (or an __eq__ that raises): the stdlib names it
        return _stdlib_lossless_copy(value, path)
    if not same:  # NaN/inf written as null, tuples, enums, UUIDs...
        return _stdlib_lossless_copy(value, path)
    text = raw.decode()
    if "-0.0" in text and _has_negative_zero(value):
        raise LosslessJSONError(_find_problem(value, path) or f"{path} contains -0.0")
    return copy, (_ENCODER.encode(copy) if _float_form_differs(text) else text)


def canonical_fast(value: Any) -> str | None:
    """Canonical text of a value made of plain JSON types with finite floats (as `orjson.loads`
    returns them), or None when the fast encoder cannot vouch for it: ints past 64 bits, nesting
    past 254 levels, lone surrogates, -0.0. The caller then takes a path that names the problem.
    """
    if not _ORJSON_MATCHES:  # pragma: no cover - an orjson that formats otherwise
        return None
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        return None
    if "-0.0" in text and _has_negative_zero(value):
        return None
    return _ENCODER.encode(value) if _float_form_differs(text) else text


def _has_non_finite(value: Any) -> bool:
    if type(value) is float:
        return not math.isfinite(value)
    if isinstance(value, list):
        return any(_has_non_finite(v) for v in value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    return False


def canonical_parsed(value: Any, *, path: str = "data") -> str:
    """Canonical text of a value fresh from `decode_json`.

    Parsed JSON is lossless by construction except for things JSON text can carry and a round
    trip would not keep: lone surrogate escapes, numbers too large for a float, and -0.0;
    those are refused.
    """
    text = canonical_fast(value)
    if text is not None and "null" in text and _has_non_finite(value):
        text = None  # orjson wrote inf (from a literal like 1e999) as null
    if text is None:
        try:
            text = _ENCODER.encode(value)
        except ValueError:  # 1e999 parses to inf, which JSON cannot hold
            raise LosslessJSONError(
                _find_problem(value, path) or f"{path} holds a number JSON cannot represent"
            ) from None
        except RecursionError:
            raise LosslessJSONError(f"{path} nests deeper than {MAX_DEPTH} levels") from None
        if _too_deep(value, text):
            raise LosslessJSONError(f"{path} nests deeper than {MAX_DEPTH} levels")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise LosslessJSONError(f"{path} contains a lone surrogate") from None
    if "-0.0" in text and _has_negative_zero(value):
        raise LosslessJSONError(_find_problem(value, path) or f"{path} contains -0.0")
    return text


def _reject_constant(name: str) -> NoReturn:
    raise LosslessJSONError(f"{name} is not allowed in lossless JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise LosslessJSONError(f"duplicate key {key!r}")
            seen.add(key)
    return result


_STRICT_DECODER = json.JSONDecoder(
    parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys
)
_FAST_DECODER = json.JSONDecoder(parse_constant=_reject_constant)

_stdlib_decode: Callable[[str], Any] = _FAST_DECODER.decode
_orjson_loads = orjson.loads
_orjson_dumps = orjson.dumps


def decode_fast(text: str) -> Any:
    """Parse trusted JSON text (our own rows and lines): refuses NaN/Infinity, does not look for
    duplicate keys; raises ValueError. The per-row decoder of every read.

    orjson parses; its result is taken only when encoding it gives back exactly the text (our
    rows hold canonical text, so they do), which rules out what orjson would read otherwise
    than the stdlib (integers past 64 bits become floats there). Anything else, and anything
    orjson refuses, is parsed by the stdlib, which also names the problem.
    """
    if _ORJSON_MATCHES and type(text) is str:
        try:
            value = _orjson_loads(text)
        except orjson.JSONDecodeError:
            return _stdlib_decode(text)
        if _orjson_dumps(value) == text.encode():
            return value
    return _stdlib_decode(text)


def decode_json(text: str | bytes, *, strict: bool = True) -> Any:
    """Parse JSON text, refusing NaN/Infinity and (when ``strict``) duplicate keys.

    Raises `LosslessJSONError` (a ValueError) for anything that is not lossless JSON text.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LosslessJSONError(f"not UTF-8: {exc}") from None
    if not isinstance(text, str):
        raise LosslessJSONError(f"expected JSON text, got {_describe(text)}")
    decoder = _STRICT_DECODER if strict else _FAST_DECODER
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise LosslessJSONError(f"invalid JSON: {exc}") from None
    except RecursionError:
        raise LosslessJSONError(f"JSON nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # e.g. an integer longer than Python's digit limit
        raise LosslessJSONError(f"invalid JSON: {exc}") from None


# -- frozen views -------------------------------------------------------------------------------


def _immutable(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is immutable: events never change once built")


class FrozenDict(dict[str, Any]):
    """A dict that refuses mutation. JSON-encodes, compares and hashes-by-identity like a dict."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _immutable
    clear = pop = popitem = setdefault = update = _immutable

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return (FrozenDict, (dict(self),))


class FrozenList(list[Any]):
    """A list that refuses mutation."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _immutable
    append = extend = insert = pop = remove = clear = sort = reverse = _immutable

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return (FrozenList, (list(self),))


def freeze(value: Any) -> Any:
    """A deep immutable view of a decoded JSON value (dicts and lists replaced, scalars shared)."""
    kind = type(value)
    if kind is dict or kind is FrozenDict:
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if kind is list or kind is FrozenList:
        return FrozenList([freeze(v) for v in value])
    return value


def thaw(value: Any) -> Any:
    """A deep mutable copy of a (possibly frozen) JSON value."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value
