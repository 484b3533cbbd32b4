"""The event types of the importers, registered from here (docs/format.md, "Imported
sessions"): ``import/verbatim`` and each built-in importer's ``<agent>/entry`` (``codex/entry``;
the Claude Code importer writes ``claude/entry``, a type of `todo_sessions.integrations`).
Loaded by `todo_sessions.load_vocabularies`, so a process that only reads a store knows them
too. An importer of another agent registers its entry type with `register_entry_type`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..core.registry import register_event_type

__all__ = ["CODEX_ENTRY", "VERBATIM_TYPE", "EntryData", "VerbatimData", "register_entry_type"]

VERBATIM_TYPE = "import/verbatim"
CODEX_ENTRY = "codex/entry"


class VerbatimData(BaseModel):
    """``import/verbatim``: the exact text of the source line the entry before it holds, or
    (``alone``) of a line whose JSON no event can hold, kept as text only."""

    model_config = ConfigDict(extra="forbid", strict=True)
    line: str
    alone: bool = False


class EntryData(BaseModel):
    """``<agent>/entry``: one source line, kept whole (any JSON object)."""

    model_config = ConfigDict(extra="allow")


def register_entry_type(name: str) -> None:
    """Register an importer's ``<agent>/entry`` type (a JSON object, kept whole)."""
    register_event_type(name, EntryData)


register_event_type(VERBATIM_TYPE, VerbatimData)
register_entry_type(CODEX_ENTRY)
