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

README.md, "Importing other agents' sessions"; docs/format.md, "Imported sessions".
"""

from __future__ import annotations

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
    import_paths,
    register_entry_type,
)
from .codex import CodexImporter
from .opencode import OpencodeImporter

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
    "export_lines",
    "export_session",
    "get_importer",
    "import_file",
    "import_paths",
    "register_entry_type",
]

AGENTS = ("claude-code", "codex", "opencode")


def get_importer(agent: str) -> Importer:
    """The importer of ``agent`` (one of `AGENTS`); ``ValueError`` for another name."""
    if agent == "codex":
        return CodexImporter()
    if agent == "opencode":
        return OpencodeImporter()
    if agent == "claude-code":
        from .claude_code import ClaudeCodeImporter  # needs the [claude] extra

        return ClaudeCodeImporter()
    raise ValueError(f"unknown agent {agent!r}: expected one of {', '.join(AGENTS)}")


async def export_session(store: SessionStore, importer: Importer, session_id: str) -> bytes:
    """The session's kept source lines in the agent's format: for a session imported from a
    file, the file's complete lines byte for byte (lines skipped as malformed aside); for
    opencode, the JSON of ``opencode export`` (`OpencodeImporter.export_events`)."""
    events = await store.read_from(session_id)
    own = getattr(importer, "export_events", None)
    if own is not None:
        return bytes(own(events))
    return b"".join(line.encode("utf-8") + b"\n" for line in export_lines(importer, events))
