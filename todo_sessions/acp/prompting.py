"""One ``session/prompt``: the client's prompt as content blocks, the turn's events streamed
to the client as they are appended (`TurnForwarder`), and the turn's end as a stop reason."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from .._session import Session
from ..core.envelope import SessionEvent
from ..core.types import TURN_END, USER_MESSAGE
from ..harness.loop import TurnOutcome
from . import _sdk
from .usage import UsageTally
from .views import View

__all__ = ["TurnForwarder", "prompt_blocks", "prompt_response"]

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]

_STOP_REASONS: dict[str, StopReason] = {
    "completed": "end_turn",
    "max-tokens": "max_tokens",
    "aborted": "cancelled",
}


def prompt_blocks(prompt: list[Any]) -> list[dict[str, Any]]:
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


def prompt_response(outcome: TurnOutcome, end: SessionEvent | None) -> _sdk.PromptResponse:
    """The answer to the prompt whose turn ended with ``outcome`` (``end``: its ``turn/end``).
    A failed turn is an ``internal_error`` with its message; too many steps,
    ``max_turn_requests``."""
    if outcome.reason == "error":
        reason = end.data.get("reason", {}) if end is not None else {}
        last = reason.get("error") or {}
        if last.get("code") == "MAX_STEPS":
            return _sdk.PromptResponse(stop_reason="max_turn_requests")
        raise _sdk.RequestError.internal_error({"message": last.get("message", "turn failed")})
    return _sdk.PromptResponse(stop_reason=_STOP_REASONS.get(outcome.reason, "end_turn"))


class TurnForwarder:
    """Sends ``session``'s events to the client while a turn runs, in log order, through
    ``view`` (and ``tally``, the usage, when known); the client's own prompt is not sent
    back, and an event the view has shown already is skipped. Used as ``async with``: on
    exit every event appended meanwhile has been sent."""

    def __init__(
        self,
        session: Session,
        view: View,
        tally: UsageTally | None,
        send: Callable[[dict[str, Any]], Awaitable[None]],
        *,
        before: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """``before``: awaited on entry, once subscribed and before the first event is sent
        (what it shows of the log, the forwarder skips)."""
        self.queue: asyncio.Queue[SessionEvent | None] = asyncio.Queue()
        """The events not yet sent (``join`` it to wait until the client was shown them)."""
        self.end: SessionEvent | None = None
        """The turn's ``turn/end``, once appended."""
        self._session = session
        self._view = view
        self._tally = tally
        self._send = send
        self._before = before
        self._unsubscribe: Callable[[], None] | None = None
        self._sending: asyncio.Task[None] | None = None

    def _forward(self, event: SessionEvent) -> None:
        self.queue.put_nowait(event)
        if event.type == TURN_END:
            self.end = event

    async def _sender(self) -> None:
        view = self._view
        while (event := await self.queue.get()) is not None:
            try:
                if event.seq >= view.next_seq:  # else shown by the catch-up before the turn
                    echo = event.type != USER_MESSAGE  # the client shows its own prompt
                    await view.show(event, self._send, self._tally, echo=echo)
            finally:
                self.queue.task_done()

    async def __aenter__(self) -> TurnForwarder:
        self._unsubscribe = self._session.subscribe(self._forward)
        if self._before is not None:
            try:
                await self._before()
            except BaseException:
                self._unsubscribe()
                raise
        self._sending = asyncio.create_task(self._sender())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.queue.put_nowait(None)
        if self._sending is not None:
            await self._sending
