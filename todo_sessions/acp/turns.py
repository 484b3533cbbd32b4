"""``session/prompt`` and its cancellation: the turn half of `TodoSessionsAgent`.

A prompt runs one turn through the session's `AgentLoop` (one per live session and model)
and streams each appended event to the client through the session's `Presenter`, in log
order, while the turn runs; children the turn announces are relayed (`ChildRelay`). It
answers with the turn's stop reason once every update has been sent.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .._session import Session
from ..errors import ModelAuthError
from ..harness.loop import AgentLoop
from ..harness.tools.base import ToolContext
from . import _sdk
from .client_errors import client_errors
from .permissions import ask_client
from .prompting import TurnForwarder, prompt_blocks, prompt_response
from .relay import ChildRelay

if TYPE_CHECKING:
    from .agent import TodoSessionsAgent

__all__ = ["Turns"]


class Turns:
    """The prompt methods of `TodoSessionsAgent` (whose state they use)."""

    async def prompt(
        self: TodoSessionsAgent, session_id: str, prompt: list[Any], **_: Any
    ) -> _sdk.PromptResponse:
        session = await self._live(session_id)
        if session_id in self._loops:
            raise _sdk.RequestError.invalid_request({"reason": "a prompt is already running"})
        if session_id not in self._model_of:  # the model it switched to, if any
            await self.service.flush(session_id)
            self._current_model(session_id, await self._summary(session_id))
            if session_id in self._loops:
                raise _sdk.RequestError.invalid_request({"reason": "a prompt is already running"})
        loop = self._loop_for(session)
        self._loops[session_id] = loop  # taken before any await: one prompt at a time
        done = self._prompt_done[session_id] = asyncio.Event()
        try:
            if session_id in self._cancel_asked:  # cancelled while it waited
                loop.cancel()
            response = await self._run_prompt(session, loop, prompt)
        finally:
            if self._loops.get(session_id) is loop:
                del self._loops[session_id]
            if self._prompt_done.get(session_id) is done:
                del self._prompt_done[session_id]
            self._cancel_asked.discard(session_id)
            done.set()
        if session_id in self.service.live_ids():
            await self._send_usage(session_id)
            if session_id not in self._followers:
                await self.service.flush(session_id)
                self._follow(session_id, session.next_seq)
        return response

    def _loop_for(self: TodoSessionsAgent, session: Session) -> AgentLoop:
        """The session's loop: one per live session and model (it remembers the request
        configuration it recorded); a new one when the client switched model."""
        session_id = session.id
        value = self._model_of.get(session_id) or self.models.default
        loop = self._session_loops.get(session_id)
        if loop is not None and loop.session is session and self._loop_model[session_id] == value:
            return loop
        try:
            model = self.models.choices[value].factory()
        except ModelAuthError as exc:
            raise _sdk.RequestError.auth_required({"message": str(exc)}) from None
        loop = self._session_loops[session_id] = AgentLoop(
            session,
            model,
            self._tools,
            max_steps=self.max_steps,
            checkpoint=self.service.checkpoint_for(session_id),
            record_requests=self.record_requests,
            compaction=self.compaction,
        )
        self._loop_model[session_id] = self._model_of[session_id] = value
        return loop

    async def _run_prompt(
        self: TodoSessionsAgent, session: Session, loop: AgentLoop, prompt: list[Any]
    ) -> _sdk.PromptResponse:
        session_id = session.id
        mapper = self._mappers[session_id]
        relay = ChildRelay(self.service, self.features, self._tools.present_call, self._send)
        for event in self._backlog.pop(session_id, ()):  # the repair, before the turn
            for update in mapper.feed(event):
                await relay.send(session_id, update)
        todos = session.todos
        if todos and any(t.status != "completed" for t in todos):
            await self._send(session_id, mapper.plan(todos))

        async def send(update: dict[str, Any]) -> None:
            await relay.send(session_id, update)

        forwarder = TurnForwarder(session, mapper, self._usage.get(session_id), send)
        self._forwarders[session_id] = forwarder
        try:
            async with forwarder:
                with client_errors():
                    outcome = await loop.run_turn(prompt_blocks(prompt))
        finally:
            self._forwarders.pop(session_id, None)
            await relay.aclose()
        return prompt_response(outcome, forwarder.end)

    async def _ask_permission(
        self: TodoSessionsAgent, name: str, args: Any, context: ToolContext
    ) -> str | None:
        """Ask the client whether a call may run: None if allowed, else the reason."""
        session_id = context.session.id if context.session is not None else None
        if session_id is None or self._conn is None:
            return f"{name} needs the user's permission and there is no client to ask"
        if name in self._always.get(session_id, ()):
            return None
        forwarder = self._forwarders.get(session_id)
        if forwarder is not None:
            await forwarder.queue.join()  # the client has been shown the tool_call it is asked
        shown = self._tools.present_call(name, args)
        refused, always = await ask_client(
            self._conn, session_id, context.call_id, name, args, shown
        )
        if always:
            self._always.setdefault(session_id, set()).add(name)
        return refused

    async def cancel(self: TodoSessionsAgent, session_id: str, **_: Any) -> None:
        loop = self._loops.get(session_id)
        if loop is not None:
            loop.cancel()

    async def cancel_prompt_request(self: TodoSessionsAgent, session_id: str) -> None:
        """``$/cancel_request`` of a pending ``session/prompt``: cancelled as
        ``session/cancel`` would (also when it has not started running yet)."""
        self._cancel_asked.add(session_id)
        await self.cancel(session_id)
