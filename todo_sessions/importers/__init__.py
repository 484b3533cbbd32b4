"""Importers of other coding agents' session files: each agent's sessions in one store.

`import_paths(store, importer, paths)` imports what is new in an agent's files (its default
location when ``paths`` is None), incrementally and idempotently; `export_session` writes a
session's kept lines back in the agent's own format, byte for byte. One importer per agent,
behind one small protocol (`Importer`: discovery, the line format, the mapping onto a
`Batch` of events over a `LogState`, an entry type registered with `register_entry_type`), so
another agent's format can be added:

- `ClaudeCodeImporter`: Claude Code transcripts (``~/.claude/projects``); needs the
  ``[claude]`` extra, whose mapping it shares.
- `CodexImporter`: Codex rollout files (``~/.codex/sessions``).
- `OpencodeImporter`: opencode's database (``~/.local/share/opencode/opencode.db``, read
  read-only) or ``opencode export`` files; its export is the JSON of ``opencode export``.

`get_importer(agent)` looks an agent up by name (`AGENTS`; `register_importer` adds one). An
importer may bring its own ``import_sources(store, sources)`` (an agent whose sessions are
not JSONL files) and ``export_events(events) -> bytes``; the engine's are used otherwise.

README.md, "Importing other agents' sessions"; docs/format.md, "Imported sessions".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

from ..store.store import SessionStore
from .base import (
    IMPORT_KEY,
    VERBATIM_TYPE,
    Batch,
    FileResult,
    Importer,
    LogState,
    SourceFile,
    export_lines,
    import_file,
    register_entry_type,
)
from .codex import CodexImporter
from .opencode import OpencodeImporter
from .paths import import_paths

__all__ = [
    "AGENTS",
    "IMPORT_KEY",
    "VERBATIM_TYPE",
    "Batch",
    "CodexImporter",
    "FileResult",
    "Importer",
    "LogState",
    "OpencodeImporter",
    "SourceFile",
    "agents",
    "export_lines",
    "export_session",
    "get_importer",
    "import_file",
    "import_paths",
    "register_entry_type",
    "register_importer",
]

_REGISTRY: dict[str, Callable[[], Importer] | str] = {
    "claude-code": "todo_sessions.importers.claude_code:ClaudeCodeImporter",
    "codex": "todo_sessions.importers.codex:CodexImporter",
    "opencode": "todo_sessions.importers.opencode:OpencodeImporter",
}
"""Each agent's importer: a factory, or ``"module:Class"`` imported on first use (the Claude
Code importer needs the ``[claude]`` extra; an agent's module is loaded only when asked for).
A third agent is one more entry here, or one `register_importer` call."""

AGENTS: tuple[str, ...] = tuple(_REGISTRY)
"""The agents this version brings; `agents` adds those registered since."""


def agents() -> tuple[str, ...]:
    """The agents `get_importer` knows now: `AGENTS` and those `register_importer` added."""
    return tuple(_REGISTRY)


def register_importer(agent: str, factory: Callable[[], Importer]) -> None:
    """Make ``agent`` known to `get_importer` (and so to ``import --from`` and ``export
    --format`` in this process): ``factory()`` returns its `Importer`."""
    if not agent or not agent.replace("-", "").isalnum():
        raise ValueError(f"an agent's name is letters, digits and dashes, got {agent!r}")
    _REGISTRY[agent] = factory


def get_importer(agent: str) -> Importer:
    """The importer of ``agent`` (one of `AGENTS`); ``ValueError`` for another name, or for an
    agent whose importer cannot be loaded here (saying why: a missing extra, ...)."""
    found = _REGISTRY.get(agent)
    if found is None:
        raise ValueError(f"unknown agent {agent!r}: expected one of {', '.join(agents())}")
    if not isinstance(found, str):
        return found()
    module, _, name = found.partition(":")
    try:
        factory = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            raise ValueError(f"the {agent} importer is not part of this version") from None
        hint = _EXTRAS.get(agent, f"install {exc.name}")
        raise ValueError(f"the {agent} importer needs {exc.name!r}: {hint}") from None
    return cast(Importer, factory())


_EXTRAS = {"claude-code": "pip install 'todo-sessions[claude]'"}


async def export_session(store: SessionStore, importer: Importer, session_id: str) -> bytes:
    """The session in the agent's own format. For a line-based agent (an importer without
    ``export_events``): the session's kept source lines, for a session imported from a file the
    file's complete lines byte for byte (lines skipped as malformed aside). An importer with an
    ``export_events(events) -> bytes`` method writes its own format (opencode: the JSON of
    ``opencode export``, `OpencodeImporter.export_events`).
    `SessionNotFoundError` for an unknown session; ``ValueError`` when the session keeps no
    line of this agent (it was not imported from it)."""
    events = await store.read_from(session_id)
    custom = getattr(importer, "export_events", None)
    if custom is not None:
        return bytes(custom(events))
    lines = list(export_lines(importer, events))
    if not lines:
        raise ValueError(f"session {session_id} holds no {importer.name} line to export")
    return b"".join(line.encode("utf-8") + b"\n" for line in lines)
