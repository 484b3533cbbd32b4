"""Lossless JSON: the only values an event may carry, their canonical text, and frozen views.

A value is *lossless* when ``json.loads(canonical_json(v)) == v`` holds exactly: null, bool, str,
finite int/float, lists and str-keyed dicts of those. Tuples, sets, bytes, non-str keys, NaN,
±Infinity, -0.0, lone surrogates and arbitrary objects are refused, because a round trip through
the log would hand back something different.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, NoReturn

__all__ = [
    "MAX_DEPTH",
    "FrozenDict",
    "FrozenList",
    "LosslessJSONError",
    "canonical_json",
    "canonical_parsed",
    "decode_fast",
    "decode_json",
    "freeze",
    "lossless_copy",
    "thaw",
]

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))

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


def canonical_json(value: Any) -> str:
    """Compact JSON text of a value that is already known to be lossless."""
    return _ENCODER.encode(value)


def _describe(value: Any) -> str:
    return type(value).__name__


def _find_problem(value: Any, path: str) -> str | None:
    """Walk a value and name the first thing that is not lossless JSON (slow path, errors only)."""
    if value is None or isinstance(value, bool | str):
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return f"{path} contains a lone surrogate"
        return None
    if type(value) is int:
        return None
    if type(value) is float:
        if not math.isfinite(value):
            return f"{path} is {value!r}"
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return f"{path} is -0.0"
        return None
    if type(value) is list or isinstance(value, list):
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


def lossless_copy(value: Any, *, path: str = "data") -> tuple[Any, str]:
    """Return ``(copy, canonical_text)`` of a lossless value, or raise `LosslessJSONError`.

    The copy shares nothing with the input, so later mutation of the input changes nothing.
    """
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


def _unencodable(value: Any) -> NoReturn:
    raise TypeError(f"{type(value).__name__} is not JSON")


# One reusable C encoder for values that cannot hold cycles (fresh from the parser):
# ``JSONEncoder.encode`` builds a new one per call, which costs more than encoding a payload.
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_parsed_iterencode: Any = (
    _c_make_encoder(
        None, _unencodable, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    if _c_make_encoder is not None
    else None
)


def canonical_parsed(value: Any, *, path: str = "data") -> str:
    """Canonical text of a value fresh from `decode_json`.

    Parsed JSON is lossless by construction except for two things JSON text can carry and a
    round trip would not keep: lone surrogate escapes and -0.0; those are refused.
    """
    try:
        if _parsed_iterencode is not None:
            text = "".join(_parsed_iterencode(value, 0))
        else:  # pragma: no cover - interpreters without the C accelerator
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

decode_fast: Callable[[str], Any] = _FAST_DECODER.decode
"""Parse trusted JSON text (our own rows and lines): refuses NaN/Infinity, does not look for
duplicate keys; raises ValueError. The per-row decoder of every read."""


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
