"""`AgentLoop`: one user request through the model and the tools, recorded as events.

See docs/design.md, "Agent loop and tools", and docs/format.md, "Turns and steps".

A turn is ``turn/start``, the ``user/message``, then steps: ``step/start``, the model's
``assistant/chunk`` stream and its ``assistant/message`` (citing the chunks), then for each tool
call a ``tool/call``, the tool, and a ``tool/result`` (citing the call), then ``step/end``;
repeated while the model asks for tools (up to ``max_steps``), then ``turn/end``.

The model is shown exactly ``session.derive_messages()``. Checkpoints (``checkpoint(name)``) let
a persistence layer flush: ``"before-model"`` before each model call, ``"before-tool"`` after a
``tool/call`` and before the tool body runs, ``"turn-end"`` after ``turn/end``.

With a `CompactionPolicy`, the loop compacts before a model call whose history passes the
policy's share of the context window (docs/format.md, "Compaction"): it asks the model for a
summary of the older turns, through the same `Model` protocol, and `Session.compact` replaces
them with it (the todo list rides along in the summary message). A summarisation that fails or
returns nothing is recorded as a failed attempt and the turn goes on with its history intact.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.catalog import validate_event
from ..core.compaction import (
    estimate_tokens,
    failed_compaction,
    is_summary_message,
    span_ending_before_turns,
)
from ..core.envelope import SessionEvent
from ..core.messages import MessageSource, TextBlock, UserMessage
from ..redact import redact
from ..session import Session
from .model import Finish, Model, ReasoningDelta, TextDelta, ToolCallDelta, content_from_deltas
from .requests import RequestConfig, last_config
from .tools.base import ToolContext, ToolResult
from .tools.registry import ToolRegistry

__all__ = ["AgentLoop", "Checkpoint", "CompactionPolicy", "TurnOutcome"]

logger = logging.getLogger("todo_sessions.harness")

Checkpoint = Callable[[str], Awaitable[None]]

CANCELLED_ERROR = {"name": "ToolCancelledError", "code": "TOOL_CANCELLED"}
TOOL_ERROR = {"name": "ToolError", "code": "TOOL_ERROR"}
NOT_STARTED_ERROR = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How a turn ended: ``reason`` is the ``turn/end`` kind."""

    turn: int
    reason: str
    steps: int
    text: str
    """The text of the last assistant message."""


SUMMARY_INSTRUCTIONS = (
    "Summarise the conversation above for your own later use: it will be replaced by your "
    "summary. Keep what the task is, what was decided and why, what was done (files, commands, "
    "results) and what is left to do. Write plain text, no preamble."
)


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When the agent loop compacts (docs/format.md, "Compaction").

    Before a model call, the history's size (the input tokens the provider reported for the
    last request; else an estimate, its JSON length / 4) is compared with ``threshold`` times
    the context window (``context_window``, else the model's ``context_window`` attribute).
    Past it, the turns before the ``keep_turns`` latest user prompts are summarised by the
    model (``instructions`` closes the summarisation request) and replaced by the summary.
    """

    threshold: float = 0.8
    context_window: int | None = None
    keep_turns: int = 1
    instructions: str = SUMMARY_INSTRUCTIONS

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1:
            raise ValueError("threshold must be a share of the context window, in (0, 1]")
        if self.keep_turns < 1:
            raise ValueError("keep_turns must be >= 1")
        if self.context_window is not None and self.context_window < 1:
            raise ValueError("context_window must be >= 1")
        if not self.instructions.strip():
            raise ValueError("instructions must not be empty")


def _input_tokens(usage: dict[str, Any] | None) -> int | None:
    """The input tokens a provider's usage reports (cached input counted), or None."""
    if not usage:
        return None
    total = None
    for key in (
        "inputTokens",
        "input_tokens",
        "prompt_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    ):
        value = usage.get(key)
        if type(value) is int and value >= 0:
            total = (total or 0) + value
    return total


async def _no_checkpoint(name: str) -> None:
    return None


class _Aborted(Exception):
    """The turn was cancelled through `AgentLoop.cancel`."""


class AgentLoop:
    """Drives turns of ``session`` with ``model`` and the ``tools`` registry."""

    def __init__(
        self,
        session: Session,
        model: Model,
        tools: ToolRegistry,
        *,
        max_steps: int = 20,
        checkpoint: Checkpoint | None = None,
        record_requests: bool = False,
        model_retries: int = 2,
        retry_delay: float = 1.0,
        compaction: CompactionPolicy | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be >= 1")
        if model_retries < 0:
            raise ValueError("model_retries must be >= 0")
        self.session = session
        self.model = model
        self.tools = tools
        self.max_steps = max_steps
        self.record_requests = record_requests
        """Append a ``request/header`` before a model call when provider, model, system prompt
        or tools changed since the last one recorded (see `todo_sessions.harness.requests`)."""
        self.model_retries = model_retries
        """Retries of a model call that failed transiently (an exception with ``retryable``
        true, e.g. `ModelRequestError`) before anything was streamed."""
        self.retry_delay = retry_delay
        """Seconds before the first retry; doubled for each next one."""
        self.compaction = compaction
        """When to compact before a model call (None: never)."""
        self._window = 0
        if compaction is not None:
            window = compaction.context_window or getattr(model, "context_window", None)
            if type(window) is not int or window < 1:
                raise ValueError(
                    "CompactionPolicy needs a context window: set context_window, or use a "
                    "model with a context_window attribute"
                )
            self._window = window
        self._last_input: int | None = None
        """The input tokens of the last model request (None: unknown, or compacted since)."""
        self._checkpoint = checkpoint or _no_checkpoint
        self._cancel = asyncio.Event()
        self._recorded: RequestConfig | None = None
        self._recorded_known = False

    def cancel(self) -> None:
        """Abort the running turn: the current model stream or tool stops, the turn ends
        ``aborted``, and `run_turn` returns."""
        self._cancel.set()

    async def run_turn(self, prompt: str | Sequence[dict[str, Any]]) -> TurnOutcome:
        """Run one turn for ``prompt`` (text, or content blocks) and return how it ended."""
        if self.session.open_turn is not None:
            raise RuntimeError(
                f"session {self.session.id!r} already has turn {self.session.open_turn} open"
            )
        self._cancel.clear()
        turn = _last_turn(self.session) + 1
        append = self.session.append
        content = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else list(prompt)
        user = {
            "id": f"{self.session.id}:u{turn}",
            "role": "user",
            "content": content,
            "source": {"kind": "user"},
        }
        # Refuse a bad prompt before anything is appended, so no turn is left open.
        validate_event(SessionEvent("user/message", 0, 0, user, surface_op="append"))
        append("turn/start", {"turn": turn})
        append("user/message", user, surface_op="append")
        step = 0
        text = ""
        reason: dict[str, Any] = {"kind": "completed"}
        try:
            while True:
                if step == self.max_steps:
                    reason = {
                        "kind": "error",
                        "error": {"message": f"stopped after {step} steps", "code": "MAX_STEPS"},
                    }
                    break
                step += 1
                append("step/start", {"turn": turn, "step": step})
                text, calls, finish = await self._model_step(turn, step)
                for batch in self._batches(calls):
                    if len(batch) == 1:
                        await self._tool_step(turn, step, batch[0])
                    else:
                        await self._tool_batch(turn, step, batch)
                append("step/end", {"turn": turn, "step": step})
                if finish.reason == "max-tokens":
                    reason = {"kind": "max-tokens"}
                    break
                if not calls:
                    break
        except _Aborted:
            self._close_open(turn, step, "cancelled by the user")
            reason = {"kind": "aborted"}
        except asyncio.CancelledError:
            self._close_open(turn, step, "cancelled")
            append("turn/end", {"turn": turn, "reason": {"kind": "aborted"}})
            await asyncio.shield(self._checkpoint("turn-end"))
            raise
        except Exception as exc:
            logger.exception("turn %d of session %r failed", turn, self.session.id)
            message = redact(str(exc)) or type(exc).__name__  # adapters redact; so does this
            self._close_open(turn, step, f"the turn failed: {message}")
            error: dict[str, Any] = {"message": message, "code": type(exc).__name__}
            status = getattr(exc, "status", None)
            if isinstance(status, int) and not isinstance(status, bool):
                error["status"] = status
            reason = {"kind": "error", "error": error}
        append("turn/end", {"turn": turn, "reason": reason})
        await self._checkpoint("turn-end")
        return TurnOutcome(turn, reason["kind"], step, text)

    # -- one model call -------------------------------------------------------------------------

    async def _model_step(self, turn: int, step: int) -> tuple[str, list[ToolCallDelta], Finish]:
        if self.compaction is not None:
            await self._maybe_compact(self.compaction)
        await self._checkpoint("before-model")
        self._check_cancel()
        definitions = self.tools.definitions()
        if self.record_requests:
            self._record_request(definitions)
        messages = self.session.derive_messages()
        chunk_seqs: list[int] = []
        deltas: list[TextDelta | ReasoningDelta | ToolCallDelta] = []
        finish = Finish()
        attempt = 0
        while True:
            attempt += 1
            stream = self.model.stream(messages, definitions)
            try:
                async for delta in _until_cancelled(stream, self._cancel):
                    if isinstance(delta, Finish):
                        finish = delta
                        continue
                    chunk = _chunk(delta, len(chunk_seqs))
                    chunk_seqs.append(
                        self.session.append(
                            "assistant/chunk", {"turn": turn, "step": step, "chunk": chunk}
                        ).seq
                    )
                    deltas.append(delta)
            except (_Aborted, Exception) as exc:
                if (
                    not chunk_seqs
                    and not isinstance(exc, _Aborted)
                    and getattr(exc, "retryable", False) is True
                    and attempt <= self.model_retries
                ):
                    delay = self.retry_delay * 2 ** (attempt - 1)
                    logger.warning(
                        "model call failed (%s); retry %d of %d in %.1fs",
                        exc,
                        attempt,
                        self.model_retries,
                        delay,
                    )
                    await self._pause(delay)
                    continue
                # Cancelled, or the model failed mid-stream (a dropped connection): keep what
                # was streamed, without the half-requested tools.
                if chunk_seqs:
                    content = content_from_deltas(deltas, with_calls=False)
                    self._assistant(turn, step, content, chunk_seqs, None, interrupted=True)
                raise
            break
        self._assistant(turn, step, content_from_deltas(deltas), chunk_seqs, finish.usage)
        self._last_input = _input_tokens(finish.usage)
        text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
        return text, [d for d in deltas if isinstance(d, ToolCallDelta)], finish

    # -- compaction -----------------------------------------------------------------------------

    async def _maybe_compact(self, policy: CompactionPolicy) -> None:
        """Compact when the history passes the policy's threshold (see `CompactionPolicy`)."""
        session = self.session
        measured = self._last_input
        tokens = measured if measured is not None else estimate_tokens(session.derive_messages())
        if tokens < policy.threshold * self._window:
            return
        surface = session.checkpoint_state().surface
        end = span_ending_before_turns(surface, policy.keep_turns)
        if end is None:
            return
        order = surface.seqs
        span = order[: order.index(end) + 1]
        if len(span) == 1 and is_summary_message(surface.node_message(span[0])):
            return  # only the last summary is older than the kept turns: nothing to gain
        shown = [m for m in map(surface.node_message, span) if m is not None]
        request = [
            *shown,
            UserMessage(
                id=f"{session.id}:compaction-request",
                role="user",
                content=[TextBlock(text=policy.instructions)],
                source=MessageSource(kind="compaction-request"),
            ),
        ]
        try:
            text, usage = await self._summarise(request)
            if not text.strip():
                raise ValueError("the model returned no summary")
            session.compact(
                text,
                end_seq=end,
                trigger="auto",
                tokens_before=tokens,
                call_record={
                    "provider": self.model.provider,
                    "model": self.model.model,
                    **({"usage": usage} if usage else {}),
                    "rawOutput": [{"type": "text", "text": text}],
                    "llmStreamCall": True,
                    "instructions": policy.instructions,
                },
            )
        except (_Aborted, asyncio.CancelledError):
            raise
        except Exception as exc:  # a failed summary never costs the turn or the history
            logger.warning(
                "session %r: compaction failed, the history stays as it is: %s",
                session.id,
                exc,
            )
            reason = str(exc) or type(exc).__name__
            session.append_all(
                failed_compaction(
                    session.checkpoint_state(), reason, trigger="auto", tokens_before=tokens
                )
            )
            return
        self._last_input = None

    async def _summarise(self, request: list[Any]) -> tuple[str, dict[str, Any] | None]:
        """The summary text the model streams for ``request`` (no tools offered)."""
        parts: list[str] = []
        usage: dict[str, Any] | None = None
        async for delta in _until_cancelled(self.model.stream(request, []), self._cancel):
            if isinstance(delta, TextDelta):
                parts.append(delta.text)
            elif isinstance(delta, Finish):
                usage = delta.usage
        return "".join(parts), usage

    async def _pause(self, seconds: float) -> None:
        """Sleep, but raise `_Aborted` at once when the turn is cancelled meanwhile."""
        try:
            await asyncio.wait_for(self._cancel.wait(), seconds)
        except TimeoutError:
            return
        raise _Aborted

    def _record_request(self, definitions: list[dict[str, Any]]) -> None:
        if not self._recorded_known:
            self._recorded = last_config(self.session.events)
            self._recorded_known = True
        config = RequestConfig(
            self.model.provider,
            self.model.model,
            getattr(self.model, "system", None),
            tuple(definitions),
        )
        if not config.same_as(self._recorded):
            reason = "initial" if self._recorded is None else "change"
            self.session.append("request/header", config.to_data(reason=reason))
            self._recorded = config

    def _assistant(
        self,
        turn: int,
        step: int,
        content: list[dict[str, Any]],
        chunk_seqs: list[int],
        usage: dict[str, Any] | None,
        *,
        interrupted: bool = False,
    ) -> None:
        data: dict[str, Any] = {
            "turn": turn,
            "step": step,
            "message": {
                "id": f"{self.session.id}:a{turn}.{step}",
                "role": "assistant",
                "content": content,
                "source": {
                    "kind": "model",
                    "provider": self.model.provider,
                    "model": self.model.model,
                },
            },
        }
        if usage:
            data["usage"] = usage
        if interrupted:
            data["interrupted"] = True
        self.session.append(
            "assistant/message", data, surface_op="append", source_event_seqs=chunk_seqs
        )

    # -- one tool call --------------------------------------------------------------------------

    async def _tool_step(self, turn: int, step: int, call: ToolCallDelta) -> None:
        self._check_cancel()
        event = self.session.append(
            "tool/call",
            {
                "turn": turn,
                "step": step,
                "callId": call.id,
                "name": call.name,
                "arguments": call.arguments,
            },
        )
        try:
            await self._checkpoint("before-tool")
        except Exception as exc:
            # The call is not durable: never run the tool (a crash now would leave no trace of
            # its side effects). Answer it as not run; the turn then ends with the error.
            why = f"not run: the call could not be recorded durably ({exc})"
            self._result(turn, step, call.id, event.seq, ToolResult.error(why), NOT_STARTED_ERROR)
            raise
        context = ToolContext(
            session=self.session, call_id=call.id, turn=turn, step=step, cancel=self._cancel
        )
        run = asyncio.ensure_future(self.tools.execute(call.name, call.arguments, context))
        stop = asyncio.ensure_future(self._cancel.wait())
        try:
            await asyncio.wait({run, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not run.done():
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
            self._result(
                turn,
                step,
                call.id,
                event.seq,
                ToolResult.error("cancelled by the user"),
                CANCELLED_ERROR,
            )
            raise _Aborted
        result = run.result()
        self._result(
            turn, step, call.id, event.seq, result, TOOL_ERROR if result.is_error else None
        )

    def _batches(self, calls: list[ToolCallDelta]) -> list[list[ToolCallDelta]]:
        """The step's calls in order, consecutive calls of concurrency-safe tools (a tool
        attribute ``concurrency_safe = True``) grouped to run together."""
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

    async def _tool_batch(self, turn: int, step: int, calls: list[ToolCallDelta]) -> None:
        """Run concurrency-safe calls together: every ``tool/call`` first (in call order),
        one flush, the tools at once, then the results in call order."""
        self._check_cancel()
        seqs = [
            self.session.append(
                "tool/call",
                {
                    "turn": turn,
                    "step": step,
                    "callId": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                },
            ).seq
            for call in calls
        ]
        try:
            await self._checkpoint("before-tool")
        except Exception as exc:
            why = f"not run: the call could not be recorded durably ({exc})"
            for call, seq in zip(calls, seqs, strict=True):
                self._result(turn, step, call.id, seq, ToolResult.error(why), NOT_STARTED_ERROR)
            raise
        runs = [
            asyncio.ensure_future(
                self.tools.execute(
                    call.name,
                    call.arguments,
                    ToolContext(
                        session=self.session,
                        call_id=call.id,
                        turn=turn,
                        step=step,
                        cancel=self._cancel,
                    ),
                )
            )
            for call in calls
        ]
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
        for call, seq, run in zip(calls, seqs, runs, strict=True):
            error: dict[str, str] | None
            if run.cancelled():
                result, error = ToolResult.error("cancelled by the user"), CANCELLED_ERROR
            else:
                result = run.result()
                error = TOOL_ERROR if result.is_error else None
            self._result(turn, step, call.id, seq, result, error)
        if pending:
            raise _Aborted

    def _result(
        self,
        turn: int,
        step: int,
        call_id: str,
        call_seq: int,
        result: ToolResult,
        error: dict[str, str] | None,
    ) -> None:
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
        self.session.append("tool/result", data, surface_op="append", source_event_seqs=[call_seq])

    # -- closing an aborted turn ----------------------------------------------------------------

    def _check_cancel(self) -> None:
        if self._cancel.is_set():
            raise _Aborted

    def _close_open(self, turn: int, step: int, why: str) -> None:
        """Answer every unanswered call of the turn and close the open step, so the derived
        history stays valid for a provider."""
        for call in self.session.unanswered_calls():
            if call.call_seq is not None:
                self._result(
                    turn,
                    call.step,
                    call.call_id,
                    call.call_seq,
                    ToolResult.error(why),
                    CANCELLED_ERROR,
                )
            else:
                data = {
                    "turn": turn,
                    "step": call.step,
                    "message": {
                        "id": f"{self.session.id}:n{call.block_seq}:{call.call_id}",
                        "role": "user",
                        "source": {"kind": "tool", "callId": call.call_id},
                        "content": [
                            {
                                "type": "tool-result",
                                "toolCallId": call.call_id,
                                "content": [{"type": "text", "text": f"not run: {why}"}],
                                "isError": True,
                            }
                        ],
                    },
                    "error": {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"},
                }
                self.session.append("tool/result", data, surface_op="append")
        if self.session.open_step is not None:
            self.session.append("step/end", {"turn": turn, "step": self.session.open_step})


def _last_turn(session: Session) -> int:
    return session.last_turn  # from the folded state: the session may not hold old events


def _chunk(delta: TextDelta | ReasoningDelta | ToolCallDelta, index: int) -> dict[str, Any]:
    if isinstance(delta, TextDelta):
        return {"type": "text-delta", "index": index, "text": delta.text}
    if isinstance(delta, ReasoningDelta):
        chunk: dict[str, Any] = {"type": "reasoning-delta", "index": index, "text": delta.text}
        if delta.provider_data is not None:
            chunk["providerData"] = delta.provider_data
        return chunk
    return {
        "type": "tool-call",
        "index": index,
        "id": delta.id,
        "name": delta.name,
        "arguments": delta.arguments,
    }


async def _until_cancelled(stream: Any, cancel: asyncio.Event) -> Any:
    """Iterate ``stream`` but raise `_Aborted` as soon as ``cancel`` is set."""
    iterator = stream.__aiter__()
    stop = asyncio.ensure_future(cancel.wait())
    try:
        while True:
            nxt = asyncio.ensure_future(iterator.__anext__())
            await asyncio.wait({nxt, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not nxt.done():
                nxt.cancel()
                await asyncio.gather(nxt, return_exceptions=True)
                raise _Aborted
            try:
                yield nxt.result()
            except StopAsyncIteration:
                return
    finally:
        stop.cancel()
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
