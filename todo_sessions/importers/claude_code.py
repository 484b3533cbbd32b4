"""Claude Code transcripts: ``~/.claude/projects/<project>/<session>.jsonl``, and each
sub-agent's transcript ``<project>/<session>/subagents/**/agent-<id>.jsonl`` as a child session.

The mapping is the Claude Agent SDK mirror's (`todo_sessions.integrations.claude_agent_sdk`:
``claude/entry`` kept whole, prompts, assistant content, tool calls and results, compaction
summaries, ``TodoWrite`` and the task tools as ``todo/write``), and so are the session ids and
the ``claude`` metadata: a file imported here and the same session mirrored by the SDK are the
same store session, and the SDK's store functions read imported sessions (it needs the
``[claude]`` extra). docs/format.md, "Imported sessions".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.envelope import SessionEvent
from ..core.header import SessionHeader
from ..core.types import SESSION_META
from ..integrations._claude_mapping import ENTRY_TYPE, ClaudeState, map_entry
from ..integrations._common import Batch, LogState, iso_ms, now_ms
from ..integrations.claude_agent_sdk import (
    METADATA_KEY,
    fold_session_summary,
    project_tag,
    session_id_for,
)
from .base import SourceFile

__all__ = ["ClaudeCodeImporter"]

AGENT_TAG = "agent:claude-code"
KNOWN_KINDS = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "custom-title",
        "ai-title",
        "tag",
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "last-prompt",
        "content-replacement",
        "attachment",
        "agent-name",
        "atis-latch",
        "api-request",
        "api-request-shape",
        "api-request-blob",
        "api-request-resumed",
        "api-request-route",  # written by 2.1.332 now and then (seen in a test's transcript)
        "tools-used",
        "cost-state",
        # the rest of the kinds in the bundled CLI's (2.1.332) own table of transcript lines
        "file-history-delta",
        "continued-in",
        "resume-head-vouch",
        "data-flow-records",
        "data-flow-incomplete",
        "derived-from",
        "fork-context-ref",
        "frame-link",
        "ended-by-model",
        "relocated",
        "agent-color",
        "agent-setting",
        "pr-link",
        "artifact-comment-monitor",
        "artifact-autoreact-ledger",
        "bridge-session",
        "history-suppression",
        "attribution-snapshot",
        "mode",
        "permission-mode",
        "isolation-latch",
        "session-owner",
        "dev-mods",
        "memory-mode",
        "worktree-state",
        "observer-ref",
    }
)
"""Line kinds Claude Code writes (those of the CLI the ``[claude]`` extra bundles among them,
from its own table of transcript line kinds); others are imported whole and reported once."""
_TITLES = ("customTitle", "aiTitle", "summary")


class _ImportState(ClaudeState):
    """The mirror's fold, and the title fields Claude Code writes (the last of each wins)."""

    def __init__(self) -> None:
        super().__init__()
        self.titles: dict[str, str] = {}
        self.title: str | None = None

    def advance(self, event: SessionEvent) -> None:
        super().advance(event)
        if event.type == ENTRY_TYPE:
            for name in _TITLES:
                value = event.payload.get(name)
                if isinstance(value, str) and value.strip() and "\x00" not in value:
                    self.titles[name] = value.strip()
        elif event.type == SESSION_META and "title" in event.payload:
            self.title = event.payload["title"]

    def best_title(self) -> str | None:
        return next((self.titles[n] for n in _TITLES if n in self.titles), None)


def _claude_home() -> Path:
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured) if configured else Path.home() / ".claude"


def _source_of(path: Path) -> SourceFile:
    parts = path.parts
    if "subagents" in parts[:-1]:
        at = len(parts) - 1 - parts[::-1].index("subagents")
        if at >= 2:
            project, session = parts[at - 2], parts[at - 1]
            subpath = "/".join(parts[at:])[: -len(".jsonl")]
            key = {"project_key": project, "session_id": session, "subpath": subpath}
            main = session_id_for({"project_key": project, "session_id": session})
            return SourceFile(path, session_id_for(key), main, key)
    key = {"project_key": path.parent.name, "session_id": path.stem}
    return SourceFile(path, session_id_for(key), None, key)


class ClaudeCodeImporter:
    """The Claude Code importer (`todo_sessions.importers.base.Importer`)."""

    name = "claude-code"
    entry_type = ENTRY_TYPE

    def default_paths(self) -> list[Path]:
        return [_claude_home() / "projects"]

    def discover(self, paths: Sequence[Path]) -> list[SourceFile]:
        files: list[Path] = []
        for root in paths:
            if root.is_dir():
                files.extend(sorted(root.rglob("*.jsonl")))
            elif root.is_file():
                files.append(root)
        sources = [_source_of(p.absolute()) for p in dict.fromkeys(files)]
        return sorted(sources, key=lambda s: s.parent is not None)  # main transcripts first

    def new_state(self) -> LogState:
        return _ImportState()

    def line_problem(self, entry: Any) -> str | None:
        if not isinstance(entry, dict):
            return f"not a Claude Code line (a JSON {type(entry).__name__}, not an object)"
        if not isinstance(entry.get("type"), str):
            return "not a Claude Code line (no string type)"
        return None

    def kind_known(self, entry: Mapping[str, Any]) -> tuple[str, bool]:
        kind = str(entry.get("type"))
        return kind, kind in KNOWN_KINDS

    def header(self, source: SourceFile, entries: Sequence[Mapping[str, Any]]) -> SessionHeader:
        cwd = next((e["cwd"] for e in entries if isinstance(e.get("cwd"), str)), None)
        created = next((iso_ms(e.get("timestamp"), -1) for e in entries if "timestamp" in e), -1)
        return SessionHeader(
            id=source.session_id,
            created_at=created if created >= 0 else now_ms(),
            cwd=cwd if cwd and os.path.isabs(cwd) else None,
            parent_session=source.parent,
            origin="claude-code",
            delegation_depth=0 if source.parent is None else 1,
        )

    def map_entry(self, batch: Batch, state: LogState, entry: dict[str, Any]) -> None:
        assert isinstance(state, _ImportState)
        map_entry(batch, state, entry)

    def meta(
        self, state: LogState, source: SourceFile, fresh: Sequence[dict[str, Any]]
    ) -> dict[str, Any]:
        assert isinstance(state, _ImportState)
        own: dict[str, Any] = dict(state.metadata.get(METADATA_KEY) or {})
        own.update(project_key=source.key["project_key"], session_id=source.key["session_id"])
        if "subpath" in source.key:
            own["subpath"] = source.key["subpath"]
            tags = [AGENT_TAG, "claude-subagent"]
        else:
            prev = own.get("summary")
            previous = None if prev is None else {"session_id": own["session_id"], "mtime": 0}
            if previous is not None:
                previous["data"] = prev
            folded = fold_session_summary(previous, dict(source.key), list(fresh))  # type: ignore[arg-type]
            own["summary"] = folded["data"]
            tags = [AGENT_TAG, project_tag(source.key["project_key"])]
        out: dict[str, Any] = {"metadata": {METADATA_KEY: own}}
        if any(t not in state.tags for t in tags):
            out["tags"] = [*state.tags, *(t for t in tags if t not in state.tags)]
        title = state.best_title()
        if title is not None and title != state.title:
            out["title"] = title
        return out
