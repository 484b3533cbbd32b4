"""``session/prompt``: the turn half of `TodoSessionsAgent` (functions of the agent).

A prompt runs one turn through the session's `AgentLoop` (one per live session and model)
and streams each appended event to the client through the session's `View`, in log order,
while the turn runs; children the turn announces are relayed (`ChildRelay`). It holds the
view from before its first update to after its last: it first shows what the client was not
shown yet (the crash repair's closers, what others appended since), and again at the end. It
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
from .usage import UsageTally
from .views import View

if TYPE_CHECKING:
    from .agent import TodoSessionsAgent

__all__ = ["ask_permission", "catch_up", "prompt", "wake"]


async def prompt(
    agent: TodoSessionsAgent, session_id: str, prompt: list[Any]
) -> _sdk.PromptResponse:
    """Run the prompt; a ``$/cancel_request`` of it no longer applies once it answered."""
    try:
        return await _prompt(agent, session_id, prompt)
    finally:
        agent._cancel_asked.discard(session_id)


async def _prompt(
    agent: TodoSessionsAgent, session_id: str, prompt: list[Any]
) -> _sdk.PromptResponse:
    session = await agent._live(session_id)
    if session_id in agent._loops:
        raise _sdk.RequestError.invalid_request({"reason": "a prompt is already running"})
    if session_id not in agent._model_of:  # the model it switched to, if any
        await agent.service.flush(session_id)
        agent._current_model(session_id, await agent._summary(session_id))
        if session_id in agent._loops:
            raise _sdk.RequestError.invalid_request({"reason": "a prompt is already running"})
    loop = _loop_for(agent, session)
    agent._loops[session_id] = loop  # taken before any await: one prompt at a time
    done = agent._prompt_done[session_id] = asyncio.Event()
    try:
        response = await _run_prompt(agent, session, loop, prompt)
    finally:
        if agent._loops.get(session_id) is loop:
            del agent._loops[session_id]
        if agent._prompt_done.get(session_id) is done:
            del agent._prompt_done[session_id]
        done.set()
    if session_id in agent.service.live_ids():
        await agent._send_usage(session_id)
        if session_id not in agent._followers and session_id in agent._views:
            agent._follow(session_id, agent._views[session_id].next_seq)
    return response


def _loop_for(agent: TodoSessionsAgent, session: Session) -> AgentLoop:
    """The session's loop: one per live session and model (it remembers the request
    configuration it recorded); a new one when the client switched model."""
    session_id = session.id
    value = agent._model_of.get(session_id) or agent.models.default
    loop = agent._session_loops.get(session_id)
    if loop is not None and loop.session is session and agent._loop_model[session_id] == value:
        return loop
    try:
        model = agent.models.choices[value].factory()
    except ModelAuthError as exc:
        raise _sdk.RequestError.auth_required({"message": str(exc)}) from None
    loop = agent._session_loops[session_id] = AgentLoop(
        session,
        model,
        agent._tools,
        max_steps=agent.max_steps,
        checkpoint=agent.service.checkpoint_for(session_id),
        record_requests=agent.record_requests,
        compaction=agent.compaction,
    )
    agent._loop_model[session_id] = agent._model_of[session_id] = value
    return loop


async def _run_prompt(
    agent: TodoSessionsAgent, session: Session, loop: AgentLoop, prompt: list[Any]
) -> _sdk.PromptResponse:
    session_id = session.id
    view = agent._views[session_id]
    tally = agent._usage.get(session_id)
    relay = ChildRelay(
        agent.service,
        agent.features,
        agent._tools.present_call,
        agent._send,
        parent=view.presenter,
        asking=lambda sid, call_id: (sid, call_id) in agent._asking,
        views=agent._views,
    )

    async def send(update: dict[str, Any]) -> None:
        await relay.send(session_id, update)

    async def catch_up() -> None:
        """What the client was not shown yet (the repair's closers, what others appended)."""
        await view.catch_up(agent.service, session_id, send, tally)

    async def start() -> None:
        await catch_up()
        todos = session.todos
        if todos and any(t.status != "completed" for t in todos):
            await agent._send(session_id, view.presenter.plan(todos))

    forwarder = TurnForwarder(session, view, tally, send, before=start)
    agent._forwarders[session_id] = forwarder
    try:
        async with view.lock:
            async with forwarder:
                with client_errors():
                    outcome = await _run_turn(agent, session_id, loop, prompt)
            await catch_up()  # appended after the turn's end, before the lock goes
    finally:
        agent._forwarders.pop(session_id, None)
        await relay.aclose()
    return prompt_response(outcome, forwarder.end)


async def ask_permission(
    agent: TodoSessionsAgent, name: str, args: Any, context: ToolContext
) -> str | None:
    """Ask the client whether a call may run: None if allowed, else the reason."""
    session_id = context.session.id if context.session is not None else None
    if session_id is None or agent._conn is None:
        return f"{name} needs the user's permission and there is no client to ask"
    if name in agent._always.get(session_id, ()):
        return None
    forwarder = agent._forwarders.get(session_id)
    asking = (session_id, context.call_id)
    agent._asking.add(asking)  # a relay holding the stream for this call lets it go
    try:
        if forwarder is not None:
            await forwarder.queue.join()  # the client has been shown the tool_call it is asked
        shown = agent._tools.present_call(name, args)
        conn = agent._conn
        refused, always = await ask_client(conn, session_id, context.call_id, name, args, shown)
    finally:
        agent._asking.discard(asking)
    if always:
        agent._always.setdefault(session_id, set()).add(name)
    return refused


async def _run_turn(
    agent: TodoSessionsAgent, session_id: str, loop: AgentLoop, prompt: list[Any]
) -> Any:
    """The loop's turn; a ``$/cancel_request`` that came before the turn started (which
    clears the loop's cancel flag) cancels it as soon as it has."""
    running = asyncio.ensure_future(loop.run_turn(prompt_blocks(prompt)))
    await asyncio.sleep(0)  # the turn has started (its prompt logged)
    if session_id in agent._cancel_asked:
        loop.cancel()
    return await running


async def wake(agent: TodoSessionsAgent, session_id: str, seq: int) -> None:
    """The follower read event ``seq`` of a session the client has open: show what the
    client was not shown yet, unless a prompt or a replay is showing the session (it
    catches up before it lets go)."""
    view = agent._views.get(session_id)
    if view is None or seq < view.next_seq:
        return
    if view.lock.locked():
        view.missed = True
        return
    async with view.lock:
        await catch_up(agent, session_id, view, agent._usage.get(session_id))


async def catch_up(
    agent: TodoSessionsAgent, session_id: str, view: View, tally: UsageTally | None
) -> None:
    """`View.catch_up` outside a prompt, the children it announces relayed (by the view's
    relay, kept until the session is closed or loaded again). Call it holding the lock."""
    relay = agent._relays.get(session_id)
    if relay is None:
        present_call = agent._tools.present_call
        relay = ChildRelay(
            agent.service,
            agent.features,
            present_call,
            agent._send,
            view.presenter,
            views=agent._views,
        )
        agent._relays[session_id] = relay

    async def send(update: dict[str, Any]) -> None:
        await relay.send(session_id, update)

    await view.catch_up(agent.service, session_id, send, tally)
