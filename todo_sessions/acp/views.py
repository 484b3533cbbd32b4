"""What a client was shown of each session it has open (`View`), and showing it the rest.

Every session the client has open (new, loaded, resumed, prompted) has a view: its
`Presenter` (fed every event shown so far, in log order) and ``next_seq``, the seq of the
first event not shown yet. Whoever appended an event (a turn this agent runs, the host
program that embeds the agent calling `Session.compact` between prompts, another process on
the same store, the crash repair), it is shown once, in log order, by one of:

- the running prompt (`todo_sessions.acp.prompting.TurnForwarder`), which holds the view's
  ``lock`` from before its first update to after its last, catching up first and last;
- `View.catch_up`, called when the session's follower (`todo_sessions.acp.following`)
  sees an event the view has not shown (as it lands: within the follow interval of being
  stored; a live session here is stored by the service's flush timer) and before anything
  else a prompt or a ``session/load`` sends on the session.

A follower that finds the lock held marks the view (``missed``): the holder catches up
again before it lets the lock go, so nothing stored meanwhile waits for the next event.
What catching up sends is what a replay of the same events sends (the client's own prompt
included, as a replay has it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from .._service import SessionService
from ..core.envelope import SessionEvent
from ..errors import TodoSessionsError
from .presenter import Presenter
from .usage import UsageTally

__all__ = ["View", "events_from"]

Send = Callable[[dict[str, Any]], Awaitable[None]]
"""``send(wire_update)``: one ``session/update`` on the view's session."""


async def events_from(
    service: SessionService, session_id: str, from_seq: int
) -> list[SessionEvent]:
    """The session's events from ``from_seq``: held by the live session when this service
    has it live (including those not flushed yet), else stored; none for a session that does
    not exist (yet, or any more)."""
    if session_id in service.live_ids():
        session = service.get(session_id)
        if from_seq >= session.first_held_seq:
            return session.events_from(from_seq)
        await service.flush(session_id)
    try:
        return await service.store.read_from(session_id, from_seq)
    except TodoSessionsError:  # not created yet, or gone
        return []


class View:
    """What the client was shown of one session (see the module)."""

    __slots__ = ("lock", "missed", "next_seq", "presenter")

    def __init__(self, presenter: Presenter, next_seq: int) -> None:
        self.presenter = presenter
        self.next_seq = next_seq
        """The seq of the first event not shown (nor fed to ``presenter``)."""
        self.lock = asyncio.Lock()
        """Held by whoever shows events of the session (a prompt, a replay, a catch-up)."""
        self.missed = False
        """Set by a follower that found the lock held: its holder catches up again."""

    async def show(
        self, event: SessionEvent, send: Send, tally: UsageTally | None, *, echo: bool = True
    ) -> None:
        """Feed ``event`` (the next one) and send its updates (none with ``echo`` false:
        the client's own prompt)."""
        if tally is not None:
            tally.feed(event)
        updates = self.presenter.feed(event)
        self.next_seq = event.seq + 1
        if echo:
            for update in updates:
                await send(update)

    async def catch_up(
        self,
        service: SessionService,
        session_id: str,
        send: Send,
        tally: UsageTally | None,
    ) -> None:
        """Show every event of the session from ``next_seq`` on, until none is left and no
        follower missed one meanwhile (call it holding ``lock``)."""
        while True:
            self.missed = False
            events = await events_from(service, session_id, self.next_seq)
            for event in events:
                if event.seq >= self.next_seq:
                    await self.show(event, send, tally)
            if not events and not self.missed:
                return
