"""The agent's side of an ACP connection, routed for the whole session lifecycle.

The pinned SDK (``agent-client-protocol`` 0.12) routes ``session/close``, ``session/fork``
and ``session/resume`` only when its router is built with ``use_unstable_protocol``, and has
no route at all for ``session/delete`` although its schema has ``DeleteSessionRequest``.
`AgentConnection` builds the SDK's own agent router with the unstable methods on, adds a
``session/delete`` route through the router's public ``add_route`` (params validated by the
schema's ``DeleteSessionRequest``, the result serialised as the SDK serialises every result),
and runs the SDK's JSON-RPC `Connection` over the given transport. The wire format is exactly
the schema's; only the routing is ours.

Towards the agent it offers what the SDK's ``AgentSideConnection`` offers and the agent uses:
``session_update`` and ``request_permission``.

Two things the pinned SDK does not do are done on the raw messages (`_Tracking`, between the
transport and the SDK's connection): the ``clientCapabilities`` of ``initialize`` are handed
to the agent as JSON (``agent.client_capabilities_json``: the SDK's schema drops the ones it
predates), and ``$/cancel_request`` (a notification naming a pending request) is served: a
pending ``session/prompt`` is cancelled through ``agent.cancel_prompt_request(session_id)``
(it answers ``{stopReason: "cancelled"}``); other requests run to their answer, which the
protocol allows (cancelling is a "MAY"), and an id that names no pending request is ignored.
"""

from __future__ import annotations

from typing import Any

from . import _sdk

__all__ = ["AgentConnection"]

SESSION_DELETE = "session/delete"
CANCEL_REQUEST = "$/cancel_request"
_REQUEST_KEY = tuple[type, Any]


def _key(request_id: Any) -> _REQUEST_KEY:
    """A request id as a dict key (``1`` and ``"1"`` are different requests)."""
    return (type(request_id), request_id)


class _Tracking:
    """The transport as the SDK's connection sees it: requests noted until answered,
    ``$/cancel_request`` served, ``initialize``'s raw capabilities handed to the agent."""

    def __init__(self, transport: Any, agent: Any) -> None:
        self._inner = transport
        self._agent = agent
        self._pending: dict[_REQUEST_KEY, tuple[str, Any]] = {}

    async def receive(self) -> dict[str, Any] | None:
        while True:
            message = await self._inner.receive()
            if message is None:
                return None
            method = message.get("method")
            if method == CANCEL_REQUEST:
                await self._cancel(message.get("params"))
                continue
            if method is not None and "id" in message:
                params = message.get("params")
                self._pending[_key(message["id"])] = (method, params)
                if method == "initialize" and isinstance(params, dict):
                    self._agent.client_capabilities_json = params.get("clientCapabilities")
            return message

    async def _cancel(self, params: Any) -> None:
        if not isinstance(params, dict) or "requestId" not in params:
            return
        pending = self._pending.get(_key(params["requestId"]))
        if pending is None:
            return
        method, request = pending
        cancel = getattr(self._agent, "cancel_prompt_request", None)
        session_id = request.get("sessionId") if isinstance(request, dict) else None
        if method == "session/prompt" and cancel is not None and isinstance(session_id, str):
            await cancel(session_id)

    async def send(self, message: dict[str, Any]) -> None:
        if "method" not in message and "id" in message:  # an answer: no longer pending
            self._pending.pop(_key(message["id"]), None)
        await self._inner.send(message)

    async def close(self) -> None:
        await self._inner.close()


class AgentConnection:
    """JSON-RPC over ``transport`` to one client, dispatching to ``agent``.

    ``agent.delete_session(session_id=...)`` serves ``session/delete``; everything else is
    routed by the SDK's agent router (the unstable methods included).
    """

    def __init__(self, agent: Any, transport: Any) -> None:
        router = _sdk.build_agent_router(agent, use_unstable_protocol=True)
        router.add_route(
            _sdk.Route(
                method=SESSION_DELETE,
                func=self._delete_handler(agent),
                kind="request",
                adapt_result=_sdk.normalize_result,
            )
        )
        self._transport = transport
        self._conn = _sdk.Connection(router, _Tracking(transport, agent), listening=False)
        if (on_connect := getattr(agent, "on_connect", None)) is not None:
            on_connect(self)

    @staticmethod
    def _delete_handler(agent: Any) -> Any:
        delete = getattr(agent, "delete_session", None)
        if delete is None:
            return None  # the route answers "method not found"

        async def handle(params: Any) -> Any:
            request = _sdk.DeleteSessionRequest.model_validate(params)
            return await delete(session_id=request.session_id, **(request.field_meta or {}))

        return handle

    async def listen(self) -> None:
        """Serve until the client disconnects."""
        await self._conn.main_loop()

    async def close(self) -> None:
        await self._conn.close()

    async def session_update(self, session_id: str, update: Any, **meta: Any) -> None:
        """Send one ``session/update`` notification: the params the SDK's own
        ``AgentSideConnection.session_update`` sends (`_sdk.wire_dump` of the notification),
        serialised from the already validated update without validating it a second time
        inside a `SessionNotification` (a replay sends tens of thousands)."""
        wire = update if isinstance(update, dict) else _sdk.wire_dump(update)
        params: dict[str, Any] = {"sessionId": session_id, "update": wire}
        if meta:
            params["_meta"] = meta
        await self._conn.send_notification("session/update", params)

    async def session_updates(self, session_id: str, updates: list[dict[str, Any]]) -> None:
        """Send one ``session/update`` notification per wire update (`UpdateMapper.feed_wire`),
        in order: the messages `session_update` sends, written together when the transport
        can (``send_many``: one write and one drain for a replay's page)."""
        messages = [
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": session_id, "update": update},
            }
            for update in updates
        ]
        send_many = getattr(self._transport, "send_many", None)
        if send_many is None:
            for message in messages:
                await self._conn.send_notification("session/update", message["params"])
        else:
            await send_many(messages)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **meta: Any
    ) -> Any:
        """Ask the client ``session/request_permission``; its validated response."""
        return await _sdk.request_model(
            self._conn,
            "session/request_permission",
            _sdk.RequestPermissionRequest(
                session_id=session_id, tool_call=tool_call, options=options, field_meta=meta or None
            ),
            _sdk.RequestPermissionResponse,
        )
