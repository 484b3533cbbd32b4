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
policy's share of the context window (`todo_sessions.harness.compaction`). The tools of a step
run in `todo_sessions.harness.tool_runs`. A model call that fails transiently before anything
streamed is retried by exactly one policy (`todo_sessions.harness.retry`): the model's own (an
adapter's ``retry``) or, for a model without one, the loop's ``model_retries``; never both.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from .._redact import redact
from .._session import Session
from ..core.catalog import validate_event
from ..core.envelope import SessionEvent
from ..core.messages import Message
from ..core.types import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from .cancellation import Aborted, until_cancelled
from .compaction import CompactionPolicy, compact_if_due, input_tokens
from .model import Finish, Model, ReasoningDelta, TextDelta, ToolCallDelta, content_from_deltas
from .requests import RequestConfig, last_config
from .retry import RetryPolicy, own_policy, retry_stream
from .tool_runs import Checkpoint, ToolRunner
from .tools.registry import ToolRegistry

__all__ = ["AgentLoop", "Checkpoint", "CompactionPolicy", "TurnOutcome"]

logger = logging.getLogger("todo_sessions.harness")


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How a turn ended: ``reason`` is the ``turn/end`` kind."""

    turn: int
    reason: str
    steps: int
    text: str
    """The text of the last assistant message."""


async def _no_checkpoint(name: str) -> None:
    return None


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
        true, e.g. `ModelRequestError`) before anything was streamed, for a model without a
        `RetryPolicy` of its own (an adapter retries its calls itself, with its ``retry``)."""
        self.retry_delay = retry_delay
        """Seconds before the first retry; doubled for each next one."""
        self.compaction = compaction
        """When to compact before a model call (None: never)."""
        self._retry: RetryPolicy | None = None
        if own_policy(model) is None:
            self._retry = RetryPolicy(
                attempts=model_retries + 1, base_delay=retry_delay, max_delay=math.inf, jitter=0
            )
        self._window = 0 if compaction is None else compaction.window_of(model)
        self._last_input: int | None = None
        """The input tokens of the last model request (None: unknown, or compacted since)."""
        self._checkpoint = checkpoint or _no_checkpoint
        self._cancel = asyncio.Event()
        self._runner = ToolRunner(
            session, tools, self._cancel, self._checkpoint, model=lambda: self.model
        )
        self._recorded: RequestConfig | None = None
        self._recorded_known = False
        self._step = 0
        """The step of the running turn (the last one, once it ended)."""

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
        turn = self.session.last_turn + 1  # from the folded state: old events may be gone
        self._open_turn(turn, prompt)
        self._step = 0
        text = ""
        reason: dict[str, Any] = {"kind": "completed"}
        try:
            text, reason = await self._steps(turn)
        except Aborted:
            self._runner.close_open(turn, "cancelled by the user")
            reason = {"kind": "aborted"}
        except asyncio.CancelledError:
            self._runner.close_open(turn, "cancelled")
            self.session.append(TURN_END, {"turn": turn, "reason": {"kind": "aborted"}})
            await asyncio.shield(self._checkpoint("turn-end"))
            raise
        except Exception as exc:
            reason = self._failed(turn, exc)
        self.session.append(TURN_END, {"turn": turn, "reason": reason})
        await self._checkpoint("turn-end")
        return TurnOutcome(turn, reason["kind"], self._step, text)

    def _open_turn(self, turn: int, prompt: str | Sequence[dict[str, Any]]) -> None:
        """Append ``turn/start`` and the ``user/message``; a bad prompt is refused before
        anything is appended, so no turn is left open."""
        content = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else list(prompt)
        user = {
            "id": f"{self.session.id}:u{turn}",
            "role": "user",
            "content": content,
            "source": {"kind": "user"},
        }
        validate_event(SessionEvent(USER_MESSAGE, 0, 0, user, surface_op="append"))
        self.session.append(TURN_START, {"turn": turn})
        self.session.append(USER_MESSAGE, user, surface_op="append")

    async def _steps(self, turn: int) -> tuple[str, dict[str, Any]]:
        """The turn's steps while the model asks for tools: the last text and the turn's end
        (``_step`` counts them, also when one raises)."""
        text = ""
        while self._step < self.max_steps:
            self._step += 1
            step = self._step
            self.session.append(STEP_START, {"turn": turn, "step": step})
            text, calls, finish = await self._model_step(turn, step)
            await self._runner.run(turn, step, calls)
            self.session.append(STEP_END, {"turn": turn, "step": step})
            if finish.reason == "max-tokens":
                return text, {"kind": "max-tokens"}
            if not calls:
                return text, {"kind": "completed"}
        error = {"message": f"stopped after {self._step} steps", "code": "MAX_STEPS"}
        return text, {"kind": "error", "error": error}

    def _failed(self, turn: int, exc: Exception) -> dict[str, Any]:
        """The ``turn/end`` reason of a turn that raised ``exc`` (its calls answered)."""
        logger.exception("turn %d of session %r failed", turn, self.session.id)
        message = redact(str(exc)) or type(exc).__name__  # adapters redact; so does this
        self._runner.close_open(turn, f"the turn failed: {message}")
        error: dict[str, Any] = {"message": message, "code": type(exc).__name__}
        status = getattr(exc, "status", None)
        if isinstance(status, int) and not isinstance(status, bool):
            error["status"] = status
        return {"kind": "error", "error": error}

    # -- one model call -------------------------------------------------------------------------

    def _stream(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> AsyncIterator[Any]:
        """One model call's deltas, stopped by a cancel. Retried by the loop's policy only
        when the model has none of its own (`todo_sessions.harness.retry`)."""
        if self._retry is None:
            stream = self.model.stream(messages, tools)
        else:
            stream = retry_stream(
                lambda _attempt: self.model.stream(messages, tools), self._retry, logger=logger
            )
        return until_cancelled(stream, self._cancel)

    async def _model_step(self, turn: int, step: int) -> tuple[str, list[ToolCallDelta], Finish]:
        if self.compaction is not None:
            await self._maybe_compact(self.compaction)
        await self._checkpoint("before-model")
        if self._cancel.is_set():
            raise Aborted
        definitions = self.tools.definitions()
        if self.record_requests:
            self._record_request(definitions)
        messages = self.session.derive_messages()
        chunk_seqs: list[int] = []
        deltas: list[TextDelta | ReasoningDelta | ToolCallDelta] = []
        finish = Finish()
        try:
            async for delta in self._stream(messages, definitions):
                if isinstance(delta, Finish):
                    finish = delta
                    continue
                chunk = {"turn": turn, "step": step, "chunk": _chunk(delta, len(chunk_seqs))}
                chunk_seqs.append(self.session.append(ASSISTANT_CHUNK, chunk).seq)
                deltas.append(delta)
        except Exception:  # `Aborted` too
            # Cancelled, or the model failed mid-stream (a dropped connection): keep what was
            # streamed, without the half-requested tools.
            if chunk_seqs:
                content = content_from_deltas(deltas, with_calls=False)
                self._assistant(turn, step, content, chunk_seqs, None, interrupted=True)
            raise
        self._assistant(turn, step, content_from_deltas(deltas), chunk_seqs, finish.usage)
        self._last_input = input_tokens(finish.usage)
        text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
        return text, [d for d in deltas if isinstance(d, ToolCallDelta)], finish

    async def _maybe_compact(self, policy: CompactionPolicy) -> None:
        """Compact when the history passes the policy's threshold (see `CompactionPolicy`)."""
        compacted = await compact_if_due(
            self.session,
            self.model,
            policy,
            window=self._window,
            measured=self._last_input,
            summarise=self._summarise,
        )
        if compacted:
            self._last_input = None

    async def _summarise(self, request: list[Any]) -> tuple[str, dict[str, Any] | None]:
        """The summary text the model streams for ``request`` (no tools offered)."""
        parts: list[str] = []
        usage: dict[str, Any] | None = None
        async for delta in self._stream(request, []):
            if isinstance(delta, TextDelta):
                parts.append(delta.text)
            elif isinstance(delta, Finish):
                usage = delta.usage
        return "".join(parts), usage

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
            self.session.append(REQUEST_HEADER, config.to_data(reason=reason))
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
            ASSISTANT_MESSAGE, data, surface_op="append", source_event_seqs=chunk_seqs
        )


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
