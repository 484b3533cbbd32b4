"""Terminal rendering of logs: the timeline of ``show``, the todo checklist, message history.

Pure functions from events to rich renderables (no I/O); the CLI prints them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.rule import Rule
from rich.text import Text

from ..core.envelope import SessionEvent
from ..core.messages import Message
from ..core.todos import TodoItem, render_todos, todos_from_payload
from ..core.types import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    SESSION_END_SEED,
    TODO_WRITE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)

__all__ = ["Timeline", "render_messages", "render_timeline", "render_todo_list", "safe", "short"]

_STATUS_STYLE = {"completed": "green", "in_progress": "yellow", "pending": "white"}


_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]}


def safe(text: str) -> str:
    """Stored text made harmless for a terminal: control characters (escape sequences that
    could recolour, retitle or hide output) are shown as ``\\xNN``."""
    return text.translate(_CONTROL)


def short(text: str, limit: int = 100) -> str:
    """One line, at most ``limit`` characters, with control characters made visible."""
    flat = safe(" ".join(text.split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def render_todo_list(todos: Sequence[TodoItem] | None) -> Text:
    """The ``[todos]`` checklist with colours (``[x]`` done, ``[~]`` in progress, ``[ ]``)."""
    if todos is None:
        return Text("(no todo list)", style="dim")
    out = Text("[todos]", style="bold")
    for item in todos:
        line = render_todos([item]).split("\n", 1)[1]  # the one item's line, as core renders it
        out.append("\n" + safe(line.replace("\n", " ")), style=_STATUS_STYLE.get(item.status, ""))
    return out


def _texts(content: Iterable[Any]) -> list[tuple[str, str]]:
    """(kind, text) of the readable blocks of a message's content."""
    parts = []
    for block in content:
        kind = block.get("type")
        if kind in ("text", "reasoning") and block.get("text"):
            parts.append((kind, block["text"]))
        elif kind == "tool-result":
            inner = " ".join(b.get("text", "") for b in block.get("content", []) if b.get("text"))
            parts.append(("tool-result", inner))
        elif kind == "image":
            parts.append(("image", f"[image {block.get('mediaType', '')}]"))
    return parts


def _event_line(event: SessionEvent) -> RenderableType | None:
    data = event.data
    kind = event.type
    seq = Text(f"{event.seq:>5} ", style="dim")
    if kind == USER_MESSAGE:
        body = " ".join(t for _, t in _texts(data.get("content", [])))
        replaced = " (replaces earlier history)" if event.surface_op not in (None, "append") else ""
        return seq + Text("user ", style="bold cyan") + Text(short(body) + replaced)
    if kind == ASSISTANT_MESSAGE:
        out = seq + Text("assistant ", style="bold magenta")
        parts = _texts(data["message"].get("content", []))
        thought = [t for k, t in parts if k == "reasoning"]
        said = [t for k, t in parts if k == "text"]
        if thought:
            out.append(f"(thinks: {short(' '.join(thought), 60)}) ", style="italic dim")
        out.append(short(" ".join(said)) if said else "")
        return out
    if kind == TOOL_CALL:
        args = data.get("arguments", "")
        line = (
            seq
            + Text("  → ", style="blue")
            + Text(safe(str(data.get("name"))), style="bold")
            + Text(f" {short(args, 80)}", style="dim")
        )
        child = data.get("subagentSessionId")
        if isinstance(child, str):
            line.append(f"\n        ⤷ subagent session {safe(child)}", style="magenta")
        return line
    if kind == TOOL_RESULT:
        block = data["message"]["content"][0]
        failed = block.get("isError") or "error" in data
        body = " ".join(t for _, t in _texts([block]))
        style = "red" if failed else "green"
        code = f" [{data['error']['code']}]" if "error" in data else ""
        return seq + Text("  ← ", style=style) + Text(short(body) + code, style=style)
    if kind == TODO_WRITE:
        todos = todos_from_payload(data, seq=event.seq)
        return Group(
            seq + Text(TODO_WRITE, style="bold yellow"),
            Padding(render_todo_list(todos), (0, 0, 0, 8), expand=False),
        )
    if kind == TURN_END:
        reason = data.get("reason", {}).get("kind", "?")
        style = "green" if reason == "completed" else "red"
        return seq + Text(f"turn {data.get('turn')} ended: {reason}", style=style)
    if kind == SESSION_END_SEED:
        return seq + Text("── end of inherited history (fork seed) ──", style="dim")
    return None


class Timeline:
    """Renders a log one event at a time (so ``show`` streams any session in flat memory).

    `feed` returns the rows for one event; `close` the closing note. Step boundaries, chunks
    and request records are shown only with ``verbose``.
    """

    def __init__(self, *, verbose: bool = False) -> None:
        self.verbose = verbose
        self.chunks = 0
        self._compactions: dict[str, dict[str, Any]] = {}
        """Open compactions by id: what their start and summary said (for the end's mark)."""

    def feed(self, event: SessionEvent) -> list[RenderableType]:
        if event.type.startswith("compaction/"):
            return self._compaction(event)
        if event.type == TURN_START:
            return [Rule(f"turn {event.data.get('turn')}", align="left", style="cyan")]
        if event.type == ASSISTANT_CHUNK:
            self.chunks += 1
            if not self.verbose:
                return []
        line = _event_line(event)
        if line is None and self.verbose:
            line = Text(f"{event.seq:>5} {event.type} {short(event.data_json, 80)}", style="dim")
        return [] if line is None else [line]

    def _compaction(self, event: SessionEvent) -> list[RenderableType]:
        """The timeline mark of a compaction (docs/format.md, "Compaction"): one line at its
        end with the replaced range, the trigger and the tokens before and after; one line per
        pruned result."""
        data = event.data
        seq = Text(f"{event.seq:>5} ", style="dim")
        if event.type == COMPACTION_PRUNE:
            shadowed = data.get("shadowedRange", {})
            return [
                seq
                + Text(
                    f"  pruned tool result {shadowed.get('start')} "
                    f"(~{data.get('shadowedTokenCount')} tokens)",
                    style="yellow",
                )
            ]
        cid = str(data.get("compactionId"))
        if event.type == COMPACTION_START:
            self._compactions[cid] = {"trigger": data.get("trigger") or "?", **data}
            return []
        if event.type == COMPACTION_SUMMARY:
            self._compactions.setdefault(cid, {"trigger": "?"}).update(data)
            return []
        if event.type != COMPACTION_END:
            return []
        seen = self._compactions.pop(cid, {"trigger": "?"})
        trigger = seen["trigger"]
        if data.get("error"):
            text = f"compaction ({trigger}) failed: {short(str(data['error']), 80)}"
            return [seq + Text(text, style="red")]
        shadowed = seen.get("shadowedRange") or {}
        count = len(seen.get("shadowedSeqs") or ())
        tokens = ""
        if seen.get("tokensBefore") is not None or data.get("tokensAfter") is not None:
            tokens = f", tokens {seen.get('tokensBefore', '?')} → {data.get('tokensAfter', '?')}"
        text = (
            f"── compaction ({trigger}): seqs {shadowed.get('start', '?')}.."
            f"{shadowed.get('end', '?')} replaced ({count} messages){tokens} ──"
        )
        return [seq + Text(text, style="bold yellow")]

    def close(self) -> list[RenderableType]:
        if self.chunks and not self.verbose:
            note = f"({self.chunks} streamed chunks hidden; --verbose shows them)"
            return [Text(note, style="dim")]
        return []


def render_timeline(events: Iterable[SessionEvent], *, verbose: bool = False) -> Group:
    """Turns with their user/assistant messages, tool calls and results, and todo changes."""
    timeline = Timeline(verbose=verbose)
    rows = [row for event in events for row in timeline.feed(event)]
    return Group(*rows, *timeline.close())


def render_messages(messages: Sequence[Message]) -> Group:
    """The derived message history, one entry per message (``(no messages)`` when empty)."""
    if not messages:
        return Group(Text("(no messages)", style="dim"))
    rows: list[RenderableType] = []
    for number, message in enumerate(messages, start=1):
        wire = message.model_dump(mode="json", by_alias=True, exclude_none=True)
        role = message.role
        source = wire.get("source", {}).get("kind", "")
        label = "tool" if source == "tool" else role
        head = Text(
            f"{number:>3} {label:<10}", style="bold cyan" if role == "user" else "bold magenta"
        )
        parts = []
        for block in wire["content"]:
            if block["type"] == "tool-call":
                parts.append(f"[call {block['name']} {short(block['arguments'], 60)}]")
            elif block["type"] == "tool-result":
                parts.append("[result] " + " ".join(t for _, t in _texts([block])))
            elif block["type"] in ("text", "reasoning"):
                parts.append(
                    block["text"] if block["type"] == "text" else f"(thinks) {block['text']}"
                )
            else:
                parts.append(json.dumps(block)[:60])
        rows.append(head + Text(short(" ".join(parts), 140)))
    return Group(*rows)
