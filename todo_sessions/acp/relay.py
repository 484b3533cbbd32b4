"""A running prompt's subagent sessions, streamed to a client that opted in (``subagents``).

When a parent's update stream announces a child (``subagent_update``, state running),
`ChildRelay` starts sending the child's own log on the child's session id, through a
`Presenter` of its own (so a child's plan is its own, and a grandchild is announced on the
child and relayed in turn). The child runs in this process (the ``subagent`` tool runs it on
the same service): its events are taken from the live session as they are appended, from the
store once it is no longer live. Before the announcement that the child is idle, everything
the child logged is sent. Announcement first, then the child's traffic, then idle: the order
``subagent_update`` asks for.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from .._service import SessionService
from ..core.envelope import SessionEvent
from ..errors import TodoSessionsError
from .capabilities import ClientFeatures
from .presenter import Presenter
from .shown import PresentCall

__all__ = ["ChildRelay"]

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
    ) -> None:
        self._service = service
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
        if state == "idle":
            await self.finish(child_id)
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
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(child.wake.wait(), _POLL)
                child.wake.clear()
        finally:
            if unsubscribe is not None:
                unsubscribe()

    async def _drain(self, child_id: str, child: _Child) -> None:
        for event in await self._events(child_id, child.next_seq):
            child.next_seq = event.seq + 1
            for update in child.presenter.feed(event):
                await self.send(child_id, update)

    async def _events(self, child_id: str, from_seq: int) -> list[SessionEvent]:
        """The child's events from ``from_seq``: held by the live session, else stored."""
        service = self._service
        if child_id in service.live_ids():
            session = service.get(child_id)
            if from_seq >= session.first_held_seq:
                return session.events_from(from_seq)
            await service.flush(child_id)
        try:
            return await service.store.read_from(child_id, from_seq)
        except TodoSessionsError:  # not created yet, or gone
            return []
