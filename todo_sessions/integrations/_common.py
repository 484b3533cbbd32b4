"""What both SDK adapters share: opening the store, the state of a mapped log, event building.

An adapter keeps each SDK record whole in one event and maps what it understands onto the
typed surface events after it (docs/format.md, "SDK sessions"). `LogState` is the fold of a
stored log that the mapping needs: the core's fold (`LiveState`: the next seq, the open turn
and step, the open turn's tool calls, the surface) and the tags and metadata. It advances over
every event, the adapter's own and any other writer's (a `turn/end` that crash repair
appended, a `session/meta` of the CLI), so an adapter opened in a new process picks a session
up where the log is.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import datetime
from typing import Any, Self

from ..core.checkpoint import LiveState
from ..core.envelope import SessionEvent
from ..core.meta import SessionMeta, batch_change
from ..core.types import SESSION_META, STEP_END, STEP_START, TOOL_RESULT, TURN_END, TURN_START
from ..store.results import SessionSummary
from ..store.store import SessionStore

__all__ = ["LogState", "StoreHandle", "iso_ms", "list_all", "now_ms"]

MAX_TRIES = 20
"""Appends lost to another writer are recomputed on the new log this many times."""


def now_ms() -> int:
    return int(time.time() * 1000)


def iso_ms(value: Any, default: int) -> int:
    """Epoch ms of an ISO 8601 timestamp (``2024-01-01T00:00:00.000Z``), else ``default``."""
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            return default
    return default


class StoreHandle:
    """A `SessionStore` passed in (left open) or opened from a URL or path (closed by us)."""

    def __init__(self, store_or_url: SessionStore | str | os.PathLike[str]) -> None:
        if isinstance(store_or_url, SessionStore):
            self.store, self.owned = store_or_url, False
        elif isinstance(store_or_url, str | os.PathLike):
            self.store, self.owned = SessionStore(store_or_url), True
        else:
            raise TypeError(
                "expected a todo_sessions.SessionStore, a database URL or a path, got "
                f"{type(store_or_url).__name__}"
            )

    async def aclose(self) -> None:
        if self.owned:
            await self.store.aclose()


async def list_all(store: SessionStore, **filters: Any) -> AsyncIterator[SessionSummary]:
    """Every session `SessionStore.list` finds with ``filters``, page by page."""
    before: SessionSummary | None = None
    while True:
        page = await store.list(limit=500, before=before, **filters)
        for summary in page:
            yield summary
        if len(page) < 500:
            return
        before = page[-1]


class LogState:
    """The fold of a stored log that mapping needs (see the module docstring): the core's own
    fold of a log (`LiveState`, advanced leniently and without messages: turn/step structure,
    the surface) and the session's projected tags and metadata (`core.meta`)."""

    def __init__(self) -> None:
        self.live = LiveState.empty(messages=False)
        self.meta = SessionMeta()

    @property
    def next_seq(self) -> int:
        return self.live.next_seq

    @property
    def open_turn(self) -> int | None:
        return self.live.structure.open_turn

    @property
    def last_turn(self) -> int:
        return self.live.structure.last_turn

    @property
    def open_step(self) -> int | None:
        return self.live.structure.open_step

    @property
    def last_step(self) -> int:
        return self.live.structure.last_step

    @property
    def surface(self) -> tuple[int, ...]:
        """The seqs on the surface, in surface order."""
        return self.live.surface.seqs

    @property
    def tags(self) -> tuple[str, ...]:
        return self.meta.tags

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.meta.metadata

    def call_place(self, call_id: str) -> tuple[int, int] | None:
        """``(turn, step)`` of the open turn's tool call ``call_id`` (None: no such call)."""
        return self.live.structure.call_place(call_id)

    def advance(self, event: SessionEvent) -> None:
        self.live.advance(event)
        if event.type == SESSION_META:
            self.meta = self.meta.apply(batch_change((event,)))

    def copy(self) -> Self:
        """A copy to build a batch on (containers copied, their values shared: events'
        payloads are never changed)."""
        twin = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, list | dict | set):
                setattr(twin, name, value.copy())
        twin.live = self.live.copy()
        return twin

    def advance_all(self, events: Iterable[SessionEvent]) -> None:
        for event in events:
            self.advance(event)


class Batch:
    """Events being built at the seqs after a `LogState`, advancing it as they are added."""

    def __init__(self, state: LogState, time_ms: int) -> None:
        self.state = state
        self.time = time_ms
        self.events: list[SessionEvent] = []

    def add(
        self,
        type: str,
        data: Any,
        *,
        surface: bool = False,
        replace: tuple[int, int, list[int]] | None = None,
        ignorable: bool = False,
    ) -> SessionEvent:
        seq = self.state.next_seq
        kwargs: dict[str, Any] = {}
        if replace is not None:
            start, end, removed = replace
            kwargs = {
                "surface_op": {"op": "replace", "start": start, "end": end},
                "source_event_seqs": removed,
            }
        elif surface:
            kwargs = {"surface_op": "append"}
        event = SessionEvent(type, seq, self.time, data, ignorable=ignorable, **kwargs)
        self.events.append(event)
        self.state.advance(event)
        return event

    def ensure_turn(self) -> int:
        """The open turn, opening the next one when none is."""
        if self.state.open_turn is None:
            self.add(TURN_START, {"turn": self.state.last_turn + 1})
        assert self.state.open_turn is not None
        return self.state.open_turn

    def new_turn(self) -> int:
        """Close the open turn (completed) and open the next one."""
        self.close_step()
        if self.state.open_turn is not None:
            self.add(TURN_END, {"turn": self.state.open_turn, "reason": {"kind": "completed"}})
        return self.ensure_turn()

    def open_step(self) -> tuple[int, int]:
        """A new step in the open turn (opening a turn when none is)."""
        turn = self.ensure_turn()
        self.close_step()
        step = self.state.last_step + 1
        self.add(STEP_START, {"turn": turn, "step": step})
        return turn, step

    def close_step(self) -> None:
        if self.state.open_step is not None and self.state.open_turn is not None:
            self.add(STEP_END, {"turn": self.state.open_turn, "step": self.state.open_step})

    def tool_result(
        self, call_id: str, blocks: list[dict[str, Any]], is_error: bool, message_id: str
    ) -> None:
        """A ``tool/result`` answering ``call_id`` (its turn and step when the call is known)."""
        turn, step = self.state.call_place(call_id) or (self.ensure_turn(), 1)
        if self.state.open_turn is None:
            turn = self.ensure_turn()
        block: dict[str, Any] = {"type": "tool-result", "toolCallId": call_id, "content": blocks}
        if is_error:
            block["isError"] = True
        message = {
            "id": message_id,
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [block],
        }
        self.add(TOOL_RESULT, {"turn": turn, "step": step, "message": message}, surface=True)
