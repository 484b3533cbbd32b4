"""The registry of event types: each name's payload model, its fast check, and whether it is
surface-eligible. The catalog (`todo_sessions.core.catalog`) fills it with the log format's
types and validates against it; the adapters' vocabularies and embedders add their own types
with `register_event_type` (docs/format.md, "Vocabularies").

It imports nothing of the catalog, so every module of the core may read it; the core's package
loads the catalog first, so whoever imports a core module sees every type registered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .fastcheck import Check, compile_check

__all__ = ["EVENT_TYPES", "EventType", "register_event_type"]


@dataclass(frozen=True, slots=True)
class EventType:
    """A registered event type: its name, payload model, and whether it may carry a surface op."""

    name: str
    model: type[Any]
    surface: bool = False


_REGISTRY: dict[str, EventType] = {}
_CHECKS: dict[str, Check | None] = {}
"""Each registered type's fast payload check, compiled from its model when it is registered
(None: the model validates every payload). See `fastcheck`."""
EVENT_TYPES: Mapping[str, EventType] = MappingProxyType(_REGISTRY)
"""Read-only view of every registered event type, by name."""


def register_event_type(name: str, model: type[Any], *, surface: bool = False) -> EventType:
    """Register an event type (embedders' own types too).

    ``model`` is a pydantic model that validates the payload. Registering the same name again
    with the same model is harmless; with another model it is refused (``ValueError``).
    """
    if not isinstance(name, str) or not name or not name.isprintable() or len(name) > 200:
        raise ValueError(f"event type name must be a printable string of 1-200 chars: {name!r}")
    if not hasattr(model, "model_validate"):
        raise TypeError(f"model for {name!r} must be a pydantic model class")
    entry = EventType(name, model, surface)
    existing = _REGISTRY.get(name)
    if existing is not None and existing != entry:
        raise ValueError(f"event type {name!r} is already registered with {existing.model!r}")
    if existing is None:
        _CHECKS[name] = compile_check(model)
        _REGISTRY[name] = entry
    return entry
