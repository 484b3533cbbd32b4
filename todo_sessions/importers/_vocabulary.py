"""The event types of the importers, registered from here (docs/format.md, "Imported
sessions"): ``import/verbatim`` and each built-in importer's entry types (``codex/entry``,
``opencode/session``, ``opencode/message``; the Claude Code importer writes ``claude/entry``, a
type of `todo_sessions.integrations`).
Loaded by `todo_sessions.load_vocabularies`, so a process that only reads a store knows them
too. An importer of another agent registers its entry type with `register_entry_type`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..core.registry import register_event_type

__all__ = [
    "CODEX_ENTRY",
    "OPENCODE_MESSAGE",
    "OPENCODE_SESSION",
    "VERBATIM_TYPE",
    "EntryData",
    "VerbatimData",
    "register_entry_type",
]

VERBATIM_TYPE = "import/verbatim"
CODEX_ENTRY = "codex/entry"
OPENCODE_MESSAGE = "opencode/message"
"""One opencode message, kept whole: ``{info, parts}`` as ``opencode export`` shows it."""
OPENCODE_SESSION = "opencode/session"
"""An opencode session's info as ``opencode export`` shows it (``{info}``), and its database
row (``row``) when it was read from one; a new one each time it changed."""


class VerbatimData(BaseModel):
    """``import/verbatim``: the exact text of the source line the entry before it holds, or
    (``alone``) of a line whose JSON no event can hold, kept as text only."""

    model_config = ConfigDict(extra="forbid", strict=True)
    line: str
    alone: bool = False


class EntryData(BaseModel):
    """``<agent>/entry``: one source line, kept whole (any JSON object). Strict, so that the
    core's compiled check validates it (a lax model goes through pydantic: the whole line,
    every time); with no fields, strict accepts exactly what lax does."""

    model_config = ConfigDict(extra="allow", strict=True)


def register_entry_type(name: str) -> None:
    """Register an importer's ``<agent>/entry`` type (a JSON object, kept whole)."""
    register_event_type(name, EntryData)


register_event_type(VERBATIM_TYPE, VerbatimData)
for _entry in (CODEX_ENTRY, OPENCODE_MESSAGE, OPENCODE_SESSION):
    register_entry_type(_entry)
