"""An OpenAI Agents SDK ``Session`` on the todo-sessions log: `TodoSessionsSession`.

``Runner.run(agent, prompt, session=TodoSessionsSession("chat-1", url))`` keeps the
conversation in this library's store (README.md, "OpenAI Agents SDK"; docs/format.md, "SDK
sessions"). Each input item is kept whole in one ``agents/item`` event and `get_items` gives
the items back deep-equal, in order (ties cannot happen: the order is the log's). What the
mapping understands follows each item as typed events: a user message opens a turn
(``user/message``), an assistant message and a function call become ``assistant/message``
(the call also ``tool/call``), a function call's output ``tool/result``.

`pop_item` and `clear_session` delete nothing: each appends one ``agents/retract`` event
naming the items it takes back, which replaces their surface events, so `get_items`,
`derive_messages` and the viewer stop showing them while the log keeps them.

`todo_write_tool` is this library's ``todo_write`` tool as an Agents SDK function tool: it
appends ``todo/write`` to the session it runs in.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import json
import os
from collections.abc import Mapping
from typing import Any, cast

from ..core.types import ASSISTANT_MESSAGE, SESSION_META, TODO_WRITE, TOOL_CALL, USER_MESSAGE

try:
    from agents import FunctionTool, RunContextWrapper
    from agents.memory import SessionSettings
except ImportError as exc:  # pragma: no cover - exercised by tests/test_extras.py
    raise ImportError(
        "todo_sessions.integrations.openai_agents needs the [openai-agents] extra: "
        "pip install 'todo-sessions[openai-agents]'"
    ) from exc


from ..core.envelope import SessionEvent
from ..core.header import SessionHeader, check_session_id
from ..errors import (
    InvalidEventError,
    SeqConflictError,
    SessionExistsError,
    SessionNotFoundError,
    StoreBusyError,
)
from ..harness.tools import TodoWriteTool, ToolContext
from ..harness.tools.todo_write import TODO_WRITE_PARAMETERS
from ..store.store import SessionStore
from ._common import MAX_TRIES, Batch, LogState, StoreHandle, now_ms

__all__ = ["TAG", "TodoSessionsSession", "todo_write_tool"]

ITEM_TYPE = "agents/item"
RETRACT_TYPE = "agents/retract"
TAG = "openai-agents"
"""The tag of the sessions this adapter writes."""

_RUNNING: contextvars.ContextVar[TodoSessionsSession | None] = contextvars.ContextVar(
    "todo_sessions_agents_session", default=None
)
"""The session whose history the current run read (`todo_write_tool` writes to it)."""


class _ItemsState(LogState):
    def __init__(self) -> None:
        super().__init__()
        self.items: dict[int, SessionEvent] = {}
        """The ``agents/item`` events of the visible items by seq, in log order."""

    def advance(self, event: SessionEvent) -> None:
        super().advance(event)
        if event.type == ITEM_TYPE:
            self.items[event.seq] = event
        elif event.type == RETRACT_TYPE:
            for seq in event.payload.get("items", ()):
                self.items.pop(seq, None)


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    """Responses content (a string or parts) as this library's blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("input_text", "output_text", "text") and isinstance(
            part.get("text"), str
        ):
            blocks.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            blocks.append({"type": "text", "text": part["refusal"]})
        elif isinstance(part.get("type"), str):
            blocks.append(dict(part))  # kept verbatim (an unknown block)
    return blocks


def _map_item(batch: Batch, item: Mapping[str, Any], seq: int, model: str) -> None:
    """The typed events of one item (after its ``agents/item``)."""
    kind, role = item.get("type", "message"), item.get("role")
    message_id = str(item.get("id") or f"item-{seq}")
    if kind == "message" and role == "user":
        blocks = _text_blocks(item.get("content"))
        if blocks:
            batch.new_turn()
            data = {"id": message_id, "role": "user", "content": blocks, "source": {"kind": "user"}}
            batch.add(USER_MESSAGE, data, surface=True)
    elif kind in ("message", "function_call") and (role == "assistant" or kind != "message"):
        if kind == "message":
            blocks = _text_blocks(item.get("content"))
        else:
            call_id, name = item.get("call_id"), item.get("name")
            arguments = item.get("arguments")
            if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
                return
            arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
            blocks = [{"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}]
        if not blocks:
            return
        turn, step = batch.open_step()
        message = {
            "id": message_id,
            "role": "assistant",
            "content": blocks,
            "source": {"kind": "model", "provider": "openai-agents", "model": model},
        }
        batch.add(ASSISTANT_MESSAGE, {"turn": turn, "step": step, "message": message}, surface=True)
        if kind == "function_call":
            call = blocks[0]
            call_data: dict[str, Any] = {"turn": turn, "step": step, "callId": call["id"]}
            batch.add(
                TOOL_CALL, {**call_data, "name": call["name"], "arguments": call["arguments"]}
            )
        batch.close_step()
    elif kind == "function_call_output" and isinstance(item.get("call_id"), str):
        output = item.get("output")
        blocks = _text_blocks(output if isinstance(output, str | list) else json.dumps(output))
        batch.tool_result(item["call_id"], blocks, False, f"{message_id}:output")
    # system and developer messages, reasoning and every other item: kept whole only


class TodoSessionsSession:
    """The OpenAI Agents SDK ``Session`` protocol on a todo-sessions store.

    ``session_id`` is also the id of the session in the store (so ``todo-sessions todos
    SESSION_ID`` shows its plan). ``store_or_url`` is a `SessionStore` (left open by `close`)
    or a database URL or path (opened by the session, closed by `close`). One session object
    may be used from several threads, each with its own event loop, at once: it holds no
    lock, and concurrent appends are ordered by the store (one that lost the race is built
    again on the log as it is).
    """

    def __init__(
        self,
        session_id: str,
        store_or_url: SessionStore | str | os.PathLike[str],
        *,
        session_settings: SessionSettings | None = None,
        cwd: str | None = None,
        model: str = "unknown",
    ) -> None:
        self.session_id = check_session_id(session_id)
        self.session_settings = session_settings or SessionSettings()
        self.cwd = cwd
        self.model = model
        """Named in the ``source`` of mapped assistant messages (items do not say)."""
        self._handle = StoreHandle(store_or_url)
        self._cached: _ItemsState | None = None

    @property
    def store(self) -> SessionStore:
        return self._handle.store

    async def close(self) -> None:
        """Close the store if this session opened it (a store passed in stays open)."""
        await self._handle.aclose()

    async def __aenter__(self) -> TodoSessionsSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _state(self) -> _ItemsState:
        """The fold of the log, brought up to date with what was appended since it was last
        read (by anyone): one read of the new events only. A fold, once cached, is never
        changed (a newer one replaces it), so the threads and event loops that share this
        session read it at once without a lock: never change what this returns."""
        cached = self._cached
        try:
            events = await self.store.read_from(
                self.session_id, 0 if cached is None else cached.next_seq
            )
        except SessionNotFoundError:
            events, cached = [], None  # not stored (or deleted meanwhile)
        if cached is not None and not events:
            return cached
        state = _ItemsState() if cached is None else cached.copy()
        state.advance_all(events)
        self._cached = state
        return state

    async def _append(self, build: Any) -> Any:
        """``build(batch, state)`` on the current log, appended at its end; recomputed when
        another writer was first. Returns what ``build`` returned."""
        for _ in range(MAX_TRIES):
            state = (await self._state()).copy()
            batch = Batch(state, now_ms())
            result = build(batch, state)
            if not batch.events:
                return result
            if TAG not in state.tags:
                batch.add(SESSION_META, {"tags": [*state.tags, TAG]}, ignorable=True)
            try:
                if batch.events[0].seq == 0:
                    header = SessionHeader(
                        id=self.session_id, created_at=now_ms(), cwd=self.cwd, origin=TAG
                    )
                    # created meanwhile, or pending here: the append decides
                    with contextlib.suppress(SessionExistsError):
                        await self.store.create(header)
                await self.store.append(self.session_id, batch.events)
            except (SeqConflictError, SessionExistsError, StoreBusyError):
                continue  # another writer was first: build again on the log as it is now
            self._cached = state
            return result
        raise SeqConflictError(
            self.session_id, -1, None, detail=f"kept racing other writers ({MAX_TRIES} tries)"
        )

    # -- the protocol ---------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The latest ``limit`` visible items in order (all when None; the default is
        ``session_settings.limit``)."""
        _RUNNING.set(self)
        if limit is None:
            limit = self.session_settings.limit
        events = list((await self._state()).items.values())
        if limit is not None:
            events = events[-limit:] if limit > 0 else []
        return [event.data_copy() for event in events]

    async def add_items(self, items: list[Any]) -> None:
        """Append the items in one transaction (all or nothing)."""
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InvalidEventError(
                    f"items[{i}] must be a JSON object, got {type(item).__name__}",
                    event_type=ITEM_TYPE,
                    field=f"items[{i}]",
                )
        if not items:
            return

        def build(batch: Batch, state: _ItemsState) -> None:
            for item in items:
                event = batch.add(ITEM_TYPE, dict(item), ignorable=True)
                _map_item(batch, event.payload, event.seq, self.model)

        await self._append(build)

    def _retract(self, seqs: list[int], reason: str, batch: Batch, state: _ItemsState) -> None:
        """One ``agents/retract`` of the items at ``seqs``: it replaces the surface events
        from the first of them on; items that put nothing on the surface (reasoning, system
        and developer messages, hosted tool calls, a malformed item) leave nothing to
        replace, and the retract is appended to the surface (a surface type needs an op)."""
        span = [s for s in state.surface if s > seqs[0]] if reason == "pop" else state.surface
        data = {"items": seqs, "reason": reason}
        if span:
            batch.add(RETRACT_TYPE, data, replace=(span[0], span[-1], list(span)), ignorable=True)
        else:
            batch.add(RETRACT_TYPE, data, surface=True, ignorable=True)

    async def pop_item(self) -> Any | None:
        """Take back the latest visible item and return it (None when there is none)."""

        def build(batch: Batch, state: _ItemsState) -> Any:
            if not state.items:
                return None
            seq = next(reversed(state.items))
            item = state.items[seq].data_copy()
            self._retract([seq], "pop", batch, state)
            return item

        return await self._append(build)

    async def clear_session(self) -> None:
        """Take back every visible item (the log keeps them)."""

        def build(batch: Batch, state: _ItemsState) -> None:
            if state.items:
                self._retract(list(state.items), "clear", batch, state)

        await self._append(build)

    async def _write_todos(self, todos: list[dict[str, str]]) -> None:
        def build(batch: Batch, state: _ItemsState) -> None:
            batch.ensure_turn()
            batch.add(TODO_WRITE, {"todos": todos})

        await self._append(build)


class _Capture:
    """Stands in for an agent session in `TodoWriteTool.run`: keeps the checked list."""

    def __init__(self) -> None:
        self.todos: list[dict[str, str]] | None = None

    def append(self, type: str, data: dict[str, Any]) -> None:
        self.todos = data["todos"]


def todo_write_tool(
    session: TodoSessionsSession | None = None, *, allow_parallel_in_progress: bool = False
) -> FunctionTool:
    """This library's ``todo_write`` tool (its schema, description and rules) as an Agents SDK
    function tool. Each valid call appends one ``todo/write`` to ``session``, or, without
    one, to the `TodoSessionsSession` the running ``Runner.run`` reads its history from. An
    invalid call appends nothing and tells the model why."""
    tool = TodoWriteTool(allow_parallel_in_progress=allow_parallel_in_progress)

    async def invoke(ctx: RunContextWrapper[Any], arguments: str) -> str:
        target = session or _RUNNING.get()
        try:
            args = json.loads(arguments) if arguments else {}
        except ValueError as exc:
            return f"invalid arguments for tool todo_write: not JSON ({exc})"
        capture = _Capture()
        context = ToolContext(session=cast(Any, capture if target else None), call_id="")
        result = await tool.run(args, context)
        if result.is_error or capture.todos is None or target is None:
            return result.text_content
        await target._write_todos(capture.todos)
        return result.text_content

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=copy.deepcopy(TODO_WRITE_PARAMETERS),
        on_invoke_tool=invoke,
        strict_json_schema=True,
    )
