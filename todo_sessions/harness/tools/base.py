"""What a tool is: the `Tool` protocol, the `ToolContext` it runs in, the `ToolResult` it returns.

Also the two schema helpers the registry and tools share: `compile_schema` (check a JSON Schema
once and build its Draft 2020-12 validator) and `schema_problem` (why arguments break it, naming
each offending property path, or None).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError as JsonSchemaError

from ..._session import Session

__all__ = [
    "Tool",
    "ToolContext",
    "ToolResult",
    "compile_schema",
    "schema_problem",
]

_MAX_SCHEMA_ERRORS = 5
_MAX_ERROR_CHARS = 300


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """Where a tool call runs.

    ``session`` is the owning agent session (None for callers that are not an agent, e.g. a
    UI or a script); ``call_id`` the model's tool-call id; ``turn``/``step`` locate the call in
    the log; ``cancel`` is set when the caller wants the tool to stop early; ``model`` is the
    model of the calling agent loop (None outside one), which a ``subagent`` call runs its
    child with unless told otherwise.
    """

    session: Session | None
    call_id: str
    turn: int | None = None
    step: int | None = None
    cancel: asyncio.Event | None = None
    model: Any = None


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call.

    ``content`` holds content blocks (``[{"type": "text", "text": ...}]``) for the model;
    ``is_error`` marks a failed call; ``structured`` is optional machine-readable detail for
    UIs and callers (it is not shown to the model).
    """

    content: list[dict[str, Any]]
    is_error: bool = False
    structured: dict[str, Any] | None = None

    @classmethod
    def text(
        cls, s: str, *, is_error: bool = False, structured: dict[str, Any] | None = None
    ) -> ToolResult:
        """A result with one text block."""
        return cls([{"type": "text", "text": s}], is_error=is_error, structured=structured)

    @classmethod
    def error(cls, s: str) -> ToolResult:
        """A failed result with one text block explaining the failure."""
        return cls.text(s, is_error=True)

    @property
    def text_content(self) -> str:
        """The text of all text blocks, joined by newlines."""
        return "\n".join(
            block["text"]
            for block in self.content
            if block.get("type") == "text" and isinstance(block.get("text"), str)
        )


@runtime_checkable
class Tool(Protocol):
    """A tool the model can call.

    ``parameters`` is the JSON Schema (Draft 2020-12) of the arguments object; the registry
    validates arguments against it before ``run`` is called. A tool may also define
    ``present_call(self, args: dict) -> dict | None`` giving UIs ``{title, kind, raw_input}``
    for a call, and ``call_fields(self, session, call_id: str, arguments: str) -> dict``
    giving extra keys for the call's ``tool/call`` event (the ``subagent`` tool's
    ``subagentSessionId``); both are optional, so they are not part of this protocol's
    required members.
    """

    name: str
    description: str
    parameters: dict[str, Any]

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        """Carry out the call. Expected failures are ``is_error`` results, not exceptions."""
        ...


def compile_schema(schema: Mapping[str, Any]) -> Draft202012Validator:
    """Check ``schema`` as a Draft 2020-12 JSON Schema and build its validator.

    Raises ``ValueError`` if the schema itself is invalid.
    """
    try:
        Draft202012Validator.check_schema(schema)
    except JsonSchemaError as exc:
        raise ValueError(f"invalid JSON Schema: {exc.message}") from exc
    return Draft202012Validator(schema)


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."


def schema_problem(validator: Draft202012Validator, args: Any) -> str | None:
    """Why ``args`` breaks the validator's schema, or None if it conforms.

    Each problem reads ``<json path>: <message>`` (``$`` is the arguments object itself);
    problems are sorted by path, at most a few are listed.
    """
    errors = sorted(validator.iter_errors(args), key=lambda e: (e.json_path, e.message))
    if not errors:
        return None
    parts = [f"{e.json_path}: {_clip(e.message)}" for e in errors[:_MAX_SCHEMA_ERRORS]]
    if len(errors) > _MAX_SCHEMA_ERRORS:
        parts.append(f"(and {len(errors) - _MAX_SCHEMA_ERRORS} more)")
    return "; ".join(parts)
