"""A running prompt's subagent sessions, streamed to a client that opted in (``subagents``).

When a parent's update stream announces a child (``subagent_update``, state running),
`ChildRelay` starts sending the child's own log on the child's session id, through a
`Presenter` of its own (so a child's plan is its own, and a grandchild is announced on the
child and relayed in turn). The child runs in this process (the ``subagent`` tool runs it on
the same service): its events are taken from the live session as they are appended, from the
store once it is no longer live. Before the announcement that the child is idle, everything
the child logged is sent. Announcement first, then the child's traffic, then idle: the order
``subagent_update`` asks for.

A call names its child before the tool runs, and the tool may refuse it (no child is ever
made): the announcement is held (and the parent's stream behind it, so the order stays the
replay's) until the child exists or the call's result is logged; a call that made no child
is announced neither running nor idle. A child the client has open itself (it loaded it
while it runs) is shown through its view (`todo_sessions.acp.views`): each event once, after
the load's replay, whichever of the relay and the child's follower gets there first.

A child's idle ``cancelled`` (its call cancelled, or closed by the crash repair) is settled
from the child's own log before it is sent (`settled`), live as in a replay.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .._service import SessionService
from ..core.envelope import SessionEvent
from ..core.types import TOOL_RESULT, TURN_END, TURN_START
from ..errors import TodoSessionsError
from .capabilities import ClientFeatures
from .presenter import Presenter
from .shown import PresentCall
from .subagents import child_idle
from .views import View, events_from

__all__ = ["ChildRelay", "settled"]

Send = Callable[[str, dict[str, Any]], Awaitable[None]]
"""``send(session_id, wire_update)``: one ``session/update`` to the client."""

_POLL = 0.02
"""Seconds between looks at a relayed child that appended nothing meanwhile."""


class _Child:
    __slots__ = ("next_seq", "presenter", "stop", "task", "wake")

    def __init__(self, presenter: Presenter) -> None:
        self.presenter = presenter
        self.next_seq = 0
        self.stop = asyncio.Event()
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None


class ChildRelay:
    """Relays the children announced through `send` (use it as the parent's ``send``)."""

    def __init__(
        self,
        service: SessionService,
        features: ClientFeatures,
        present_call: PresentCall | None,
        send: Send,
        parent: Presenter | None = None,
        asking: Callable[[str, str], bool] | None = None,
        views: Mapping[str, View] | None = None,
    ) -> None:
        """``parent``: the presenter of the prompt's session (it knows which call named each
        child it announces); ``asking(session_id, call_id)``: whether the client is being
        asked to allow that call (it may run: announced at once, the client's answer needs
        the stream to move on); ``views``: the sessions the client has open (a child it
        loaded while it runs is shown through its view, so each event once)."""
        self._service = service
        self._views = views
        self._parent = parent
        self._asking = asking
        self._unstarted: set[str] = set()
        self._features = features
        self._present_call = present_call
        self._send = send
        self._children: dict[str, _Child] = {}

    async def send(self, session_id: str, update: dict[str, Any]) -> None:
        """Send ``update``; start relaying a child it announces running, finish relaying a
        child before it is announced idle."""
        if update.get("sessionUpdate") != "subagent_update":
            await self._send(session_id, update)
            return
        child_id = update["sessionId"]
        state = (update.get("state") or {}).get("state")
        running = state == "running" and child_id not in self._children
        if running and not await self._started(session_id, child_id):
            self._unstarted.add(child_id)
            return
        if state == "idle":
            if child_id in self._unstarted:
                self._unstarted.discard(child_id)
                return
            await self.finish(child_id)
            update = await settled(self._service, update)
        await self._send(session_id, update)
        if state == "running" and child_id not in self._children:
            child = self._children[child_id] = _Child(
                Presenter(self._features, present_call=self._present_call)
            )
            child.task = asyncio.create_task(self._relay(child_id, child))

    async def finish(self, child_id: str) -> None:
        """Send what is left of a child's log and stop relaying it."""
        child = self._children.pop(child_id, None)
        if child is None or child.task is None:
            return
        child.stop.set()
        child.wake.set()
        await child.task

    async def aclose(self) -> None:
        """Finish every child still relayed."""
        for child_id in list(self._children):
            await self.finish(child_id)

    def _call_of(self, child_id: str) -> tuple[str, int] | None:
        presenters = [c.presenter for c in self._children.values()]
        for presenter in [self._parent, *presenters]:
            call = None if presenter is None else presenter.subagent_call(child_id)
            if call is not None:
                return call
        return None

    async def _exists(self, session_id: str, child_id: str) -> bool:
        """Whether ``child_id`` exists as a child of ``session_id`` (a session of that id
        with another parent is not the call's)."""
        service = self._service
        if child_id in service.live_ids():
            return service.get(child_id).header.parent_session == session_id
        try:
            header = await service.store.header(child_id)
        except TodoSessionsError:
            return False
        return header.parent_session == session_id

    async def _started(self, session_id: str, child_id: str) -> bool:
        """Whether the call announcing ``child_id`` on ``session_id`` made it: waits until
        the child exists or the call's ``tool/result`` is logged."""
        call = self._call_of(child_id)
        if call is None:
            return True
        call_id, seq = call
        while not await self._exists(session_id, child_id):
            events = await self._events(session_id, seq)
            if any(_closes(e, call_id) for e in events):
                return await self._exists(session_id, child_id)
            if self._asking is not None and self._asking(session_id, call_id):
                return True
            await asyncio.sleep(_POLL)
        return True

    async def _relay(self, child_id: str, child: _Child) -> None:
        unsubscribe: Callable[[], None] | None = None
        try:
            while True:
                if unsubscribe is None and child_id in self._service.live_ids():
                    unsubscribe = self._service.get(child_id).subscribe(
                        lambda _event: child.wake.set()
                    )
                stopping = child.stop.is_set()
                await self._drain(child_id, child)
                if stopping:
                    return
                with contextlib.suppress(TimeoutError):  # not `wait_for`: `wakeups.polling`
                    async with asyncio.timeout(_POLL):
                        await child.wake.wait()
                child.wake.clear()
        finally:
            if unsubscribe is not None:
                unsubscribe()

    async def _drain(self, child_id: str, child: _Child) -> None:
        view = None if self._views is None else self._views.get(child_id)
        if view is not None:  # the client opened the child: what its view has not shown

            async def send(update: dict[str, Any]) -> None:
                await self.send(child_id, update)

            async with view.lock:
                await view.catch_up(self._service, child_id, send, None)
            return
        for event in await self._events(child_id, child.next_seq):
            child.next_seq = event.seq + 1
            for update in child.presenter.feed(event):
                await self.send(child_id, update)

    async def _events(self, child_id: str, from_seq: int) -> list[SessionEvent]:
        """The child's events from ``from_seq``: held by the live session, else stored."""
        return await events_from(self._service, child_id, from_seq)


async def settled(service: SessionService, update: dict[str, Any]) -> dict[str, Any]:
    """``update``, or, when it announces a child idle ``cancelled``, the idle state the
    child's own log says (`child_idle`: a child that completed before its call was cancelled
    or repaired is ``end_turn``); unchanged while the child's last turn is open."""
    state = update.get("state") if update.get("sessionUpdate") == "subagent_update" else None
    if not isinstance(state, dict) or state.get("stopReason") != "cancelled":
        return update
    child_id = update["sessionId"]
    try:
        if child_id in service.live_ids():
            await service.flush(child_id)
        last = await service.store.latest_event(child_id, TURN_START, TURN_END)
    except TodoSessionsError:  # gone
        return update
    idle = child_idle(last)
    return update if idle is None else {**update, "state": idle}


def _closes(event: SessionEvent, call_id: str) -> bool:
    """Whether ``event`` is the result of call ``call_id`` or the end of its turn."""
    if event.type == TURN_END:
        return True
    if event.type != TOOL_RESULT:
        return False
    source = (event.data.get("message") or {}).get("source") or {}
    return source.get("callId") == call_id
