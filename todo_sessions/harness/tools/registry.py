"""`ToolRegistry`: the tools an agent offers the model, and the one safe way to run them.

``execute`` never lets a tool call crash the agent loop: an unknown tool, arguments that are
not a JSON object, arguments that break the tool's JSON Schema, and exceptions raised inside
the tool all become ``is_error`` results the model can read and react to. Only
``asyncio.CancelledError`` (and other non-``Exception`` base exceptions) propagate.
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from .base import Tool, ToolContext, ToolResult, compile_schema, schema_problem

__all__ = ["ToolHandle", "ToolRegistry", "parse_arguments"]

logger = logging.getLogger("todo_sessions.harness.tools")


@dataclass(eq=False)
class _Entry:
    tool: Tool
    validator: Draft202012Validator


@dataclass(eq=False)
class ToolHandle:
    """What `ToolRegistry.register` returns; ``unregister()`` removes exactly that registration.

    Unregistering twice, or after the name was unregistered (or re-registered with another
    tool) by other means, is harmless and leaves the registry unchanged.
    """

    registry: ToolRegistry
    name: str
    _entry: _Entry = field(repr=False)

    def unregister(self) -> bool:
        """Remove this registration; True if it was still registered."""
        return self.registry._remove(self.name, self._entry)


def parse_arguments(args: dict[str, Any] | str | None) -> dict[str, Any]:
    """The arguments object from a dict or the raw JSON string the model produced.

    ``None`` and an empty (or blank) string mean no arguments (``{}``). Raises ``ValueError``
    with a readable message for invalid JSON or a value that is not a JSON object.
    """
    if args is None:
        return {}
    if isinstance(args, str):
        if not args.strip():
            return {}
        try:
            value = json.loads(args)
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments are not valid JSON: {exc}") from exc
    else:
        value = args
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


class ToolRegistry:
    """Tools by name, in registration order.

    The tool's ``parameters`` schema is checked and compiled once, at registration (later
    changes to the tool's dict do not affect validation).
    """

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def register(self, tool: Tool) -> ToolHandle:
        """Add ``tool``. Raises ``ValueError`` for a duplicate name or an invalid schema."""
        if not isinstance(tool, Tool):
            raise TypeError(f"{tool!r} is not a Tool (needs name, description, parameters, run)")
        name = tool.name
        if not isinstance(name, str) or not name:
            raise ValueError(f"tool name must be a non-empty string, got {name!r}")
        if name in self._entries:
            raise ValueError(f"a tool named {name!r} is already registered")
        try:
            validator = compile_schema(copy.deepcopy(tool.parameters))
        except ValueError as exc:
            raise ValueError(f"tool {name!r}: parameters are not a valid schema: {exc}") from exc
        entry = _Entry(tool, validator)
        self._entries[name] = entry
        return ToolHandle(self, name, entry)

    def unregister(self, name: str) -> bool:
        """Remove the tool called ``name``; True if there was one (unknown names are harmless)."""
        return self._entries.pop(name, None) is not None

    def _remove(self, name: str, entry: _Entry) -> bool:
        if self._entries.get(name) is entry:
            del self._entries[name]
            return True
        return False

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        entry = self._entries.get(name)
        return None if entry is None else entry.tool

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._entries)

    def definitions(self) -> list[dict[str, Any]]:
        """``{name, description, parameters}`` per tool, for a model request (copies)."""
        return [
            {
                "name": name,
                "description": entry.tool.description,
                "parameters": copy.deepcopy(entry.tool.parameters),
            }
            for name, entry in self._entries.items()
        ]

    def present_call(self, name: str, args: dict[str, Any] | str | None) -> dict[str, Any] | None:
        """The tool's UI presentation of a call (``{title, kind, raw_input}``), or None.

        None when the tool is unknown, has no ``present_call``, the arguments do not parse, or
        presenting fails (logged): presentation never breaks a call.
        """
        entry = self._entries.get(name)
        present = getattr(entry.tool, "present_call", None) if entry is not None else None
        if present is None:
            return None
        try:
            return present(parse_arguments(args))
        except Exception:
            logger.warning("tool %r: present_call failed", name, exc_info=True)
            return None

    async def execute(
        self, name: str, args: dict[str, Any] | str | None, context: ToolContext
    ) -> ToolResult:
        """Validate ``args`` and run the tool; every failure is an ``is_error`` result.

        ``asyncio.CancelledError`` propagates unchanged.
        """
        entry = self._entries.get(name)
        if entry is None:
            known = ", ".join(self._entries) or "none"
            return ToolResult.error(f"unknown tool {name!r} (available tools: {known})")
        try:
            parsed = parse_arguments(args)
        except ValueError as exc:
            return ToolResult.error(f"invalid arguments for tool {name}: {exc}")
        problem = schema_problem(entry.validator, parsed)
        if problem is not None:
            return ToolResult.error(f"invalid arguments for tool {name}: {problem}")
        try:
            result = await entry.tool.run(parsed, context)
        except Exception as exc:
            logger.exception("tool %r failed (call %s)", name, context.call_id)
            return ToolResult.error(f"tool {name} failed: {type(exc).__name__}: {exc}")
        if not isinstance(result, ToolResult):
            logger.error("tool %r returned %r, not a ToolResult", name, type(result).__name__)
            return ToolResult.error(
                f"tool {name} failed: it returned {type(result).__name__}, not a ToolResult"
            )
        return result
