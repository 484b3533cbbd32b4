"""Per-session metadata kept outside the log.

See docs/format.md, "Session headers".
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from typing import Annotated, Any, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)
from pydantic.alias_generators import to_camel

from ..errors import InvalidEventError
from .catalog import FORMAT_VERSION
from .envelope import MAX_INT
from .jsonvalue import canonical_json

__all__ = ["KIND", "SessionHeader", "check_session_id", "header_line"]

KIND = "todo-sessions/session"
"""``kind`` of a session file's header line (docs/format.md, "JSONL")."""


def check_session_id(value: Any) -> str:
    """A session id is a string of 1-200 characters with no control characters (and no lone
    surrogates, which no database can store). Raises `InvalidEventError` (a ValueError).

    Every append and read checks its id, so this is written to be cheap without remembering
    any: a printable string (the usual id) has neither, and only other strings are searched.
    """
    if not isinstance(value, str) or not 1 <= len(value) <= 200:
        raise InvalidEventError(
            f"session id must be a string of 1-200 characters, got {shown(value)}",
            field="session_id",
        )
    if not value.isprintable() and _CONTROL_OR_SURROGATE.search(value) is not None:
        raise InvalidEventError(
            f"session id must not contain control characters: {shown(value)}",
            field="session_id",
        )
    return value


_CONTROL_OR_SURROGATE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""Exactly the code points of the Unicode categories Cc (controls) and Cs (surrogates): both
categories are closed by Unicode's stability policy. `str.isprintable` is False for both."""


def check_text(value: str) -> str:
    """Header text is stored as is on every backend: no NUL, no lone surrogates."""
    if "\x00" in value or any(unicodedata.category(ch) == "Cs" for ch in value):
        raise ValueError(f"must not contain NUL or lone surrogate characters: {shown(value)}")
    return value


SessionId = Annotated[str, AfterValidator(check_session_id)]
Text = Annotated[str, AfterValidator(check_text)]


class SessionHeader(BaseModel):
    """Metadata of one session: written once, when its first events are appended.

    ``created_at`` is Unix epoch milliseconds; ``cwd``, when given, is an absolute path.
    ``parent_session``/``seed_length`` are set on forks.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid", strict=True
    )

    id: SessionId
    created_at: int = Field(ge=0, le=MAX_INT)
    cwd: Text | None = None
    parent_session: SessionId | None = None
    seed_length: int | None = Field(default=None, ge=0, le=MAX_INT)
    origin: Text | None = None
    delegation_depth: int = Field(default=0, ge=0, le=MAX_INT)
    title: Text | None = None
    format_version: int = Field(default=FORMAT_VERSION, ge=0, le=MAX_INT)

    @field_validator("cwd")
    @classmethod
    def _absolute_cwd(cls, value: str | None) -> str | None:
        if value is not None and not (posixpath.isabs(value) or _is_windows_abs(value)):
            raise ValueError(f"cwd must be an absolute path, got {value!r}")
        return value

    def __init__(self, **fields: Any) -> None:
        """Validate; a bad field raises `InvalidEventError` (a ValueError) naming it."""
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise _header_error(exc) from None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        """Validate a wire object (camelCase keys); errors as in the constructor."""
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise _header_error(exc) from None

    @classmethod
    def model_validate_json(cls, json_data: Any, *args: Any, **kwargs: Any) -> Self:
        """Validate wire JSON text; errors as in the constructor."""
        try:
            return super().model_validate_json(json_data, *args, **kwargs)
        except ValidationError as exc:
            raise _header_error(exc) from None

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)


def _header_error(exc: ValidationError) -> InvalidEventError:
    first = exc.errors(include_url=False)[0]
    inner = first.get("ctx", {}).get("error")
    if not first["loc"] and isinstance(inner, InvalidEventError):
        return inner  # model_validate ran our __init__, which already said what was wrong
    field = ".".join(str(p) for p in first["loc"]) or "header"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    message = first["msg"].removeprefix("Value error, ")
    return InvalidEventError(f"invalid session header: {field}: {message}{more}", field=field)


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` for a message, cut to about ``limit`` characters (ids may be huge)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f" ({len(value)} characters)" if isinstance(value, str) else ""
    return f"{text[:limit]}…{size}"


def _is_windows_abs(path: str) -> bool:
    return len(path) >= 3 and path[0].isalpha() and path[1] == ":" and path[2] in "\\/"


def header_line(header: SessionHeader, chain: tuple[int, str | None] | None = None) -> str:
    """The header line of a session file; ``chain``: ``(seq, value)`` of the last event's hash
    chain value (`SessionStore.chain_head`), carried as ``"chain": {"seq": ..., "head": ...}``."""
    head: dict[str, Any] = {
        "kind": KIND,
        "formatVersion": header.format_version,
        "header": header.to_wire(),
    }
    if chain is not None:
        head["chain"] = {"seq": chain[0], "head": chain[1]}
    return canonical_json(head)
