"""``request/header`` and ``request/context`` in the reference's shapes, and the upcaster that
reads the shape todo-sessions wrote before (docs/format.md, "Request records").

The reference's ``request/header`` is ``{header: {config: {provider, model, ...}, adapterDefaults?,
system?, tools?}, reason}``, ``reason`` one of ``initial``, ``resume``, ``change``. Earlier
versions of todo-sessions wrote ``{provider, model, system?, tools}`` instead. Such events stay in
the log as they were written (the log is never rewritten); readers go through
`upcast_request_header`, and the payload model accepts both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from .messages import WireModel

__all__ = [
    "ADAPTER_DEFAULT_MARKERS",
    "EpochHeader",
    "LlmCallConfig",
    "RequestContextData",
    "RequestHeaderData",
    "adapter_defaults_problem",
    "is_legacy_request_header",
    "upcast_request_header",
]


def is_legacy_request_header(data: Any) -> bool:
    """Whether ``data`` is a ``request/header`` payload in todo-sessions' earlier shape:
    ``{provider, model, system?, tools?}`` with string provider and model, and no ``header``."""
    return (
        isinstance(data, Mapping)
        and "header" not in data
        and isinstance(data.get("provider"), str)
        and isinstance(data.get("model"), str)
    )


def upcast_request_header(data: Mapping[str, Any], *, reason: str = "initial") -> dict[str, Any]:
    """``data`` in the reference's shape: an earlier todo-sessions payload is turned into
    ``{header: {config: {provider, model}, system?, tools?, ...}, reason}`` (any other keys it
    had go into ``header`` unchanged); a payload already in that shape is returned as a copy."""
    if not is_legacy_request_header(data):
        return dict(data)
    header: dict[str, Any] = {"config": {"provider": data["provider"], "model": data["model"]}}
    header.update((key, value) for key, value in data.items() if key not in ("provider", "model"))
    return {"header": header, "reason": reason}


class LlmCallConfig(WireModel):
    """``header.config``: the model call's configuration; provider and model non-empty."""

    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)
    reasoning_effort: str | None = Field(default=None, min_length=1)
    """Absent when the call sets none; present, a non-empty string (``null`` is refused, as the
    reference refuses it)."""
    max_tokens: int | None = None

    @field_validator("reasoning_effort", mode="before")
    @classmethod
    def _effort_not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("must be a non-empty string when present (leave the key out instead)")
        return value


ADAPTER_DEFAULT_MARKERS = ("reasoningEffort", "maxTokens")
"""The values of ``header.config`` an ``adapterDefaults`` marker may name."""


def adapter_defaults_problem(value: Any, config: LlmCallConfig | None) -> str | None:
    """What is wrong with ``header.adapterDefaults`` (present in the payload), or None. It is an
    object of markers ``{name: true}``, each naming one of `ADAPTER_DEFAULT_MARKERS` that
    ``config`` sets: the marker says the adapter chose that value. ``config`` None (itself
    invalid) skips that last check."""
    if not isinstance(value, dict):
        shown = _JSON_KINDS.get(type(value), type(value).__name__)
        return f"must be an object of markers {{name: true}}, not {shown}"
    for name, marker in value.items():
        if name not in ADAPTER_DEFAULT_MARKERS:
            known = " or ".join(ADAPTER_DEFAULT_MARKERS)
            return f"unknown marker {name!r} (a marker names {known})"
        if marker is not True:
            return f"the marker {name!r} must be true"
        if config is not None and _field_of(name) not in config.model_fields_set:
            return f"the marker {name!r} names a value header.config does not set"
    return None


_JSON_KINDS = {
    type(None): "null (leave the key out instead)",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
}


def _field_of(alias: str) -> str:
    return next(n for n, f in LlmCallConfig.model_fields.items() if (f.alias or n) == alias)


class EpochHeader(WireModel):
    config: LlmCallConfig
    adapter_defaults: dict[str, Literal[True]] | None = None
    """Present: an object of markers (`adapter_defaults_problem`); never null."""
    system: str | None = None
    tools: list[dict[str, Any]] | None = None

    @field_validator("adapter_defaults", mode="before")
    @classmethod
    def _markers(cls, value: Any, info: ValidationInfo) -> Any:
        problem = adapter_defaults_problem(value, info.data.get("config"))
        if problem:
            raise ValueError(problem)
        return value


class RequestHeaderData(WireModel):
    """``request/header``: the request configuration from this event on."""

    header: EpochHeader
    reason: str | None = None
    """``initial``, ``resume`` or ``change`` when written by the reference or by us."""

    @model_validator(mode="before")
    @classmethod
    def _upcast(cls, data: Any) -> Any:
        return upcast_request_header(data) if is_legacy_request_header(data) else data


class RequestContextData(WireModel):
    """``request/context``: ``{provider, model, contextWindow?}``. Each field is checked when
    present; none is required (the reference does not check this record when reading)."""

    provider: str | None = None
    model: str | None = None
    context_window: int | None = None
