"""The event types of the SDK session backends, registered from here (docs/format.md, "SDK
sessions"): ``claude/entry`` (the Claude Agent SDK store, and the Claude Code importer),
``agents/item`` and ``agents/retract`` (the OpenAI Agents SDK session). No SDK import: the
types load without the extras, so a process that only reads a store knows them too
(`todo_sessions.load_vocabularies`).
"""

from __future__ import annotations

from typing import Literal

from ..core.messages import WireModel
from ..core.registry import register_event_type

__all__ = [
    "AGENTS_ITEM",
    "AGENTS_RETRACT",
    "CLAUDE_ENTRY",
    "AgentsItemData",
    "AgentsRetractData",
    "ClaudeEntryData",
]

CLAUDE_ENTRY = "claude/entry"
"""The event that keeps one Claude Code transcript line whole."""
AGENTS_ITEM = "agents/item"
"""The event that keeps one OpenAI Agents SDK input item whole."""
AGENTS_RETRACT = "agents/retract"
"""The event by which ``pop_item`` and ``clear_session`` take items back."""


class ClaudeEntryData(WireModel):
    """``claude/entry``: one Claude Code transcript line, kept whole (``type`` is required)."""

    type: str


class AgentsItemData(WireModel):
    """``agents/item``: one OpenAI Agents SDK input item, kept whole."""


class AgentsRetractData(WireModel):
    """``agents/retract``: ``pop_item`` / ``clear_session``: the ``agents/item`` events (by
    seq) that no projection shows any more. A surface type: it replaces the retracted items'
    surface events, so `derive_messages` stops showing them; the log keeps them."""

    items: list[int]
    """Seqs of ``agents/item`` events (a seq that names none retracts nothing)."""
    reason: Literal["pop", "clear"]


register_event_type(CLAUDE_ENTRY, ClaudeEntryData)
register_event_type(AGENTS_ITEM, AgentsItemData)
register_event_type(AGENTS_RETRACT, AgentsRetractData, surface=True)
