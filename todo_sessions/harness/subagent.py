"""The ``subagent`` tool: the model delegates a task to a child agent with a session (and a todo
list) of its own.

See docs/format.md, "Subagent sessions", and docs/design.md, "Agent loop and tools".

The tool runs agent loops, so it lives beside `todo_sessions.harness.loop` rather than among
the plain tools of `todo_sessions.harness.tools` (which the loop imports). A call runs a child
`AgentLoop` for one turn on a new session of the same `SessionService`:
its header names the calling session as ``parent_session`` (no ``seed_length``: it is not a
fork), ``origin="subagent"`` and ``delegation_depth`` one more than the caller's. The child's
id is derived from the call (`subagent_session_id`: the parent's id and the tool call id) and
recorded on the parent's ``tool/call`` as ``subagentSessionId`` before the child starts. The
child's last answer is the tool's result (``is_error`` unless its turn completed). A cancel of
the parent's turn cancels the child's turn (it ends ``aborted``).
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..core.header import check_session_id
from ..core.types import TURN_END
from ..errors import InvalidEventError, SessionExistsError
from .compaction import CompactionPolicy
from .loop import AgentLoop, TurnOutcome
from .tools.base import ToolContext, ToolResult, compile_schema, schema_problem
from .tools.registry import ToolRegistry, parse_arguments
from .tools.todo_write import TodoWriteTool

if TYPE_CHECKING:
    from .._service import SessionService
    from .._session import Session

__all__ = ["SUBAGENT_ORIGIN", "SUBAGENT_PARAMETERS", "SubagentTool", "subagent_session_id"]

logger = logging.getLogger("todo_sessions.harness.tools")

SUBAGENT_ORIGIN = "subagent"
"""The ``origin`` of a session the ``subagent`` tool starts."""

SUBAGENT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "minLength": 1,
            "description": "The task for the subagent, complete and self-contained: it sees "
            "nothing of this conversation but this text.",
        },
        "title": {
            "type": "string",
            "description": "A short title for the subagent's session (default: the task).",
        },
    },
    "required": ["task"],
    "additionalProperties": False,
}
"""The JSON Schema of the tool's arguments (each tool instance holds its own copy)."""

_VALIDATOR = compile_schema(SUBAGENT_PARAMETERS)

DESCRIPTION = """\
Delegate a self-contained task to a subagent: a fresh agent with its own context, its own \
todo list and the same kind of tools. It sees only the task you give it, works on it until \
it is done, and its final answer comes back as this tool's result.

Use it for a well-defined piece of work whose details you do not need in your own context \
(research, a focused change, a check). Describe the task completely, including what the \
answer should contain. Keep your own todo list for your own plan: the subagent's list is \
its own."""

_TITLE_CHARS = 80

ChildHook = Callable[["Session", ToolContext], Awaitable[None] | None]
"""``on_child(child, context)``: called with the child's live session before its turn runs."""


def subagent_session_id(parent_id: str, call_id: str) -> str:
    """The session id of the child a ``subagent`` call ``call_id`` of session ``parent_id``
    runs in: ``<parent>/subagent/<call id>``, or ``<parent prefix>/subagent/<digest>`` when
    that would not be a valid session id (too long, or control characters in the call id)."""
    plain = f"{parent_id}/subagent/{call_id}"
    try:
        return check_session_id(plain)
    except InvalidEventError:
        digest = hashlib.sha256(f"{parent_id}\x00{call_id}".encode()).hexdigest()[:32]
        return f"{parent_id[:150]}/subagent/{digest}"


class SubagentTool:
    """The ``subagent`` tool, running children on ``service``.

    ``model``: the children's model (default: the calling loop's). ``tools``: makes each
    child's registry (default: ``todo_write`` and this tool). ``max_depth``: a call from a
    session at that delegation depth (or deeper) is refused with an ``is_error`` result.
    ``max_steps``, ``compaction`` and ``record_requests`` are passed to each child's
    `AgentLoop`. ``on_child(child, context)`` is called with each child's live session before
    its turn runs (e.g. to follow its events).
    """

    name = "subagent"
    description = DESCRIPTION

    def __init__(
        self,
        service: SessionService,
        *,
        model: Any = None,
        tools: Callable[[], ToolRegistry] | None = None,
        max_depth: int = 1,
        max_steps: int = 20,
        compaction: CompactionPolicy | None = None,
        record_requests: bool = False,
        on_child: ChildHook | None = None,
    ) -> None:
        if type(max_depth) is not int or max_depth < 0:
            raise ValueError(f"max_depth must be an int >= 0, got {max_depth!r}")
        self.service = service
        self.model = model
        self.max_depth = max_depth
        self.max_steps = max_steps
        self.compaction = compaction
        self.record_requests = record_requests
        self.on_child = on_child
        self._tools = tools or self._default_tools
        self.parameters: dict[str, Any] = copy.deepcopy(SUBAGENT_PARAMETERS)

    def _default_tools(self) -> ToolRegistry:
        registry = ToolRegistry()
        registry.register(TodoWriteTool())
        registry.register(self)
        return registry

    def present_call(self, args: dict[str, Any]) -> dict[str, Any] | None:
        """UI presentation: ``{title: "Subagent: <title>", kind: "other", raw_input}``."""
        return {"title": f"Subagent: {_title(args)}", "kind": "other", "raw_input": args}

    def _refusal(self, session: Session | None) -> str | None:
        if session is None:
            return "subagent requires an owning agent session"
        depth = session.header.delegation_depth
        if depth >= self.max_depth:
            return (
                f"subagent refused: this session is at delegation depth {depth} and "
                f"subagents may only be started below depth {self.max_depth}"
            )
        return None

    def call_fields(self, session: Session, call_id: str, arguments: str) -> dict[str, Any]:
        """``{subagentSessionId}`` for the call's ``tool/call`` when the call will start a
        child (valid arguments, depth allowed); else nothing."""
        try:
            args = parse_arguments(arguments)
        except ValueError:
            return {}
        if schema_problem(_VALIDATOR, args) is not None or self._refusal(session) is not None:
            return {}
        return {"subagentSessionId": subagent_session_id(session.id, call_id)}

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        """Run the child's turn on ``args["task"]`` and answer with its last text."""
        refused = self._refusal(context.session)
        if refused is not None:
            return ToolResult.error(refused)
        parent = context.session
        assert parent is not None
        model = self.model if self.model is not None else context.model
        if model is None:
            return ToolResult.error("subagent has no model to run (none configured or passed)")
        child_id = subagent_session_id(parent.id, context.call_id)
        try:
            child = await self.service.new(
                child_id,
                cwd=parent.header.cwd,
                title=_title(args),
                origin=SUBAGENT_ORIGIN,
                delegation_depth=parent.header.delegation_depth + 1,
                parent=parent.id,
            )
        except SessionExistsError:
            return ToolResult.error(f"subagent session {child_id!r} exists already: not re-run")
        try:
            outcome, error = await self._turn(child, model, args["task"], context)
        finally:
            await asyncio.shield(self._close(child_id))
        return _result(child_id, outcome, error)

    async def _turn(
        self, child: Session, model: Any, task: str, context: ToolContext
    ) -> tuple[TurnOutcome, Mapping[str, Any] | None]:
        """The child's one turn, cancelled with the parent's (its error, if it failed)."""
        loop = AgentLoop(
            child,
            model,
            self._tools(),
            max_steps=self.max_steps,
            checkpoint=self.service.checkpoint_for(child.id),
            record_requests=self.record_requests,
            compaction=self.compaction,
        )
        ends: list[Any] = []
        stop = child.subscribe(lambda e: ends.append(e.data) if e.type == TURN_END else None)
        relay = None if context.cancel is None else asyncio.ensure_future(context.cancel.wait())
        if relay is not None:
            relay.add_done_callback(lambda f: None if f.cancelled() else loop.cancel())
        try:
            if self.on_child is not None:
                hooked = self.on_child(child, context)
                if hooked is not None:
                    await hooked
            outcome = await _gently(loop, task)
        finally:
            stop()
            if relay is not None:
                relay.cancel()
        reason = ends[-1].get("reason", {}) if ends else {}
        return outcome, reason.get("error")

    async def _close(self, child_id: str) -> None:
        """Stop owning the child (flushed, lease given back); a failure is logged: the
        child's events stay queued in the service, which stores them when it closes."""
        try:
            await self.service.close(child_id)
        except Exception:
            logger.warning("subagent session %r: could not close it", child_id, exc_info=True)


async def _gently(loop: Any, task: str) -> TurnOutcome:
    """``loop.run_turn(task)``; when the calling task is cancelled, the child's turn is
    cancelled through ``loop.cancel()`` and awaited, so it ends ``aborted`` keeping what its
    model streamed, as a cancel of any turn does."""
    turn = asyncio.ensure_future(loop.run_turn(task))
    try:
        return await asyncio.shield(turn)
    except asyncio.CancelledError:
        loop.cancel()
        await asyncio.gather(turn, return_exceptions=True)
        raise


def _title(args: Mapping[str, Any]) -> str:
    """The child's title: the first line of the call's title, else of its task (cut to 80
    characters, without the characters a header cannot store)."""
    for value in (args.get("title"), args.get("task")):
        text = _storable(value.strip()) if isinstance(value, str) else ""
        if text:
            first = text.splitlines()[0]
            return first if len(first) <= _TITLE_CHARS else first[: _TITLE_CHARS - 1] + "…"
    return "subagent"


def _storable(text: str) -> str:
    return "".join(c for c in text if c != "\x00" and not 0xD800 <= ord(c) <= 0xDFFF).strip()


def _result(child_id: str, outcome: TurnOutcome, error: Mapping[str, Any] | None) -> ToolResult:
    structured = {"sessionId": child_id, "reason": outcome.reason, "steps": outcome.steps}
    if outcome.reason == "completed":
        return ToolResult.text(outcome.text or "(no answer)", structured=structured)
    why = f"the subagent (session {child_id}) ended {outcome.reason}"
    if error is not None and error.get("message"):
        why += f": {error['message']}"
    text = f"{why}\n\nIts last answer:\n{outcome.text}" if outcome.text else why
    return ToolResult.text(text, is_error=True, structured=structured)
