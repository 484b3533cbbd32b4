"""The tool calls of one step, run and recorded: `ToolRunner` (docs/design.md, "Agent loop
and tools").

For each call a ``tool/call`` is appended (with the extra keys of the tool's ``call_fields``,
when it has one), the ``"before-tool"`` checkpoint flushes it, the
tool runs, and a ``tool/result`` citing the call is appended. Consecutive calls of
concurrency-safe tools (a tool attribute ``concurrency_safe = True``) run together: every
``tool/call`` first (in call order), one flush, the tools at once, then the results in call
order. A cancel answers every unfinished call ``TOOL_CANCELLED``; `close_open` answers what a
failed or cancelled turn left unanswered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .._session import Session
from ..core.types import STEP_END, TOOL_CALL, TOOL_RESULT
from .cancellation import Aborted
from .deltas import ToolCallDelta
from .tools.base import ToolContext, ToolResult
from .tools.registry import ToolRegistry

__all__ = ["CANCELLED_ERROR", "NOT_STARTED_ERROR", "TOOL_ERROR", "Checkpoint", "ToolRunner"]

Checkpoint = Callable[[str], Awaitable[None]]

CANCELLED_ERROR = {"name": "ToolCancelledError", "code": "TOOL_CANCELLED"}
TOOL_ERROR = {"name": "ToolError", "code": "TOOL_ERROR"}
NOT_STARTED_ERROR = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}


class ToolRunner:
    """Runs the tool calls of ``session``'s steps with ``tools``; ``cancel`` stops them."""

    def __init__(
        self,
        session: Session,
        tools: ToolRegistry,
        cancel: asyncio.Event,
        checkpoint: Checkpoint,
        model: Callable[[], Any] | None = None,
    ) -> None:
        self.session = session
        self.tools = tools
        self._cancel = cancel
        self._checkpoint = checkpoint
        self._model = model
        """The calling loop's current model (passed to the tools as ``ToolContext.model``)."""

    async def run(self, turn: int, step: int, calls: list[ToolCallDelta]) -> None:
        """Run the step's calls in order, in batches (see the module docstring)."""
        for batch in self._batches(calls):
            await self._run_batch(turn, step, batch)

    def _batches(self, calls: list[ToolCallDelta]) -> list[list[ToolCallDelta]]:
        batches: list[list[ToolCallDelta]] = []
        for call in calls:
            if self._safe(call) and batches and self._safe(batches[-1][0]):
                batches[-1].append(call)
            else:
                batches.append([call])
        return batches

    def _safe(self, call: ToolCallDelta) -> bool:
        tool = self.tools.get(call.name)
        return tool is not None and getattr(tool, "concurrency_safe", False) is True

    async def _run_batch(self, turn: int, step: int, calls: list[ToolCallDelta]) -> None:
        """Every ``tool/call`` of the batch, one flush, the tools at once, the results in
        call order; `Aborted` once they are recorded when the turn was cancelled."""
        if self._cancel.is_set():
            raise Aborted
        seqs = [self._call(turn, step, call) for call in calls]
        try:
            await self._checkpoint("before-tool")
        except Exception as exc:
            # The calls are not durable: never run the tools (a crash now would leave no trace
            # of their side effects). Answer them as not run; the turn then ends with the error.
            why = f"not run: the call could not be recorded durably ({exc})"
            for call, seq in zip(calls, seqs, strict=True):
                self.result(turn, step, call.id, seq, ToolResult.error(why), NOT_STARTED_ERROR)
            raise
        runs = [asyncio.ensure_future(self._execute(turn, step, call)) for call in calls]
        pending = await self._until_done_or_cancelled(runs)
        for call, seq, run in zip(calls, seqs, runs, strict=True):
            error: dict[str, str] | None
            if run in pending or run.cancelled():
                result, error = ToolResult.error("cancelled by the user"), CANCELLED_ERROR
            else:
                result = run.result()
                error = TOOL_ERROR if result.is_error else None
            self.result(turn, step, call.id, seq, result, error)
        if pending:
            raise Aborted

    def _call(self, turn: int, step: int, call: ToolCallDelta) -> int:
        data = {
            "turn": turn,
            "step": step,
            "callId": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }
        tool = self.tools.get(call.name)
        fields = getattr(tool, "call_fields", None) if tool is not None else None
        if fields is not None:
            data.update(fields(self.session, call.id, call.arguments) or {})
        return self.session.append(TOOL_CALL, data).seq

    def _execute(self, turn: int, step: int, call: ToolCallDelta) -> Awaitable[ToolResult]:
        context = ToolContext(
            session=self.session,
            call_id=call.id,
            turn=turn,
            step=step,
            cancel=self._cancel,
            model=None if self._model is None else self._model(),
        )
        return self.tools.execute(call.name, call.arguments, context)

    async def _until_done_or_cancelled(
        self, runs: Sequence[asyncio.Future[ToolResult]]
    ) -> set[asyncio.Future[Any]]:
        """Wait for ``runs``; on a cancel, cancel the unfinished ones. Those, cancelled."""
        stop = asyncio.ensure_future(self._cancel.wait())
        pending: set[asyncio.Future[Any]] = set(runs)
        try:
            while pending and not stop.done():
                _, pending = await asyncio.wait(
                    pending | {stop}, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(stop)
        finally:
            stop.cancel()
        for run in pending:
            run.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        return pending

    def result(
        self,
        turn: int,
        step: int,
        call_id: str,
        call_seq: int,
        result: ToolResult,
        error: dict[str, str] | None,
    ) -> None:
        """Append the ``tool/result`` of call ``call_id`` (its ``tool/call`` at ``call_seq``)."""
        block: dict[str, Any] = {
            "type": "tool-result",
            "toolCallId": call_id,
            "content": result.content,
        }
        if result.is_error:
            block["isError"] = True
        data: dict[str, Any] = {
            "turn": turn,
            "step": step,
            "message": {
                "id": f"{self.session.id}:r{call_seq}",
                "role": "user",
                "source": {"kind": "tool", "callId": call_id},
                "content": [block],
            },
        }
        if error is not None:
            data["error"] = error
        if result.structured is not None:
            data["meta"] = {"structured": result.structured}
        self.session.append(TOOL_RESULT, data, surface_op="append", source_event_seqs=[call_seq])

    def close_open(self, turn: int, why: str) -> None:
        """Answer every unanswered call of the turn and close the open step, so the derived
        history stays valid for a provider."""
        for call in self.session.unanswered_calls():
            if call.call_seq is not None:
                error = ToolResult.error(why)
                self.result(turn, call.step, call.call_id, call.call_seq, error, CANCELLED_ERROR)
            else:
                self._not_started(turn, call.step, call.block_seq, call.call_id, why)
        if self.session.open_step is not None:
            self.session.append(STEP_END, {"turn": turn, "step": self.session.open_step})

    def _not_started(
        self, turn: int, step: int, block_seq: int | None, call_id: str, why: str
    ) -> None:
        """The result of a call the model asked for that never got its ``tool/call``."""
        data = {
            "turn": turn,
            "step": step,
            "message": {
                "id": f"{self.session.id}:n{block_seq}:{call_id}",
                "role": "user",
                "source": {"kind": "tool", "callId": call_id},
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": call_id,
                        "content": [{"type": "text", "text": f"not run: {why}"}],
                        "isError": True,
                    }
                ],
            },
            "error": NOT_STARTED_ERROR,
        }
        self.session.append(TOOL_RESULT, data, surface_op="append")
