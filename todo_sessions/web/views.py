"""What the pages show, as plain data read through the store's public API.

Nothing here knows HTML: `render` turns these values into escaped markup, and the JSON API
sends them as they are. Every read is bounded: a timeline page is one `stream` page, the todo
list is `latest_event` (one indexed row), and the messages are those of one window: the
surface events of the timeline page that holds ``at`` (200 events), never the whole history
up to ``at`` (a 100,000-event session costs what a short one does). A text longer than
`MESSAGE_LIMIT` bytes is shown cut, with a link to the full text.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from ..core.envelope import SessionEvent, SurfaceReplace
from ..core.messages import Message, messages_adapter
from ..core.surface import derive_messages, fold_surface
from ..core.todos import TodoItem, todos_from_payload
from ..errors import InvalidEventError
from ..store.results import SessionSummary
from ..store.store import SessionStore, wall_clock_ms

__all__ = [
    "MESSAGES_SHOWN",
    "TIMELINE_PAGE",
    "FilterError",
    "ListFilters",
    "Row",
    "SessionPage",
    "State",
    "TodoChange",
    "event_row",
    "list_page",
    "load_state",
    "load_timeline",
    "messages_json",
    "page_start",
    "parse_filters",
    "when",
    "window_messages",
]

TIMELINE_PAGE = 200
"""Events per timeline page (the page holding the selected seq is shown)."""

MESSAGES_SHOWN = 200
"""The message pane shows the last this many messages of its window (the JSON API has them
all; a window of `TIMELINE_PAGE` events holds at most that many)."""

MESSAGE_LIMIT = 1_000_000
"""The most bytes of one text (a message block, a timeline row's text) a page or the state
API shows; a longer one is cut (at a character boundary) and links to the full text."""

T = TypeVar("T")


@asynccontextmanager
async def closing(iterator: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """``contextlib.aclosing`` for the store's iterators (typed as plain async iterators):
    leaving the block closes the generator at once, releasing what it holds."""
    try:
        yield iterator
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()


REPAIR_CODES = frozenset({"TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"})


def when(ms: int | None) -> str:
    """Epoch milliseconds as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if ms is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def page_start(seq: int) -> int:
    return seq - seq % TIMELINE_PAGE


# -- the session list ---------------------------------------------------------------------------


class FilterError(ValueError):
    """A list filter given in a bad form; the message names the parameter (a 400)."""


FILTER_TEXT_MAX = 1000
"""The longest text a string filter may hold (a tag is at most 200 characters anyway)."""

_AGO = re.compile(r"^(\d{1,12})\s*([smhdw])$")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MIN_MS = int(datetime.datetime(1, 1, 1, tzinfo=datetime.UTC).timestamp() * 1000)
_MAX_MS = int(datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.UTC).timestamp() * 1000)
_YES = {"yes": True, "true": True, "1": True, "no": False, "false": False, "0": False}


def iso(ms: int) -> str:
    """Epoch ms as ISO 8601 in UTC to the millisecond (``2026-12-01T09:30:00.000Z``): the form
    in which a moment goes into a next-page link, read back exactly."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_moment(name: str, raw: str, now_ms: int) -> tuple[int, str]:
    """``since``/``until`` as epoch ms, and the text that means that moment from now on: the
    formats of the command line's ``list --since``: an ISO 8601 date or date and time
    (``2026-12-01``, ``2026-12-01T09:30``, with an optional offset or ``Z``) or a duration ago
    (``30m``, ``2h``, ``7d``, ``1w``). A date or time without an offset is UTC here (the pages
    show times in UTC), where the command line takes local time. A duration is resolved
    against ``now_ms`` and its text becomes the exact moment (so a next page keeps the bounds
    of the first)."""
    text = raw.strip()
    ago = _AGO.match(text)
    if ago is not None:
        ms = now_ms - int(ago.group(1)) * _UNIT_MS[ago.group(2)]
        if ms < _MIN_MS:
            raise FilterError(f"{name} reaches back before the year 1, got {raw!r}")
        return ms, iso(ms)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise FilterError(
            f"{name} must be a date or time (2026-12-01, 2026-12-01T09:30, with an optional "
            f"offset; UTC without one) or a duration ago (30m, 2h, 7d, 1w), got {raw!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    try:
        ms = int(moment.timestamp() * 1000)
    except (OverflowError, ValueError, OSError):  # an offset that leaves years 1..9999
        raise FilterError(f"{name} is out of range, got {raw!r}") from None
    if not _MIN_MS <= ms <= _MAX_MS:
        raise FilterError(f"{name} is out of range, got {raw!r}")
    return ms, text


@dataclass(frozen=True)
class ListFilters:
    """The filters of the session list, as `SessionStore.list` takes them (None: not
    filtered). ``since_text``/``until_text`` are what the form and the links show."""

    cwd: str | None = None
    tag: str | None = None
    text: str | None = None
    parent: str | None = None
    open_todos: bool | None = None
    since: int | None = None
    until: int | None = None
    since_text: str = ""
    until_text: str = ""

    def store_kwargs(self) -> dict[str, Any]:
        return {
            "cwd": self.cwd,
            "tag": self.tag,
            "text": self.text,
            "parent": self.parent,
            "has_open_todos": self.open_todos,
            "since": self.since,
            "until": self.until,
        }

    def params(self) -> dict[str, str]:
        """The query parameters that give these filters again (only the ones set)."""
        out: dict[str, str] = {}
        for name in ("cwd", "tag", "text", "parent"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.open_todos is not None:
            out["open_todos"] = "yes" if self.open_todos else "no"
        if self.since is not None:
            out["since"] = self.since_text
        if self.until is not None:
            out["until"] = self.until_text
        return out

    @property
    def active(self) -> bool:
        return bool(self.params())

    def is_date(self, which: str) -> bool:
        """Whether the form can show ``since``/``until`` in a date field (empty, or a plain
        date); a time or an offset is shown as text instead, so it is not lost."""
        value: str = getattr(self, f"{which}_text")
        return value == "" or _DATE.match(value) is not None


FILTER_NAMES = ("cwd", "tag", "text", "parent", "open_todos", "since", "until")


def parse_filters(params: Mapping[str, Sequence[str]], now_ms: int | None = None) -> ListFilters:
    """The filters in query parameters (each name to its list of values). An empty value is no
    filter (what a form sends for a field left blank). Raises `FilterError` naming the
    parameter: given twice, too long, a NUL character, a bad ``open_todos`` or moment."""
    now = wall_clock_ms() if now_ms is None else now_ms
    values: dict[str, str] = {}
    for name in FILTER_NAMES:
        given = [v for v in params.get(name, ()) if v != ""]
        if len(given) > 1:
            raise FilterError(f"{name} is given {len(given)} times; give it once")
        if not given:
            continue
        value = given[0]
        if len(value) > FILTER_TEXT_MAX:
            raise FilterError(f"{name} must be at most {FILTER_TEXT_MAX} characters")
        if "\x00" in value:
            raise FilterError(f"{name} must not contain NUL characters")
        values[name] = value
    open_todos: bool | None = None
    raw_open = values.get("open_todos", "any")
    if raw_open.lower() != "any":
        if raw_open.lower() not in _YES:
            raise FilterError(f"open_todos must be yes, no or any, got {raw_open!r}")
        open_todos = _YES[raw_open.lower()]
    moments: dict[str, tuple[int | None, str]] = {"since": (None, ""), "until": (None, "")}
    for name in moments:
        if name in values:
            moments[name] = parse_moment(name, values[name], now)
    (since, since_text), (until, until_text) = moments["since"], moments["until"]
    return ListFilters(
        cwd=values.get("cwd"),
        tag=values.get("tag"),
        text=values.get("text"),
        parent=values.get("parent"),
        open_todos=open_todos,
        since=since,
        until=until,
        since_text=since_text,
        until_text=until_text,
    )


@dataclass(frozen=True)
class ListEntry:
    summary: SessionSummary
    turns: int

    def to_json(self) -> dict[str, Any]:
        s = self.summary
        return {
            "id": s.id,
            "title": s.title,
            "cwd": s.cwd,
            "createdAt": s.created_at,
            "updatedAt": s.updated_at,
            "events": s.next_seq,
            "turns": self.turns,
            "revision": s.revision,
            "parent": s.parent,
            "tags": list(s.tags),
            "metadata": dict(s.metadata),
            "openTodos": s.open_todos,
        }


async def list_page(
    store: SessionStore,
    *,
    limit: int,
    before: str | None,
    filters: ListFilters | None = None,
) -> tuple[list[ListEntry], str | None]:
    """One page of `SessionStore.list` (newest activity first, narrowed by ``filters``) with
    turn counts, and the id to pass as ``before`` for the next page (None on the last page)."""
    after = await store.summary(before) if before is not None else None
    kwargs = (filters or ListFilters()).store_kwargs()
    summaries = await store.list(limit=limit, before=after, **kwargs)
    entries = [ListEntry(s, await store.count(s.id, type="turn/start")) for s in summaries]
    more = entries[-1].summary.id if len(entries) == limit else None
    return entries, more


# -- timeline rows ------------------------------------------------------------------------------


@dataclass
class Row:
    """One event of the timeline, ready to show."""

    seq: int
    type: str
    kind: str
    """CSS class: turn, step, user, assistant, call, result, todo, end, seed, meta, chunk,
    compaction, other."""
    label: str
    text: str = ""
    reasoning: str = ""
    detail: str = ""
    error: str = ""
    repair: bool = False
    minor: bool = False
    """Hidden unless the viewer asks for every event (chunks, step ends, request records)."""
    todos: list[dict[str, str]] = field(default_factory=list)
    full_url: str = ""
    """Set when a text of the row was cut (`cut_row`): where the full text is."""


def _texts(blocks: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if not isinstance(blocks, list):
        return out
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind in ("text", "reasoning") and isinstance(block.get("text"), str):
            out.append((str(kind), block["text"]))
        elif kind == "tool-call":
            out.append(("tool-call", f"{block.get('name')}({block.get('arguments', '')})"))
        elif kind == "tool-result":
            inner = [t for k, t in _texts(block.get("content")) if k == "text"]
            out.append(("tool-result", "\n".join(inner)))
        elif kind == "image":
            out.append(("image", f"[image {block.get('mediaType', '')}]"))
        elif isinstance(kind, str):
            out.append((kind, f"[{kind} block]"))
    return out


def _short_json(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def event_row(event: SessionEvent, calls: dict[str, str]) -> Row:
    """The timeline row of one event. ``calls`` maps tool call ids to tool names, filled as
    calls are seen, so a result can name its tool."""
    data: Any = event.data
    kind = event.type
    seq = event.seq
    if kind == "turn/start":
        return Row(seq, kind, "turn", f"turn {data.get('turn')}")
    if kind == "step/start":
        return Row(seq, kind, "step", f"step {data.get('step')}")
    if kind == "step/end":
        return Row(seq, kind, "step", f"end of step {data.get('step')}", minor=True)
    if kind == "user/message":
        parts = _texts(data.get("content"))
        note = "" if event.surface_op in (None, "append") else " (replaces earlier history)"
        return Row(seq, kind, "user", "user" + note, text="\n".join(t for _, t in parts))
    if kind == "assistant/message":
        message = data.get("message") or {}
        parts = _texts(message.get("content"))
        return Row(
            seq,
            kind,
            "assistant",
            "assistant",
            text="\n".join(t for k, t in parts if k == "text"),
            reasoning="\n".join(t for k, t in parts if k == "reasoning"),
            detail="\n".join(t for k, t in parts if k == "tool-call"),
        )
    if kind == "tool/call":
        call_id = str(data.get("callId", ""))
        name = str(data.get("name", ""))
        calls[call_id] = name
        return Row(seq, kind, "call", f"→ {name}", detail=str(data.get("arguments", "")))
    if kind == "tool/result":
        message = data.get("message") or {}
        blocks = message.get("content") or [{}]
        block = blocks[0] if isinstance(blocks[0], Mapping) else {}
        call_id = str(block.get("toolCallId", ""))
        error = data.get("error") if isinstance(data.get("error"), Mapping) else None
        code = str(error.get("code", "")) if error else ""
        failed = bool(block.get("isError")) or error is not None
        repair = code in REPAIR_CODES or ":repair:" in str(message.get("id", ""))
        name = calls.get(call_id, call_id)
        return Row(
            seq,
            kind,
            "result",
            f"← {name}" + (" failed" if failed else ""),
            text="\n".join(t for _, t in _texts([block])),
            error=code,
            repair=repair,
        )
    if kind == "todo/write":
        todos = data.get("todos") if isinstance(data.get("todos"), list) else []
        items = [
            {"content": str(t.get("content", "")), "status": str(t.get("status", ""))}
            for t in todos
            if isinstance(t, Mapping)
        ]
        return Row(seq, kind, "todo", "todo list written", todos=items)
    if kind == "turn/end":
        reason = data.get("reason") or {}
        how = str(reason.get("kind", "?"))
        error = reason.get("error") or {}
        text = str(error.get("message", "")) if isinstance(error, Mapping) else ""
        label = f"turn {data.get('turn')} ended: {how}"
        return Row(seq, kind, "end", label, text=text, repair=how == "interrupted")
    if kind == "session/end-seed":
        return Row(seq, kind, "seed", "end of inherited history (fork seed)")
    if kind == "session/meta":
        changed = ", ".join(key for key in ("title", "tags", "metadata") if key in data)
        return Row(seq, kind, "meta", f"set {changed or 'nothing'}", detail=_short_json(data))
    if kind.startswith("compaction/"):
        return _compaction_row(event)
    if kind == "assistant/chunk":
        chunk = data.get("chunk") or {}
        piece = chunk.get("text") or chunk.get("name") or ""
        return Row(seq, kind, "chunk", f"chunk {chunk.get('type', '')}", text=piece, minor=True)
    return Row(seq, kind, "other", kind, detail=_short_json(data), minor=True)


def _compaction_row(event: SessionEvent) -> Row:
    """The timeline mark of a ``compaction/*`` event (docs/format.md, "Compaction"): the
    trigger and tokens before at the start, the replaced range at the summary, the tokens
    after (or the error) at the end, the pruned result at a prune."""
    data: Any = event.data
    kind, seq = event.type, event.seq
    shadowed = data.get("shadowedRange") if isinstance(data.get("shadowedRange"), Mapping) else {}
    span = f"seqs {shadowed.get('start', '?')}..{shadowed.get('end', '?')}"
    if kind == "compaction/start":
        tokens = data.get("tokensBefore")
        text = f"{tokens} tokens before" if tokens is not None else ""
        return Row(seq, kind, "compaction", f"compaction ({data.get('trigger') or '?'})", text=text)
    if kind == "compaction/summary":
        count = len(data.get("shadowedSeqs") or ())
        summary = "\n".join(t for _, t in _texts(data.get("summary")))
        return Row(
            seq, kind, "compaction", f"compaction: {span} replaced ({count} messages)", text=summary
        )
    if kind == "compaction/end":
        if data.get("error"):
            return Row(seq, kind, "compaction", "compaction failed", text=str(data["error"]))
        tokens = data.get("tokensAfter")
        text = f"{tokens} tokens after" if tokens is not None else ""
        return Row(seq, kind, "compaction", "compaction done", text=text)
    if kind == "compaction/prune":
        return Row(seq, kind, "compaction", f"tool result {shadowed.get('start', '?')} pruned")
    return Row(seq, kind, "other", kind, detail=_short_json(data), minor=True)


def cut_text(text: str, limit: int) -> tuple[str, int | None]:
    """``text`` cut to at most ``limit`` UTF-8 bytes (at a character boundary), and its full
    size in bytes when it was cut (None: shown whole)."""
    if len(text) <= limit // 4:  # certainly short enough: no need to encode it
        return text, None
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, None
    return data[:limit].decode("utf-8", "ignore"), len(data)


def cut_row(row: Row, full_url: str, limit: int = MESSAGE_LIMIT) -> Row:
    """``row`` with each text longer than ``limit`` bytes cut; ``full_url`` is kept on the
    row when anything was."""
    for name in ("text", "reasoning", "detail"):
        shown, size = cut_text(getattr(row, name), limit)
        if size is not None:
            setattr(row, name, shown + f"\n… (cut: {size} bytes in all)")
            row.full_url = full_url
    return row


async def load_timeline(
    store: SessionStore,
    session_id: str,
    start: int,
    *,
    full_url: Any = None,
    limit: int = MESSAGE_LIMIT,
) -> list[Row]:
    """The rows of the timeline page that starts at ``start`` (one `stream` page), each text
    cut to ``limit`` bytes (``full_url(seq)``: the link to a cut text's whole)."""
    rows: list[Row] = []
    calls: dict[str, str] = {}
    async with closing(store.stream(session_id, start, page_size=TIMELINE_PAGE)) as events:
        async for event in events:
            row = event_row(event, calls)
            rows.append(cut_row(row, full_url(event.seq) if full_url else "", limit))
            if len(rows) == TIMELINE_PAGE:
                break
    return rows


async def window_messages(
    store: SessionStore, session_id: str, start: int, at: int
) -> tuple[list[int], list[Message]]:
    """The messages the surface events of seqs ``start..at`` put on the surface (one
    timeline window), with the seq of each: each event read once, one `stream` page."""
    window: list[SessionEvent] = []
    async with closing(store.stream(session_id, start, page_size=TIMELINE_PAGE)) as events:
        async for event in events:
            if event.seq > at or event.seq >= start + TIMELINE_PAGE:
                break
            if event.surface_op is not None:
                window.append(event)
    return window_surface(window, start)


def window_surface(window: Sequence[SessionEvent], start: int) -> tuple[list[int], list[Message]]:
    """The messages of a window's surface events (those from seq ``start`` on), in surface
    order, with the seq of each. A replacing event (a summary, a pruned result) takes the place
    of what it replaced when that lies in the window too, as the model saw it; one whose span
    begins before the window is shown as the message it is (what it replaced may be far back
    and is not looked up)."""
    by_seq = {event.seq: event for event in window}
    folded = [
        event
        if isinstance(event.surface_op, SurfaceReplace) and event.surface_op.start >= start
        else _alone(event)
        for event in window
    ]
    try:
        order: Sequence[int] = fold_surface(folded).seqs
    except InvalidEventError:  # a span the window cannot apply: each event as it came
        order = [event.seq for event in window]
    seqs: list[int] = []
    messages: list[Message] = []
    for seq in order:
        for message in derive_messages([_alone(by_seq[seq])]):
            seqs.append(seq)
            messages.append(message)
    return seqs, messages


def _alone(event: SessionEvent) -> SessionEvent:
    """``event`` as an append: its message on its own, whatever it replaced."""
    if event.surface_op == "append":
        return event
    return event.replace(surface_op="append", source_event_seqs=None)


def full_text(event: SessionEvent) -> str:
    """The full text of an event, for the "full text" link of a cut one: its message's texts
    (`message_text`) for a surface event, else what its timeline row shows, uncut."""
    if event.surface_op is not None:
        messages = derive_messages([_alone(event)])
        if messages:
            return message_text(messages[0])
    row = event_row(event, {})
    return "\n\n".join(part for part in (row.reasoning, row.text, row.detail) if part)


def message_text(message: Message) -> str:
    """Every text of a message, in order (what the "full text" link shows): texts,
    reasoning, tool call arguments, tool result texts."""
    out: list[str] = []
    for block in messages_json([message])[0].get("content", []):
        for key in ("text", "arguments"):
            if isinstance(block.get(key), str):
                out.append(block[key])
        for inner in block.get("content", []) if isinstance(block.get("content"), list) else []:
            if isinstance(inner, Mapping) and isinstance(inner.get("text"), str):
                out.append(inner["text"])
    return "\n\n".join(out)


def cut_messages(dumped: list[dict[str, Any]], limit: int = MESSAGE_LIMIT) -> bool:
    """Cut, in place, every text of wire-JSON messages longer than ``limit`` bytes; a cut block
    gets ``"cut": {"bytes": FULL_SIZE}``. Whether anything was cut."""
    cut = False

    def shorten(block: dict[str, Any], key: str) -> None:
        nonlocal cut
        value = block.get(key)
        if isinstance(value, str):
            shown, size = cut_text(value, limit)
            if size is not None:
                block[key] = shown
                block["cut"] = {"bytes": size}
                cut = True

    for message in dumped:
        for block in message.get("content", []):
            if not isinstance(block, dict):
                continue
            shorten(block, "text")
            shorten(block, "arguments")
            for inner in block.get("content", []) if isinstance(block.get("content"), list) else []:
                if isinstance(inner, dict):
                    shorten(inner, "text")
                    if "cut" in inner:
                        block.setdefault("cut", inner["cut"])
    return cut


# -- the state at a seq ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TodoChange:
    content: str
    status: str
    change: str
    """``added``, ``status`` (``before`` holds the old status), ``same`` or ``removed``."""
    before: str | None = None


def todo_changes(
    todos: Sequence[TodoItem] | None, previous: Sequence[TodoItem] | None
) -> list[TodoChange]:
    """The list of a todo write compared with the write before it: every current item with
    what changed, then the items that were dropped."""
    if todos is None:
        return []
    before = {item.content: item.status for item in previous or []}
    out: list[TodoChange] = []
    for item in todos:
        old = before.get(item.content)
        if old is None:
            out.append(TodoChange(item.content, item.status, "added"))
        elif old != item.status:
            out.append(TodoChange(item.content, item.status, "status", old))
        else:
            out.append(TodoChange(item.content, item.status, "same"))
    current = {item.content for item in todos}
    out.extend(
        TodoChange(item.content, item.status, "removed")
        for item in previous or []
        if item.content not in current
    )
    return out


async def open_turn(store: SessionStore, session_id: str, at: int) -> int | None:
    """The turn still open at seq ``at`` (a fork there is refused), or None between turns."""
    event = await store.latest_event(session_id, "turn/start", "turn/end", upto_seq=at)
    if event is None or event.type != "turn/start":
        return None
    turn = event.data.get("turn")
    return turn if isinstance(turn, int) else -1


def messages_json(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in their wire JSON (as ``todo-sessions messages --json`` prints them)."""
    dumped: list[dict[str, Any]] = messages_adapter.dump_python(
        list(messages), mode="json", by_alias=True, exclude_none=True
    )
    return dumped


@dataclass
class State:
    """What the agent had and what the model saw as of seq ``at``."""

    at: int
    last: int
    todos: list[TodoItem] | None
    changes: list[TodoChange]
    write_seq: int | None
    previous_write_seq: int | None
    messages: list[Message]
    """The messages of the window (`window_messages`), not the whole history."""
    open_turn: int | None = None
    """The turn open at ``at``, where a fork is refused (None: between turns, or unknown)."""
    message_seqs: list[int] = field(default_factory=list)
    """The seq of the event each message comes from."""
    window_start: int = 0
    """The first seq of the window the messages come from (the timeline page of ``at``)."""
    limit: int = MESSAGE_LIMIT
    """Texts longer than this many bytes are cut (`cut_messages`)."""

    def messages_json(self, last: int | None = None) -> list[dict[str, Any]]:
        """The messages in wire JSON, texts cut to `limit`: all of them, or the ``last``
        ones."""
        chosen = self.messages if last is None else self.messages[-last:] if last else []
        dumped = messages_json(chosen)
        cut_messages(dumped, self.limit)
        return dumped

    def shown_seqs(self, last: int) -> list[int]:
        """The seqs of the ``last`` messages (those `messages_json(last)` gives)."""
        return self.message_seqs[-last:] if last else []

    def window(self) -> dict[str, Any]:
        """``{start, end, previous, next}``: the window's seqs, and the ``at`` of the windows
        before and after it (None at either end)."""
        end = min(self.at, self.window_start + TIMELINE_PAGE - 1)
        later = self.window_start + TIMELINE_PAGE
        return {
            "start": self.window_start,
            "end": end,
            "previous": self.window_start - 1 if self.window_start > 0 else None,
            "next": min(later + TIMELINE_PAGE - 1, self.last) if later <= self.last else None,
        }

    def to_json(self, *, with_messages: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "at": self.at,
            "last": self.last,
            "todos": None if self.todos is None else [t.model_dump() for t in self.todos],
            "todoWriteSeq": self.write_seq,
            "previousTodoWriteSeq": self.previous_write_seq,
            "todoChanges": [asdict(c) for c in self.changes],
            "messageCount": len(self.messages),
            "openTurn": self.open_turn,
            "window": self.window(),
            "messageSeqs": list(self.message_seqs),
        }
        if with_messages:
            out["messages"] = self.messages_json()
        return out


def clamp(at: int | None, last: int) -> int:
    """The seq to show: ``at`` within ``0..last`` (None: the end)."""
    if at is None or at > last:
        return max(last, 0)
    return max(at, 0)


async def _latest_write(
    store: SessionStore, session_id: str, at: int
) -> tuple[list[TodoItem] | None, int | None]:
    """The list of the last ``todo/write`` at or before ``at`` and its seq (one indexed
    row), or ``(None, None)``."""
    event = await store.latest_event(session_id, "todo/write", upto_seq=at)
    if event is None:
        return None, None
    return todos_from_payload(event.data, seq=event.seq), event.seq


async def _todo_state(
    store: SessionStore, session_id: str, at: int
) -> tuple[list[TodoItem] | None, list[TodoChange], int | None, int | None]:
    """The list as of ``at``, what its write changed, the seq of that write and of the one
    before it."""
    todos, write_seq = await _latest_write(store, session_id, at)
    if todos is None or write_seq is None:
        return None, [], None, None
    previous, previous_seq = (None, None)
    if write_seq > 0:
        previous, previous_seq = await _latest_write(store, session_id, write_seq - 1)
    return todos, todo_changes(todos, previous), write_seq, previous_seq


async def load_state(
    store: SessionStore, session_id: str, at: int, last: int, *, limit: int = MESSAGE_LIMIT
) -> State:
    """The state as of ``at``: the todo list, the turn open there, and the messages of the
    window that holds ``at`` (`window_messages`), read side by side."""
    start = page_start(at)
    (seqs, messages), (todos, changes, write_seq, previous_seq), turn = await asyncio.gather(
        window_messages(store, session_id, start, at),
        _todo_state(store, session_id, at),
        open_turn(store, session_id, at),
    )
    return State(
        at,
        last,
        todos,
        changes,
        write_seq,
        previous_seq,
        messages,
        turn,
        message_seqs=seqs,
        window_start=start,
        limit=limit,
    )


@dataclass
class SessionPage:
    """Everything the session page shows at first."""

    header: dict[str, Any]
    summary: SessionSummary
    turns: int
    state: State
    start: int
    rows: list[Row]
