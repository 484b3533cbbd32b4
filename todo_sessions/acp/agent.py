"""An ACP agent on top of `SessionService`, and ``serve`` to run it over stdio.

See docs/design.md, "ACP bridge".

- ``initialize`` advertises ``loadSession: true``.
- ``new_session`` starts a live session; ``prompt`` runs one turn through `AgentLoop` and
  streams each appended event as ``session/update`` notifications, in log order, while the turn
  runs; it answers with the turn's stop reason once every update has been sent.
- ``load_session`` replays the whole stored log (user messages, assistant text and thoughts,
  tool calls and their results, and every ``todo/write`` as a ``plan``) and only then answers.
  An unknown id is ``RequestError.resource_not_found``.
- At the start of each prompt an unfinished todo list is sent again as a plan (editors hide
  completed entries when a turn starts).
- Live updates and replays go through the same `UpdateMapper`, so the live stream of a turn
  and its replay are the same updates with the same message ids. When the first prompt takes
  over a session whose last turn was interrupted, the repair's events (results of the calls
  left open, ``turn/end``) are streamed before the turn's own updates.
- ``serve`` puts `GuardedStdioTransport` in front of the SDK's connection: a malformed line
  is answered with the JSON-RPC error it deserves and the agent keeps running.
- A tool whose ``requires_permission`` attribute is true runs only after the client allowed it
  through ``session/request_permission`` (allow once, allow always for the session, reject);
  a rejected (or unanswerable) request is an error result the model reads: "not run: …".
  The client is shown the ``tool_call`` before it is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal

from ..agent.loop import AgentLoop
from ..agent.model import Model
from ..core.envelope import SessionEvent
from ..errors import InvalidEventError, SessionExistsError, SessionNotFoundError
from ..service import SessionService
from ..session import Session
from ..tools.base import ToolContext, ToolResult
from ..tools.registry import ToolRegistry
from . import _sdk
from .builtin import PlanningModel, builtin_tools
from .jsonrpc import GuardedStdioTransport
from .mapping import SessionUpdate, UpdateMapper, replay_updates, todos_to_plan

__all__ = ["TodoSessionsAgent", "serve"]

logger = logging.getLogger("todo_sessions.acp")

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]

_STOP_REASONS: dict[str, StopReason] = {
    "completed": "end_turn",
    "max-tokens": "max_tokens",
    "aborted": "cancelled",
}


def _version() -> str:
    try:
        return version("todo-sessions")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


@contextlib.contextmanager
def _client_errors() -> Iterator[None]:
    """Bad input from the client (an invalid id, cwd or prompt) is ``invalid_params``."""
    try:
        yield
    except InvalidEventError as exc:
        raise _sdk.RequestError.invalid_params({"message": str(exc)}) from None


def _prompt_blocks(prompt: list[Any]) -> list[dict[str, Any]]:
    """ACP prompt content → our content blocks (text and images; others as text notes)."""
    blocks: list[dict[str, Any]] = []
    for block in prompt:
        kind = getattr(block, "type", None)
        if kind == "text":
            blocks.append({"type": "text", "text": block.text})
        elif kind == "image":
            blocks.append({"type": "image", "mediaType": block.mime_type, "data": block.data})
        elif kind == "resource_link":
            blocks.append({"type": "text", "text": f"[resource] {block.uri}"})
    return blocks or [{"type": "text", "text": ""}]


PermissionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]
_PERMISSION_OPTIONS: tuple[tuple[str, str, PermissionKind], ...] = (
    ("allow-once", "Allow", "allow_once"),
    ("allow-always", "Always allow in this session", "allow_always"),
    ("reject-once", "Reject", "reject_once"),
)

AskPermission = Callable[[str, Any, ToolContext], Awaitable[str | None]]


class _PermissionGate(ToolRegistry):
    """The agent's tools; those with ``requires_permission`` ask the client first.

    ``ask(name, args, context)`` returns None when the call may run, else why not.
    """

    def __init__(self, tools: ToolRegistry, ask: AskPermission) -> None:
        super().__init__()
        for name in tools.names():
            tool = tools.get(name)
            if tool is not None:
                self.register(tool)
        self._ask = ask

    async def execute(
        self, name: str, args: dict[str, Any] | str | None, context: ToolContext
    ) -> ToolResult:
        tool = self.get(name)
        if tool is not None and getattr(tool, "requires_permission", False):
            refused = await self._ask(name, args, context)
            if refused is not None:
                return ToolResult.error(f"not run: {refused}")
        return await super().execute(name, args, context)


class TodoSessionsAgent:
    """The ACP agent. ``model_factory`` and ``tools_factory`` default to the built-ins.

    ``model_factory`` is called once per live session (its `AgentLoop` serves every prompt of
    that session); ``tools_factory`` once. ``record_requests`` is passed to the loops.
    """

    def __init__(
        self,
        service: SessionService,
        *,
        model_factory: Callable[[], Model] = PlanningModel,
        tools_factory: Callable[[], ToolRegistry] = builtin_tools,
        max_steps: int = 200,
        record_requests: bool = False,
    ) -> None:
        self.service = service
        self._model_factory = model_factory
        self._tools = _PermissionGate(tools_factory(), self._ask_permission)
        self._conn: Any = None
        self._queues: dict[str, asyncio.Queue[SessionEvent | None]] = {}
        """Per running prompt: the events not yet sent to the client."""
        self._always: dict[str, set[str]] = {}
        """Per session: tools the user allowed for the whole session."""
        self._loops: dict[str, AgentLoop] = {}
        """Per session: the loop running a prompt now."""
        self._session_loops: dict[str, AgentLoop] = {}
        self._mappers: dict[str, UpdateMapper] = {}
        """Per live session: what this agent's client was shown so far."""
        self._backlog: dict[str, list[SessionEvent]] = {}
        """Per live session: events appended on resume (crash repair), not sent yet."""
        self.max_steps = max_steps
        self.record_requests = record_requests
        """Passed to each `AgentLoop`: record provider, model, system prompt and tools."""

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def _send(self, session_id: str, update: SessionUpdate) -> None:
        await self._conn.session_update(session_id=session_id, update=update)

    # -- lifecycle ------------------------------------------------------------------------------

    async def initialize(self, protocol_version: int, **_: Any) -> _sdk.InitializeResponse:
        return _sdk.InitializeResponse(
            protocol_version=_sdk.PROTOCOL_VERSION,
            agent_capabilities=_sdk.AgentCapabilities(load_session=True),
            agent_info=_sdk.Implementation(name="todo-sessions", version=_version()),
        )

    async def new_session(self, cwd: str, **_: Any) -> _sdk.NewSessionResponse:
        with _client_errors():
            session = await self.service.new(cwd=cwd, origin="acp")
        self._mappers[session.id] = self._mapper()
        return _sdk.NewSessionResponse(session_id=session.id)

    def _mapper(self) -> UpdateMapper:
        return UpdateMapper(present_call=self._tools.present_call)

    async def _live(self, session_id: str) -> Session:
        """The session, owned live by this agent (resumed, and so repaired, if need be).

        A session holds only the events it was not told to let go of, so what the client
        could have seen is read from the store: the mapper is primed with the stored log, and
        the events the repair appends on resume (the closers `store.inspect` shows, which
        `resume` stores) are kept in ``_backlog`` for the prompt to stream first.
        """
        if session_id in self.service.live_ids():
            session = self.service.get(session_id)
            if session_id not in self._mappers:  # made live by someone else: assume all seen
                await self.service.flush(session_id)
                await self._prime(session_id, await self._stored_events(session_id))
            return session
        try:
            with _client_errors():
                log = await self.service.store.inspect(session_id)
                session = await self.service.resume(session_id)
        except SessionNotFoundError:
            raise _sdk.RequestError.resource_not_found(session_id) from None
        except SessionExistsError:  # resumed concurrently by another request
            return await self._live(session_id)
        seen = log.events[: len(log.events) - len(log.closers)]
        await self._prime(session_id, seen)
        self._backlog[session_id] = list(log.closers)
        return session

    async def _prime(self, session_id: str, events: Sequence[SessionEvent]) -> None:
        mapper = self._mappers[session_id] = self._mapper()
        for event in events:
            mapper.feed(event)

    async def _stored_events(self, session_id: str) -> Sequence[SessionEvent]:
        try:
            with _client_errors():
                return (await self.service.store.read(session_id)).events
        except SessionNotFoundError:
            raise _sdk.RequestError.resource_not_found(session_id) from None

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> _sdk.LoadSessionResponse:
        """Replay the stored log. Loading only reads: another process may be running a turn of
        this session, and repairing it here would cut that turn off. Repair happens when this
        agent takes the session over for a prompt. (A session live here is flushed first, so
        the store has all of it.)"""
        if session_id in self.service.live_ids():
            await self.service.flush(session_id)
        events = await self._stored_events(session_id)
        for update in replay_updates(events, present_call=self._tools.present_call):
            await self._send(session_id, update)
        return _sdk.LoadSessionResponse()

    # -- turns ----------------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> _sdk.PromptResponse:
        session = await self._live(session_id)
        if session_id in self._loops:
            raise _sdk.RequestError.invalid_request({"reason": "a prompt is already running"})
        loop = self._session_loops.get(session_id)
        if loop is None or loop.session is not session:
            # One loop per live session: it remembers the request configuration it recorded.
            loop = self._session_loops[session_id] = AgentLoop(
                session,
                self._model_factory(),
                self._tools,
                max_steps=self.max_steps,
                checkpoint=self.service.checkpoint_for(session_id),
                record_requests=self.record_requests,
            )
        self._loops[session_id] = loop  # taken before any await: one prompt at a time
        try:
            return await self._run_prompt(session, loop, prompt)
        finally:
            if self._loops.get(session_id) is loop:
                del self._loops[session_id]

    async def _run_prompt(
        self, session: Session, loop: AgentLoop, prompt: list[Any]
    ) -> _sdk.PromptResponse:
        session_id = session.id
        mapper = self._mappers[session_id]
        for event in self._backlog.pop(session_id, ()):  # the repair, before the turn
            for update in mapper.feed(event):
                await self._send(session_id, update)
        todos = session.todos
        if todos and any(t.status != "completed" for t in todos):
            await self._send(session_id, todos_to_plan(todos))
        queue: asyncio.Queue[SessionEvent | None] = asyncio.Queue()
        self._queues[session_id] = queue

        ended: list[SessionEvent] = []

        def forward(event: SessionEvent) -> None:
            queue.put_nowait(event)
            if event.type == "turn/end":
                ended.append(event)

        async def sender() -> None:
            while (event := await queue.get()) is not None:
                try:
                    updates = mapper.feed(event)
                    if event.type != "user/message":  # the client shows its own prompt
                        for update in updates:
                            await self._send(session_id, update)
                finally:
                    queue.task_done()

        unsubscribe = session.subscribe(forward)
        sending = asyncio.create_task(sender())
        try:
            with _client_errors():
                outcome = await loop.run_turn(_prompt_blocks(prompt))
        finally:
            unsubscribe()
            queue.put_nowait(None)
            await sending
            self._queues.pop(session_id, None)
        if outcome.reason == "error":
            reason = ended[-1].data.get("reason", {}) if ended else {}
            last = reason.get("error") or {}
            if last.get("code") == "MAX_STEPS":
                return _sdk.PromptResponse(stop_reason="max_turn_requests")
            raise _sdk.RequestError.internal_error({"message": last.get("message", "turn failed")})
        return _sdk.PromptResponse(stop_reason=_STOP_REASONS.get(outcome.reason, "end_turn"))

    async def _ask_permission(self, name: str, args: Any, context: ToolContext) -> str | None:
        """Ask the client whether a call may run: None if allowed, else the reason."""
        session_id = context.session.id if context.session is not None else None
        if session_id is None or self._conn is None:
            return f"{name} needs the user's permission and there is no client to ask"
        if name in self._always.get(session_id, ()):
            return None
        queue = self._queues.get(session_id)
        if queue is not None:
            await queue.join()  # the client has been shown the tool_call it is asked about
        shown = self._tools.present_call(name, args) or {}
        kind = shown.get("kind")
        tool_call = _sdk.ToolCallUpdate(
            tool_call_id=context.call_id,
            title=shown.get("title") or name,
            kind=kind if kind in _sdk.TOOL_KINDS else "other",
            status="pending",
            raw_input=shown.get("raw_input", args),
        )
        options = [
            _sdk.PermissionOption(option_id=option, name=label, kind=kind_)
            for option, label, kind_ in _PERMISSION_OPTIONS
        ]
        try:
            response = await self._conn.request_permission(
                session_id=session_id, tool_call=tool_call, options=options
            )
        except Exception as exc:
            logger.warning("session/request_permission failed: %s", exc)
            return f"{name} needs the user's permission and the client could not be asked"
        outcome = response.outcome
        if getattr(outcome, "outcome", None) != "selected":
            return "the permission request was cancelled"
        if outcome.option_id == "allow-always":
            self._always.setdefault(session_id, set()).add(name)
            return None
        if outcome.option_id == "allow-once":
            return None
        return f"the user did not allow this call of {name}"

    async def cancel(self, session_id: str, **_: Any) -> None:
        loop = self._loops.get(session_id)
        if loop is not None:
            loop.cancel()


async def serve(service: SessionService, agent: TodoSessionsAgent | None = None) -> None:
    """Run the agent (default: the built-in one) over stdin/stdout until the client
    disconnects. Malformed input lines are answered and skipped (`GuardedStdioTransport`)."""
    async with service:
        reader, writer = await _sdk.stdio_streams(limit=_STDIO_LIMIT)
        transport = GuardedStdioTransport(reader, writer)
        # Structurally an SDK `Agent` (it implements the methods the protocol needs; the SDK's
        # Protocol also lists optional ones such as fork_session that we answer "not found").
        conn = _sdk.AgentSideConnection(
            agent or TodoSessionsAgent(service),  # type: ignore[arg-type]
            transport,
            listening=False,
        )
        try:
            await conn.listen()
        finally:
            await asyncio.shield(conn.close())


_STDIO_LIMIT = 50 * 1024 * 1024
"""The stdin reader's buffer limit (the SDK's default); longer lines are read in pieces."""
