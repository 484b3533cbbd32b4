"""What the model was asked: the request configuration recorded in the log, and
`derive_request`, the whole request as of any seq.

An `AgentLoop(record_requests=True)` appends a ``request/header`` event before a model call
whenever the configuration differs from the last one recorded in the session (so once per
session in the usual case), in the reference harness's shape: ``{header: {config: {provider,
model}, system?, tools}, reason}`` (``reason`` ``initial`` for the first, ``change`` after),
``tools`` being the tool definitions offered (``{name, description, parameters}``). Headers in
the shape earlier versions wrote (``{provider, model, system?, tools}``) are read through
`upcast_request_header`. `derive_request(events,
upto_seq=N)` pairs the last such record at or before seq N with the history the model saw
at N (`derive_messages`), and `DerivedRequest.to_params` turns that into the request params of
a provider format.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.envelope import SessionEvent
from ..core.messages import Message
from ..core.request_header import upcast_request_header
from ..core.surface import SurfaceState
from ..core.types import REQUEST_HEADER

__all__ = ["DerivedRequest", "RequestConfig", "derive_request", "derive_stored_request"]

HEADER = REQUEST_HEADER


@dataclass(frozen=True)
class RequestConfig:
    """The configuration of a model request: provider, model, system prompt, tools."""

    provider: str
    model: str
    system: str | None = None
    tools: Sequence[Mapping[str, Any]] = field(default_factory=tuple)

    def to_data(self, *, reason: str = "initial") -> dict[str, Any]:
        """The ``request/header`` payload (the reference's shape)."""
        header: dict[str, Any] = {"config": {"provider": self.provider, "model": self.model}}
        if self.system is not None:
            header["system"] = self.system
        header["tools"] = [dict(tool) for tool in self.tools]
        return {"header": header, "reason": reason}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RequestConfig | None:
        """The configuration a ``request/header`` payload records (None: not one of ours,
        e.g. written by another harness)."""
        header = upcast_request_header(data).get("header")
        config = header.get("config") if isinstance(header, Mapping) else None
        if not isinstance(config, Mapping):
            return None
        provider, model = config.get("provider"), config.get("model")
        if not isinstance(provider, str) or not isinstance(model, str):
            return None
        assert isinstance(header, Mapping)
        system = header.get("system")
        tools = header.get("tools")
        return cls(
            provider,
            model,
            system if isinstance(system, str) else None,
            tuple(t for t in tools if isinstance(t, dict)) if isinstance(tools, list) else (),
        )

    def same_as(self, other: RequestConfig | None) -> bool:
        return other is not None and self.to_data() == other.to_data()


@dataclass(frozen=True)
class DerivedRequest:
    """The request as of ``seq``: the recorded configuration (None if none was recorded by
    then) and the message history the model saw."""

    seq: int
    config: RequestConfig | None
    messages: list[Message]

    def to_params(
        self,
        fmt: Literal["openai-chat", "openai-responses", "anthropic"],
        *,
        model: str | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """The request params in provider format ``fmt`` (see `todo_sessions.harness.providers`).
        ``model`` defaults to the recorded one."""
        from .providers import anthropic, openai_chat, openai_responses

        config = self.config
        name = model or (config.model if config is not None else None)
        if name is None:
            raise ValueError(f"no request/header at or before seq {self.seq}: pass model=")
        system = config.system if config is not None else None
        tools = [dict(t) for t in config.tools] if config is not None else []
        if fmt == "openai-chat":
            return openai_chat.to_request(
                self.messages, model=name, system=system, tools=tools, **options
            )
        if fmt == "openai-responses":
            return openai_responses.to_request(
                self.messages, model=name, system=system, tools=tools, **options
            )
        return anthropic.to_request(
            self.messages, model=name, system=system, tools=tools, **options
        )


def last_config(events: Iterable[SessionEvent]) -> RequestConfig | None:
    """The configuration of the last ``request/header`` among ``events``."""
    found: RequestConfig | None = None
    for event in events:
        if event.type == HEADER:
            found = RequestConfig.from_data(event.data) or found
    return found


def derive_request(events: Iterable[SessionEvent], upto_seq: int | None = None) -> DerivedRequest:
    """The request as of ``upto_seq`` (inclusive; default: the end of ``events``)."""
    state = SurfaceState()
    config: RequestConfig | None = None
    seq = -1
    for event in events:
        if upto_seq is not None and event.seq > upto_seq:
            break
        seq = event.seq
        state.apply(event)
        if event.type == HEADER:
            config = RequestConfig.from_data(event.data) or config
    return DerivedRequest(seq, config, state.messages())


async def derive_stored_request(
    store: Any, session_id: str, upto_seq: int | None = None
) -> DerivedRequest:
    """`derive_request` of a stored session (``store`` is a `SessionStore`)."""
    log = await store.read(session_id)
    return derive_request(log.events, upto_seq)
