"""Codex rollout files: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`` (or under
``$CODEX_HOME``), one session each; a sub-agent's rollout (``session_meta.source`` naming the
parent thread) is a child session.

Every line is ``{"timestamp", "type", "payload"}`` with ``type`` one of ``session_meta``,
``turn_context``, ``response_item``, ``event_msg``, ``compacted``. Each is kept whole in a
``codex/entry`` event; the mapping (docs/format.md, "Imported sessions"):

- ``event_msg`` ``user_message``: a new turn and its ``user/message`` (the ``response_item``
  user and developer messages are the context Codex injects, kept in the entries only);
  ``task_complete`` ends the turn (completed), ``turn_aborted`` ends it (interrupted).
- ``response_item`` ``message`` (assistant), ``reasoning``: an ``assistant/message`` step;
  ``function_call`` / ``custom_tool_call`` / ``local_shell_call``: a step with the call and a
  ``tool/call`` with Codex's own name and arguments; ``update_plan`` also a ``todo/write``;
  ``function_call_output`` / ``custom_tool_call_output``: ``tool/result``.
- ``compacted``: a compaction summary replacing the surface it summarises.
- ``session_meta``, ``turn_context``, ``token_count``, ``thread_name_updated``: the header's
  cwd, the model of later steps, the ``codex`` metadata (ids, versions, cwd, model, token
  usage) and the title.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.envelope import SessionEvent
from ..core.header import SessionHeader
from ..core.todos import todo_list_problem
from ..core.types import (
    ASSISTANT_MESSAGE,
    SESSION_META,
    STEP_START,
    TODO_WRITE,
    TOOL_CALL,
    TURN_END,
    USER_MESSAGE,
)
from ..integrations._common import Batch, LogState, iso_ms, now_ms
from ._vocabulary import CODEX_ENTRY
from .base import SourceFile, compact_json

__all__ = ["ENTRY_TYPE", "CodexImporter", "session_id_for"]

ENTRY_TYPE = CODEX_ENTRY
METADATA_KEY = "codex"
AGENT_TAG = "agent:codex"
KINDS = frozenset(
    {
        "session_meta",
        "turn_context",
        "response_item",
        "event_msg",
        "compacted",
        "world_state",
        "token_usage_record",
    }
)
ITEM_KINDS = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
        "image_generation_call",
        "tool_search_call",
        "tool_search_output",
        "compaction",
        "compaction_summary",
        "other",
    }
)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def session_id_for(thread_id: str) -> str:
    """The store id of a Codex thread (session) id."""
    return f"codex-{thread_id}"


def _codex_home() -> Path:
    configured = os.environ.get("CODEX_HOME")
    return Path(configured) if configured else Path.home() / ".codex"


class _CodexState(LogState):
    """The fold the mapping needs beyond `LogState`: the model, cwd, usage, title."""

    def __init__(self) -> None:
        super().__init__()
        self.codex: dict[str, Any] = {}
        self.title: str | None = None
        self.thread_name: str | None = None
        self.entries = 0
        self.prompt: str | None = None
        """The text of the prompt that opened the open turn, until its first step (a
        version writing a prompt twice, as two kinds of line, opens one turn)."""

    def advance(self, event: SessionEvent) -> None:
        super().advance(event)
        if event.type == ENTRY_TYPE:
            self.entries += 1
            self._fold(event.payload)
        elif event.type == SESSION_META and "title" in event.payload:
            self.title = event.payload["title"]
        elif event.type == USER_MESSAGE and event.payload.get("source", {}).get("kind") == "user":
            self.prompt = "\n".join(b.get("text", "") for b in event.payload.get("content", []))
        elif event.type in (STEP_START, TURN_END):
            self.prompt = None

    def _fold(self, entry: Mapping[str, Any]) -> None:
        payload = entry.get("payload")
        if not isinstance(payload, dict):
            return
        kind, codex = entry.get("type"), self.codex
        if kind == "session_meta":
            for name in ("id", "cli_version", "originator", "model_provider", "cwd"):
                if isinstance(payload.get(name), str):
                    codex.setdefault(name, payload[name])
        elif kind == "turn_context":
            codex.update(
                (n, payload[n]) for n in ("model", "cwd") if isinstance(payload.get(n), str)
            )
        elif kind == "token_usage_record" and isinstance(payload.get("thread_token_usage"), dict):
            codex["token_usage"] = payload["thread_token_usage"]
        elif kind == "event_msg":
            self._fold_event(payload)

    def _fold_event(self, payload: Mapping[str, Any]) -> None:
        info, name = payload.get("info"), payload.get("thread_name")
        if payload.get("type") == "token_count" and isinstance(info, dict):
            if isinstance(info.get("total_token_usage"), dict):
                self.codex["token_usage"] = info["total_token_usage"]
        elif payload.get("type") == "thread_name_updated" and isinstance(name, str):
            name = name.replace("\x00", "")
            self.thread_name = name.strip() or self.thread_name


def _head(path: Path) -> dict[str, Any] | None:
    """The payload of the file's first line when it is a ``session_meta`` line."""
    try:
        with path.open("rb") as handle:
            first = json.loads(handle.readline().decode("utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(first, dict) and first.get("type") == "session_meta":
        payload = first.get("payload")
        return payload if isinstance(payload, dict) else None
    return None


def _parent_thread(meta: Mapping[str, Any]) -> str | None:
    source = meta.get("source")
    sub = source.get("subagent") if isinstance(source, dict) else None
    spawn = sub.get("thread_spawn") if isinstance(sub, dict) else None
    parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
    return parent if isinstance(parent, str) and parent else None


def _source_of(path: Path) -> SourceFile:
    meta = _head(path) or {}
    thread = meta.get("id") if isinstance(meta.get("id"), str) else None
    key: dict[str, Any] = {"thread_id": thread, "from_head": True}
    if thread is None:
        found = _UUID.findall(path.stem)
        thread = found[-1] if found else path.stem
        key = {"thread_id": thread}
    parent = _parent_thread(meta)
    return SourceFile(path, session_id_for(thread), parent and session_id_for(parent), key)


def _texts(items: Any, *kinds: str) -> list[str]:
    return [
        item["text"]
        for item in (items if isinstance(items, list) else [])
        if isinstance(item, dict)
        and item.get("type") in kinds
        and isinstance(item.get("text"), str)
    ]


def _output_text(output: Any) -> tuple[str, bool]:
    """A tool output's text and whether it failed: a string, content items, or (older
    versions) ``{content, success}``."""
    if isinstance(output, str):
        return output, False
    if isinstance(output, list):
        return "\n".join(_texts(output, "input_text", "output_text")), False
    if isinstance(output, dict):
        content = output.get("content")
        return (content if isinstance(content, str) else compact_json(output)), output.get(
            "success"
        ) is False
    return compact_json(output), False


def _prompt_text(kind: Any, payload: Mapping[str, Any]) -> str | None:
    """The user's prompt an ``event_msg`` carries: ``user_message`` (older versions) or
    ``item_completed`` of a ``UserMessage`` item (newer ones); None for any other."""
    if kind == "user_message":
        message = payload.get("message")
        return message if isinstance(message, str) else None
    item = payload.get("item") if kind == "item_completed" else None
    if isinstance(item, dict) and item.get("type") == "UserMessage":
        return "\n".join(_texts(item.get("content"), "text")) or None
    return None


def _plan_todos(arguments: str) -> list[dict[str, str]] | None:
    """``update_plan``'s ``plan`` as a ``todo/write`` list (None when it is not one)."""
    try:
        args = json.loads(arguments)
    except ValueError:
        return None
    plan = args.get("plan") if isinstance(args, dict) else None
    if not isinstance(plan, list):
        return None
    items = [
        {"content": p["step"].strip(), "status": p.get("status")}
        for p in plan
        if isinstance(p, dict) and isinstance(p.get("step"), str)
    ]
    return None if len(items) != len(plan) or todo_list_problem(items) else items


class _Mapper:
    """The typed events of one line (after its ``codex/entry``)."""

    def __init__(self, batch: Batch, state: _CodexState, entry: dict[str, Any]) -> None:
        self.batch, self.state = batch, state
        self.id = f"codex-{state.entries}"  # the line's place among the kept lines
        payload = entry.get("payload")
        self.payload: dict[str, Any] = payload if isinstance(payload, dict) else {}
        self.kind = entry.get("type")

    def run(self) -> None:
        item_kind = self.payload.get("type")
        if self.kind == "event_msg":
            self._event(item_kind)
        elif self.kind == "response_item":
            self._item(item_kind)
        elif self.kind == "compacted" and isinstance(self.payload.get("message"), str):
            self._compacted(self.payload["message"])

    def _event(self, kind: Any) -> None:
        batch, p = self.batch, self.payload
        prompt = _prompt_text(kind, p)
        if prompt is not None and prompt != self.state.prompt:
            batch.new_turn()
            content = [{"type": "text", "text": prompt}]
            message = {"id": self.id, "role": "user", "content": content}
            batch.add(USER_MESSAGE, {**message, "source": {"kind": "user"}}, surface=True)
        elif kind in ("task_complete", "turn_complete", "turn_aborted"):
            batch.close_step()
            if self.state.open_turn is not None:
                reason = "interrupted" if kind == "turn_aborted" else "completed"
                end = {"turn": self.state.open_turn, "reason": {"kind": reason}}
                batch.add(TURN_END, end)

    def _item(self, kind: Any) -> None:
        p = self.payload
        if kind == "message" and p.get("role") == "assistant":
            texts = _texts(p.get("content"), "output_text")
            self._step([{"type": "text", "text": t} for t in texts])
        elif kind == "reasoning":
            texts = _texts(p.get("summary"), "summary_text")
            texts += _texts(p.get("content"), "reasoning_text", "text")
            self._step([{"type": "reasoning", "text": "\n\n".join(texts)}] if texts else [])
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            self._call(kind)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = p.get("call_id")
            if isinstance(call_id, str) and call_id:
                text, failed = _output_text(p.get("output"))
                blocks = [{"type": "text", "text": text}]
                self.batch.tool_result(call_id, blocks, failed, f"{self.id}:{call_id}")

    def _call(self, kind: str) -> None:
        p = self.payload
        call_id = p.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            return
        if kind == "function_call":
            name, arguments = p.get("name"), p.get("arguments")
        elif kind == "custom_tool_call":
            name, arguments = p.get("name"), p.get("input")
        else:
            name, arguments = "local_shell", compact_json(p.get("action"))
        if not isinstance(name, str) or not name or not isinstance(arguments, str):
            return
        block = {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}
        turn, step = self._step([block], close=False)
        call = {"turn": turn, "step": step, "callId": call_id, "name": name}
        self.batch.add(TOOL_CALL, {**call, "arguments": arguments})
        todos = _plan_todos(arguments) if name == "update_plan" else None
        if todos is not None:
            self.batch.add(TODO_WRITE, {"todos": todos})
        self.batch.close_step()

    def _step(self, blocks: list[dict[str, Any]], *, close: bool = True) -> tuple[int, int]:
        if not blocks:
            return 0, 0
        turn, step = self.batch.open_step()
        model = self.state.codex.get("model", "unknown")
        source = {"kind": "model", "provider": "openai", "model": model}
        message = {"id": self.id, "role": "assistant", "content": blocks, "source": source}
        self.batch.add(
            ASSISTANT_MESSAGE, {"turn": turn, "step": step, "message": message}, surface=True
        )
        if close:
            self.batch.close_step()
        return turn, step

    def _compacted(self, text: str) -> None:
        self.batch.ensure_turn()
        content = [{"type": "text", "text": text}]
        source = {"kind": "compaction"}
        summary = {"id": self.id, "role": "user", "content": content, "source": source}
        span = list(self.state.surface)
        if span:
            self.batch.add(USER_MESSAGE, summary, replace=(span[0], span[-1], span))
        else:
            self.batch.add(USER_MESSAGE, summary, surface=True)


class CodexImporter:
    """The Codex importer (`todo_sessions.importers.base.Importer`)."""

    name = "codex"
    entry_type = ENTRY_TYPE

    def __init__(self) -> None:
        self._known: dict[Path, SourceFile] = {}
        """Files whose ``session_meta`` line was read: `discover` again (``--follow`` does,
        every pass) reads only the first line of new files."""

    def default_paths(self) -> list[Path]:
        return [_codex_home() / "sessions"]

    def _source(self, path: Path) -> SourceFile:
        found = self._known.get(path)
        if found is None:
            found = _source_of(path)
            if found.key.get("from_head"):
                self._known[path] = found
        return found

    def discover(self, paths: Sequence[Path]) -> list[SourceFile]:
        files: list[Path] = []
        for root in paths:
            if root.is_dir():
                files.extend(sorted(root.rglob("rollout-*.jsonl")))
            elif root.is_file():
                files.append(root)
        sources = [self._source(p.absolute()) for p in dict.fromkeys(files)]
        ids = {s.session_id for s in sources}
        # parents first: a file whose parent is among these waits for it
        return sorted(sources, key=lambda s: s.parent is not None and s.parent in ids)

    def new_state(self) -> LogState:
        return _CodexState()

    def line_problem(self, entry: Any) -> str | None:
        if not isinstance(entry, dict):
            return f"not a Codex rollout line (a JSON {type(entry).__name__}, not an object)"
        if not isinstance(entry.get("type"), str) or "payload" not in entry:
            return "not a Codex rollout line (no type and payload)"
        return None

    def kind_known(self, entry: Mapping[str, Any]) -> tuple[str, bool]:
        kind = str(entry.get("type"))
        payload = entry.get("payload")
        if kind == "response_item" and isinstance(payload, dict):
            item = str(payload.get("type"))
            return f"response_item/{item}", item in ITEM_KINDS
        return kind, kind in KINDS

    def header(self, source: SourceFile, entries: Sequence[Mapping[str, Any]]) -> SessionHeader:
        meta: Any = next((e["payload"] for e in entries if e.get("type") == "session_meta"), {})
        cwd = meta.get("cwd") if isinstance(meta, dict) else None
        created = next((iso_ms(e.get("timestamp"), -1) for e in entries), -1)
        return SessionHeader(
            id=source.session_id,
            created_at=created if created >= 0 else now_ms(),
            cwd=cwd if isinstance(cwd, str) and os.path.isabs(cwd) else None,
            parent_session=source.parent,
            origin="codex",
            delegation_depth=0 if source.parent is None else 1,
        )

    def map_entry(self, batch: Batch, state: LogState, entry: dict[str, Any]) -> None:
        assert isinstance(state, _CodexState)
        _Mapper(batch, state, entry).run()

    def meta(
        self, state: LogState, source: SourceFile, fresh: Sequence[dict[str, Any]]
    ) -> dict[str, Any]:
        assert isinstance(state, _CodexState)
        out: dict[str, Any] = {"metadata": {METADATA_KEY: dict(state.codex)}}
        tags = [AGENT_TAG] + (["codex-subagent"] if source.parent else [])
        if any(t not in state.tags for t in tags):
            out["tags"] = [*state.tags, *(t for t in tags if t not in state.tags)]
        if state.thread_name is not None and state.thread_name != state.title:
            out["title"] = state.thread_name
        return out
