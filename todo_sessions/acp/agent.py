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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal

from ..agent.loop import AgentLoop
from ..agent.model import Model
from ..core.envelope import SessionEvent
from ..errors import InvalidEventError, SessionExistsError, SessionNotFoundError
from ..service import SessionService
from ..session import Session
from ..tools.registry import ToolRegistry
from . import _sdk
from .builtin import PlanningModel, builtin_tools
from .mapping import (
    SessionUpdate,
    chunk_to_updates,
    event_to_updates,
    replay_updates,
    todos_to_plan,
)

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


class TodoSessionsAgent:
    """The ACP agent. ``model_factory`` and ``tools_factory`` default to the built-ins."""

    def __init__(
        self,
        service: SessionService,
        *,
        model_factory: Callable[[], Model] = PlanningModel,
        tools_factory: Callable[[], ToolRegistry] = builtin_tools,
        max_steps: int = 200,
    ) -> None:
        self.service = service
        self._model_factory = model_factory
        self._tools = tools_factory()
        self._conn: Any = None
        self._loops: dict[str, AgentLoop] = {}
        self.max_steps = max_steps

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
        return _sdk.NewSessionResponse(session_id=session.id)

    async def _live(self, session_id: str) -> Session:
        """The session, owned live by this agent (resumed, and so repaired, if need be)."""
        if session_id in self.service.live_ids():
            return self.service.get(session_id)
        try:
            with _client_errors():
                return await self.service.resume(session_id)
        except SessionNotFoundError:
            raise _sdk.RequestError.resource_not_found(session_id) from None
        except SessionExistsError:  # resumed concurrently by another request
            return self.service.get(session_id)

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> _sdk.LoadSessionResponse:
        """Replay the stored log. Loading only reads: another process may be running a turn of
        this session, and repairing it here would cut that turn off. Repair happens when this
        agent takes the session over for a prompt."""
        if session_id in self.service.live_ids():
            events = self.service.get(session_id).events
        else:
            try:
                with _client_errors():
                    events = (await self.service.store.read(session_id)).events
            except SessionNotFoundError:
                raise _sdk.RequestError.resource_not_found(session_id) from None
        for update in replay_updates(events, present_call=self._tools.present_call):
            await self._send(session_id, update)
        return _sdk.LoadSessionResponse()

    # -- turns ----------------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> _sdk.PromptResponse:
        session = await self._live(session_id)
        if session_id in self._loops:
            raise _sdk.RequestError.invalid_request({"reason": "a prompt is already running"})
        loop = AgentLoop(
            session,
            self._model_factory(),
            self._tools,
            max_steps=self.max_steps,
            checkpoint=self.service.checkpoint_for(session_id),
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
        todos = session.todos
        if todos and any(t.status != "completed" for t in todos):
            await self._send(session_id, todos_to_plan(todos))
        queue: asyncio.Queue[SessionEvent | None] = asyncio.Queue()

        def forward(event: SessionEvent) -> None:
            if event.type != "user/message":  # the client already shows its own prompt
                queue.put_nowait(event)

        async def sender() -> None:
            while (event := await queue.get()) is not None:
                for update in self._live_updates(event):
                    await self._send(session_id, update)

        unsubscribe = session.subscribe(forward)
        sending = asyncio.create_task(sender())
        try:
            with _client_errors():
                outcome = await loop.run_turn(_prompt_blocks(prompt))
        finally:
            unsubscribe()
            queue.put_nowait(None)
            await sending
        if outcome.reason == "error":
            last = session.events[-1].data.get("reason", {}).get("error", {})
            if last.get("code") == "MAX_STEPS":
                return _sdk.PromptResponse(stop_reason="max_turn_requests")
            raise _sdk.RequestError.internal_error({"message": last.get("message", "turn failed")})
        return _sdk.PromptResponse(stop_reason=_STOP_REASONS.get(outcome.reason, "end_turn"))

    def _live_updates(self, event: SessionEvent) -> list[SessionUpdate]:
        """Updates for an event as it happens: streamed deltas as they arrive, so a streamed
        assistant message sends nothing more (its text went out chunk by chunk)."""
        if event.type == "assistant/chunk":
            return chunk_to_updates(event)
        if event.type == "assistant/message" and event.source_event_seqs:
            return []
        return event_to_updates(event, present_call=self._tools.present_call)

    async def cancel(self, session_id: str, **_: Any) -> None:
        loop = self._loops.get(session_id)
        if loop is not None:
            loop.cancel()


async def serve(service: SessionService) -> None:
    """Run the agent over stdin/stdout until the client disconnects."""
    async with service:
        # Structurally an SDK `Agent` (it implements the methods the protocol needs; the SDK's
        # Protocol also lists optional ones such as fork_session that we answer "not found").
        await _sdk.run_agent(TodoSessionsAgent(service))  # type: ignore[arg-type]
