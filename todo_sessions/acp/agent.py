"""An ACP agent on top of `SessionService`, and ``serve`` to run it over stdio.

See docs/design.md, "ACP bridge", and README.md, "ACP".

- ``initialize`` advertises ``loadSession: true`` and ``sessionCapabilities`` with ``list``,
  ``resume``, ``close``, ``delete`` and ``fork`` (all implemented here).
- ``new_session`` starts a live session; ``prompt`` runs one turn through `AgentLoop` and
  streams each appended event as ``session/update`` notifications, in log order, while the turn
  runs; it answers with the turn's stop reason once every update has been sent.
- ``load_session`` replays the whole stored log (user messages, assistant text and thoughts,
  tool calls and their results, and every ``todo/write`` as a ``plan``), page by page
  (`todo_sessions.acp.replay`: memory stays flat in the session's length), then sends the
  session's ``session_info_update`` and ``usage_update`` (summed during the replay), and
  only then answers. An unknown id is ``RequestError.resource_not_found``.
- ``list_sessions``: the store's sessions newest activity first, `LIST_PAGE_SIZE` per page,
  cursor paging on the store's keyset pagination (`todo_sessions.acp.session_list`).
- ``resume_session`` makes a stored session live without replaying it (repairing an
  interrupted last turn under the service's lease); ``close_session`` flushes it and gives
  the lease back; ``delete_session`` deletes it through `SessionStore.delete`;
  ``fork_session`` forks it at the end of its log (or at its last closed turn).
- Every session the client has open has a view (`todo_sessions.acp.views`): what it was
  shown. Each session it has open (loaded, resumed, prompted) is followed in the store
  (`todo_sessions.acp.following`): events others append (the host program's
  `Session.compact` between prompts, another process) are sent as they land, and at the
  latest before anything else a prompt sends; a ``session/meta`` event that changes its
  title or tags is sent as a ``session_info_update``. After each turn, a ``usage_update``.
- What the client advertised in ``initialize`` (`ClientFeatures`) chooses the newer updates
  it is sent (`todo_sessions.acp.presenter`): ``plan_update``/``plan_removed`` instead of the
  legacy ``plan``, ``compaction_update``, ``subagent_update`` with the children's own
  updates on their session ids (`todo_sessions.acp.relay`); a client that advertises none
  gets the legacy stream. Live and replay send the same updates.
- ``configOptions`` (the ``model`` option) answer ``session/new``, ``load`` and ``resume``;
  ``session/set_config_option`` switches the model for the next turn and records it in the
  log; ``authMethods`` name the API key variables the models need
  (`todo_sessions.acp.config_options`). ``$/cancel_request`` of a prompt cancels it
  (`todo_sessions.acp.connection`).
- At the start of each prompt an unfinished todo list is sent again as a plan (editors hide
  completed entries when a turn starts).
- Live updates and replays go through a `Presenter` each (an `UpdateMapper` inside): the
  same updates with the same ids. The repair of an interrupted last turn (results of the
  calls left open, ``turn/end``) is streamed before the next turn's own updates.
- ``serve`` puts `GuardedStdioTransport` in front of the SDK's connection: a malformed line
  is answered with the JSON-RPC error it deserves and the agent keeps running.
- A tool whose ``requires_permission`` attribute is true runs only after the client allowed it
  through ``session/request_permission`` (`todo_sessions.acp.permissions`); the client is
  shown the ``tool_call`` before it is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from .._service import SessionService
from .._session import Session
from ..core.envelope import SessionEvent
from ..core.meta import META_TYPE
from ..core.types import REQUEST_CONTEXT, TURN_END, TURN_START
from ..errors import SessionExistsError
from ..harness.compaction import CompactionPolicy
from ..harness.loop import AgentLoop
from ..harness.model import Model
from ..harness.tools.base import ToolContext
from ..harness.tools.registry import ToolRegistry
from ..store.results import SessionSummary
from . import _sdk, turns
from .builtin import PlanningModel, builtin_tools
from .capabilities import ClientFeatures
from .client_errors import client_errors
from .config_options import MODEL_META_KEY, ModelChoice, ModelMenu
from .connection import AgentConnection
from .following import Followers
from .jsonrpc import GuardedStdioTransport
from .listing import iso_time
from .mapping import SessionUpdate
from .permissions import PermissionGate
from .presenter import Presenter
from .prompting import TurnForwarder
from .relay import ChildRelay, settled
from .replay import Replay, child_ids, read_pages, send_page
from .session_list import list_page, title_of
from .session_ops import delete_session, fork_session
from .usage import UsageTally, context_window
from .views import View

__all__ = ["LIST_PAGE_SIZE", "TodoSessionsAgent", "serve"]

logger = logging.getLogger("todo_sessions.acp")


def _version() -> str:
    try:
        return version("todo-sessions")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


LIST_PAGE_SIZE = 50
"""Sessions per ``session/list`` page (the schema leaves the page size to the agent)."""

_REPLAY_PAGE = 2000
"""Events per read of a ``session/load`` replay; a page's updates are written together."""

_FOLLOW_INTERVAL = 0.2
"""Seconds between looks at an open session's log on SQLite (PostgreSQL is notified)."""


class TodoSessionsAgent:
    """The ACP agent. ``model_factory`` and ``tools_factory`` default to the built-ins.

    ``models``: the models offered as the ``model`` config option, the first the default
    (default: one, ``default``, made by ``model_factory``); a model is made once per live
    session that runs it (its `AgentLoop` serves the session's prompts until the client
    switches model). ``tools_factory`` is called once. ``record_requests`` and ``compaction``
    (when to compact, `CompactionPolicy`; None: never automatically) are passed to the loops.
    """

    def __init__(
        self,
        service: SessionService,
        *,
        model_factory: Callable[[], Model] = PlanningModel,
        tools_factory: Callable[[], ToolRegistry] = builtin_tools,
        max_steps: int = 200,
        record_requests: bool = False,
        list_page_size: int = LIST_PAGE_SIZE,
        follow_interval: float = _FOLLOW_INTERVAL,
        models: Sequence[ModelChoice] | None = None,
        compaction: CompactionPolicy | None = None,
    ) -> None:
        if type(list_page_size) is not int or list_page_size < 1:
            raise ValueError(f"list_page_size must be an int >= 1, got {list_page_size!r}")
        self.service = service
        self.models = ModelMenu(models or [ModelChoice("default", model_factory, "Default")])
        self.compaction = compaction
        self._model_of: dict[str, str] = {}
        """Per session the client switched or ran: the model value it runs."""
        self._loop_model: dict[str, str] = {}
        """Per session in ``_session_loops``: the model value its loop runs."""
        self._cancel_asked: set[str] = set()
        self._asking: set[tuple[str, str]] = set()
        """(session id, call id) of the permission requests being asked."""
        """Sessions whose pending prompt ``$/cancel_request`` cancelled (until it answers)."""
        self._tools = PermissionGate(tools_factory(), self._ask_permission)
        self._conn: Any = None
        self._forwarders: dict[str, TurnForwarder] = {}
        """Per running prompt: what sends its events to the client."""
        self._always: dict[str, set[str]] = {}
        """Per session: tools the user allowed for the whole session."""
        self._loops: dict[str, AgentLoop] = {}
        """Per session: the loop running a prompt now."""
        self._prompt_done: dict[str, asyncio.Event] = {}
        """Per session: set when the running prompt has answered."""
        self._session_loops: dict[str, AgentLoop] = {}
        self._views: dict[str, View] = {}
        """Per session the client has open: what it was shown so far (`View`)."""
        self._relays: dict[str, ChildRelay] = {}
        """Per view caught up between prompts: the relay of the children it announces."""
        self._followers = Followers(self._announce, self._wake)
        """Per session the client has open: the task following its log."""
        self._usage: dict[str, UsageTally] = {}
        """Per open session whose usage is known here: the running total."""
        self.features = ClientFeatures()
        """What the client advertised in ``initialize`` (all off until it has)."""
        self.client_capabilities_json: Any = None
        """The raw ``clientCapabilities`` (`AgentConnection` sets it; the SDK's model drops
        the capabilities its schema predates)."""
        self.max_steps = max_steps
        self.record_requests = record_requests
        """Passed to each `AgentLoop`: record provider, model, system prompt and tools."""
        self.list_page_size = list_page_size
        self.follow_interval = follow_interval

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def _send(self, session_id: str, update: SessionUpdate | dict[str, Any]) -> None:
        """One ``session/update`` (an SDK model, or wire JSON for the newer kinds)."""
        await self._conn.session_update(session_id=session_id, update=update)

    async def aclose(self) -> None:
        """Stop following the open sessions (the service stays the caller's)."""
        for session_id in self._followers.ids():
            await self._followers.unfollow(session_id)
        for session_id in list(self._relays):
            await self._relays.pop(session_id).aclose()

    # -- lifecycle ------------------------------------------------------------------------------

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, **_: Any
    ) -> _sdk.InitializeResponse:
        raw = self.client_capabilities_json
        self.features = ClientFeatures.of(client_capabilities if raw is None else raw)
        sessions = _sdk.SessionCapabilities(
            list=_sdk.SessionListCapabilities(),
            resume=_sdk.SessionResumeCapabilities(),
            close=_sdk.SessionCloseCapabilities(),
            delete=_sdk.SessionDeleteCapabilities(),
            fork=_sdk.SessionForkCapabilities(),
        )
        return _sdk.InitializeResponse(
            protocol_version=_sdk.PROTOCOL_VERSION,
            agent_capabilities=_sdk.AgentCapabilities(
                load_session=True, session_capabilities=sessions
            ),
            agent_info=_sdk.Implementation(name="todo-sessions", version=_version()),
            auth_methods=self.models.auth_methods(),
        )

    async def authenticate(self, method_id: str, **_: Any) -> _sdk.AuthenticateResponse:
        """The key variable of ``method_id`` is set: nothing else to do (the models read it);
        unset, ``auth_required`` naming it."""
        self.models.authenticate(method_id)
        return _sdk.AuthenticateResponse()

    async def new_session(self, cwd: str, **_: Any) -> _sdk.NewSessionResponse:
        with client_errors():
            session = await self.service.new(cwd=cwd, origin="acp")
        self._views[session.id] = View(self._mapper(), session.next_seq)
        self._usage[session.id] = UsageTally()
        current = self._model_of[session.id] = self.models.default
        return _sdk.NewSessionResponse(
            session_id=session.id, config_options=self.models.options(current)
        )

    def _mapper(self) -> Presenter:
        return Presenter(self.features, present_call=self._tools.present_call)

    def _current_model(self, session_id: str, summary: SessionSummary) -> str:
        current = self._model_of.get(session_id) or self.models.current(summary.metadata)
        self._model_of[session_id] = current
        return current

    async def _summary(self, session_id: str) -> SessionSummary:
        with client_errors(session_id):
            return await self.service.store.summary(session_id)

    async def _live(self, session_id: str) -> Session:
        """The session, owned live by this agent (resumed, and so repaired, if need be).

        A session the client has a view of (loaded, or open before) keeps it: what the repair
        appends on resume (the closers of an interrupted turn) is shown by the next catch-up.
        For another, what the client could have seen is read from the store: its view is
        primed with the events of the last turn when that turn is open (the rest of the log
        has no call left to show a result of) and shows the repair's events, if any, next.
        """
        if session_id in self.service.live_ids():
            session = self.service.get(session_id)
            if session_id not in self._views:  # made live by someone else: assume all seen
                await self.service.flush(session_id)
                start = await self._open_turn(session_id)
                tail = [] if start is None else await self._read(session_id, start)
                self._prime(session_id, tail, session.next_seq)
            return session
        start = await self._open_turn(session_id)
        tail = [] if start is None else await self._read(session_id, start)
        try:
            with client_errors(session_id):
                session = await self.service.resume(session_id)
        except SessionExistsError:  # resumed concurrently by another request
            return await self._live(session_id)
        if session_id not in self._views:
            shown = session.next_seq if start is None else start + len(tail)
            self._prime(session_id, tail, shown)
        return session

    async def _open_turn(self, session_id: str) -> int | None:
        """The seq of the last turn's ``turn/start`` when that turn is still open, else None
        (one indexed read)."""
        with client_errors(session_id):
            last = await self.service.store.latest_event(session_id, TURN_START, TURN_END)
        return last.seq if last is not None and last.type == TURN_START else None

    async def _read(self, session_id: str, from_seq: int) -> list[SessionEvent]:
        with client_errors(session_id):
            return await self.service.store.read_from(session_id, from_seq)

    def _prime(self, session_id: str, events: Sequence[SessionEvent], next_seq: int) -> None:
        presenter = self._mapper()
        for event in events:
            presenter.feed(event)
        self._views[session_id] = View(presenter, next_seq)

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> _sdk.LoadSessionResponse:
        """Replay the stored log, page by page. Loading only reads: another process may be
        running a turn of this session, and repairing it here would cut that turn off. Repair
        happens when this agent takes the session over for a prompt. (A session live here is
        flushed first, so the store has all of it.)"""
        if session_id in self.service.live_ids():
            await self.service.flush(session_id)
        summary = await self._summary(session_id)
        children = None
        if self.features.subagents:
            with client_errors(session_id):
                children = await child_ids(self.service.store, session_id)
        presenter = Presenter(
            self.features, present_call=self._tools.present_call, children=children
        )
        replay = Replay(presenter, summary.title)
        view = self._views.setdefault(session_id, View(presenter, 0))
        async with view.lock:  # the client's view of the session starts again
            with client_errors(session_id):
                pages = read_pages(self.service.store, session_id, _REPLAY_PAGE)
                async with contextlib.aclosing(pages) as reading:
                    async for page in reading:
                        updates = [await settled(self.service, u) for u in replay.page(page)]
                        await send_page(self._conn, session_id, updates)
            view.presenter, view.next_seq = presenter.live(), replay.next_seq
            relay = self._relays.pop(session_id, None)
            if relay is not None:
                await relay.aclose()
            await self._catch_up(session_id, view, replay.tally)  # appended meanwhile
        await self._send_info(session_id, summary, replay.title)
        await self._send(session_id, replay.tally.update())
        if session_id not in self.service.live_ids():
            self._usage[session_id] = replay.tally
        self._follow(session_id, view.next_seq)
        current = self._current_model(session_id, summary)
        return _sdk.LoadSessionResponse(config_options=self.models.options(current))

    async def resume_session(
        self, cwd: str, session_id: str, **_: Any
    ) -> _sdk.ResumeSessionResponse:
        """Make a stored session live here without replaying it (the client has its history).

        An interrupted last turn is repaired under this service's lease, as before the first
        prompt after ``session/load``; the repair's updates are sent at the next prompt. A
        session held by another live service is refused (``invalid_request`` naming the
        holder) and nothing is written."""
        await self._live(session_id)
        summary = await self._summary(session_id)
        await self._send_info(session_id, summary, await title_of(self.service.store, summary))
        self._follow(session_id, summary.next_seq)
        current = self._current_model(session_id, summary)
        return _sdk.ResumeSessionResponse(config_options=self.models.options(current))

    async def set_config_option(
        self, config_id: str, session_id: str, value: Any, **_: Any
    ) -> _sdk.SetSessionConfigOptionResponse:
        """Switch the session's model for its next turn (``invalid_params`` for a value not
        offered, nothing written); the change is a ``session/meta`` event in the log."""
        value = self.models.check(config_id, value)
        session = await self._live(session_id)
        await self.service.flush(session_id)
        summary = await self._summary(session_id)
        if summary.metadata.get(MODEL_META_KEY) != value:
            metadata = {**summary.metadata, MODEL_META_KEY: value}
            session.append(META_TYPE, {"metadata": metadata}, ignorable=True)
        self._model_of[session_id] = value
        return _sdk.SetSessionConfigOptionResponse(config_options=self.models.options(value))

    async def close_session(self, session_id: str, **_: Any) -> _sdk.CloseSessionResponse:
        """Cancel a running prompt, flush the session and give its lease back; no further
        updates for it. Idempotent; a later prompt resumes it again."""
        await self._release(session_id)
        if session_id not in self.service.live_ids():
            await self._summary(session_id)  # an unknown id is resource_not_found
        return _sdk.CloseSessionResponse()

    async def _release(self, session_id: str) -> None:
        loop = self._loops.get(session_id)
        if loop is not None:
            loop.cancel()
            done = self._prompt_done.get(session_id)
            if done is not None:
                await done.wait()
        await self._followers.unfollow(session_id)
        if session_id in self.service.live_ids():
            await self.service.close(session_id)
        relay = self._relays.pop(session_id, None)
        if relay is not None:
            await relay.aclose()
        for held in (self._views, self._session_loops, self._always, self._usage):
            held.pop(session_id, None)
        self._model_of.pop(session_id, None)
        self._loop_model.pop(session_id, None)

    async def delete_session(self, session_id: str, **_: Any) -> _sdk.DeleteSessionResponse:
        """Delete a session through `SessionStore.delete` (the only deletion path). One held by
        another live service is refused (``invalid_request`` naming the holder): this
        service takes the lease first, so nothing is deleted under a live owner."""
        await self._summary(session_id)
        await self._release(session_id)
        await delete_session(self.service, session_id)
        return _sdk.DeleteSessionResponse()

    async def fork_session(self, cwd: str, session_id: str, **_: Any) -> _sdk.ForkSessionResponse:
        """Fork a session at the end of its stored log, or at its last closed turn when the
        last turn is open, through `SessionStore.fork`; the new session's id. The fork is not
        live until the client prompts it (or resumes it)."""
        if session_id in self.service.live_ids():
            await self.service.flush(session_id)
        summary = await self._summary(session_id)
        start = await self._open_turn(session_id)
        fork_id = await fork_session(self.service, session_id, summary.title, start)
        return _sdk.ForkSessionResponse(session_id=fork_id)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **meta: Any
    ) -> _sdk.ListSessionsResponse:
        """One page of the store's sessions, newest activity first (`LIST_PAGE_SIZE`);
        subagent sessions only when ``_meta`` has ``includeSubagents: true``."""
        return await list_page(
            self.service.store,
            cwd=cwd,
            cursor=cursor,
            page_size=self.list_page_size,
            subagents=meta.get("includeSubagents") is True,
        )

    # -- following open sessions ----------------------------------------------------------------

    async def _send_info(self, session_id: str, summary: SessionSummary, title: str | None) -> None:
        await self._send(
            session_id,
            _sdk.SessionInfoUpdate(
                session_update="session_info_update",
                title=title,
                updated_at=iso_time(summary.updated_at),
                field_meta={"tags": list(summary.tags)},
            ),
        )

    def _follow(self, session_id: str, from_seq: int) -> None:
        """Follow a session the client has open from ``from_seq`` (no-op if followed)."""
        self._followers.follow(self.service.store, session_id, from_seq, self.follow_interval)

    async def _wake(self, session_id: str, seq: int) -> None:
        """The follower read event ``seq``: show what the client was not shown yet."""
        await turns.wake(self, session_id, seq)

    async def _catch_up(self, session_id: str, view: View, tally: UsageTally | None) -> None:
        await turns.catch_up(self, session_id, view, tally)

    async def _announce(self, session_id: str) -> None:
        """The session's title and tags changed: its ``session_info_update``."""
        summary = await self.service.store.summary(session_id)
        await self._send_info(session_id, summary, await title_of(self.service.store, summary))

    async def _send_usage(self, session_id: str) -> None:
        """The session's ``usage_update`` after a turn. The first time for a session resumed
        without a replay, the total is read once from the store (`SessionStore.usage`)."""
        tally = self._usage.get(session_id)
        if tally is None:
            store = self.service.store
            await self.service.flush(session_id)
            usage = await store.usage(session_id)
            context = await store.latest_event(session_id, REQUEST_CONTEXT)
            size = None if context is None else context_window(context.data)
            tally = self._usage[session_id] = UsageTally(usage.total, size)
        await self._send(session_id, tally.update())

    # -- turns (`todo_sessions.acp.turns`) ------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> _sdk.PromptResponse:
        return await turns.prompt(self, session_id, prompt)

    async def _ask_permission(self, name: str, args: Any, context: ToolContext) -> str | None:
        """Ask the client whether a call may run: None if allowed, else the reason."""
        return await turns.ask_permission(self, name, args, context)

    async def cancel(self, session_id: str, **_: Any) -> None:
        loop = self._loops.get(session_id)
        if loop is not None:
            loop.cancel()

    async def cancel_prompt_request(self, session_id: str) -> None:
        """``$/cancel_request`` of a pending ``session/prompt``: cancelled as
        ``session/cancel`` would (also when it has not started running yet)."""
        self._cancel_asked.add(session_id)
        await self.cancel(session_id)


async def serve(service: SessionService, agent: TodoSessionsAgent | None = None) -> None:
    """Run the agent (default: the built-in one) over stdin/stdout until the client
    disconnects. Malformed input lines are answered and skipped (`GuardedStdioTransport`);
    the session lifecycle is routed by `AgentConnection`."""
    async with service:
        reader, writer = await _sdk.stdio_streams(limit=_STDIO_LIMIT)
        transport = GuardedStdioTransport(reader, writer)
        agent = agent or TodoSessionsAgent(service)
        conn = AgentConnection(agent, transport)
        try:
            await conn.listen()
        finally:
            await asyncio.shield(agent.aclose())
            await asyncio.shield(conn.close())


_STDIO_LIMIT = 50 * 1024 * 1024
"""The stdin reader's buffer limit (the SDK's default); longer lines are read in pieces."""
