"""The model adapters against a local fake HTTP server (127.0.0.1, never the network) that
replays recorded streaming responses to the real SDK clients: text, reasoning, tool calls, a
429 then success, errors, a dropped stream, cancellation; and through the agent loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from test_providers_stream import (
    ANTHROPIC_THINKING_TOOL,
    CHAT_REASONING_TOOLS,
    CHAT_TEXT,
    RESPONSES_REASONING_TOOL,
    _chunk,
)

from todo_sessions import Session, SessionHeader
from todo_sessions.core.messages import Message, messages_adapter
from todo_sessions.errors import ModelAuthError, ModelRequestError
from todo_sessions.harness import AgentLoop, TodoWriteTool, ToolRegistry
from todo_sessions.harness.adapters import (
    AnthropicModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
    RetryPolicy,
    model_from_spec,
)
from todo_sessions.harness.model import Finish, ModelDelta, TextDelta, content_from_deltas

FAST = RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0)
KEY = "sk-test-secret-key"


@dataclass
class Reply:
    status: int = 200
    events: list[dict[str, Any]] = field(default_factory=list)
    style: str = "openai"  # "openai": data lines and [DONE]; "anthropic": event + data lines
    drop_after: int | None = None
    """Close the connection after this many events, mid-body."""
    hang_after: int | None = None
    """Send this many events, then wait until the client goes away."""
    reset: bool = False
    """Close the connection before sending anything."""
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None


class FakeServer:
    """A tiny HTTP/1.1 server: one scripted `Reply` per request, in order."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.client_left = asyncio.Event()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> FakeServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.lower(): v.strip() for k, v in (x.split(":", 1) for x in lines[1:] if x)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append(
            {"method": method, "path": path, "headers": headers, "json": json.loads(body or b"{}")}
        )
        reply = self.replies.pop(0)
        if reply.reset:
            return
        if reply.status != 200:
            payload = json.dumps(reply.body or {"error": {"message": "nope"}}).encode()
            extra = "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
            writer.write(
                f"HTTP/1.1 {reply.status} Error\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n{extra}Connection: close\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        for index, event in enumerate(reply.events):
            if reply.drop_after is not None and index == reply.drop_after:
                await writer.drain()
                return  # mid-body: no terminating chunk
            if reply.hang_after is not None and index == reply.hang_after:
                await writer.drain()
                await reader.read()  # until the client closes its side
                self.client_left.set()
                return
            data = json.dumps(event)
            sse = f"data: {data}\n\n"
            if reply.style == "anthropic":
                sse = f"event: {event['type']}\n{sse}"
            self._chunk(writer, sse.encode())
            await writer.drain()
        if reply.style == "openai":
            self._chunk(writer, b"data: [DONE]\n\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    @staticmethod
    def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")


def prompt(text: str = "hi") -> list[Message]:
    return messages_adapter.validate_python(
        [
            {
                "id": "u",
                "role": "user",
                "content": [{"type": "text", "text": text}],
                "source": {"kind": "user"},
            }
        ]
    )


async def collect(stream: AsyncIterator[ModelDelta]) -> list[ModelDelta]:
    return [delta async for delta in stream]


def chat(server: FakeServer, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "deepseek-chat", base_url=f"{server.url}/v1", api_key=KEY, retry=FAST, **kwargs
    )


# -- OpenAI-compatible chat ----------------------------------------------------------------------


async def test_chat_streams_text_and_sends_the_request() -> None:
    async with FakeServer(Reply(events=CHAT_TEXT)) as server:
        model = chat(server, system="be brief")
        deltas = await collect(
            model.stream(
                prompt(), [{"name": "t", "description": "d", "parameters": {"type": "object"}}]
            )
        )
        await model.aclose()
    assert deltas[:2] == [TextDelta("Hello"), TextDelta(", world")]
    assert isinstance(deltas[-1], Finish) and deltas[-1].usage == {
        "prompt_tokens": 5,
        "completion_tokens": 3,
        "total_tokens": 8,
    }
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == f"Bearer {KEY}"
    body = request["json"]
    assert body["model"] == "deepseek-chat" and body["stream"] is True
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert body["tools"][0]["function"]["name"] == "t"
    assert KEY not in repr(model)


async def test_chat_streams_reasoning_and_tool_calls() -> None:
    async with FakeServer(Reply(events=CHAT_REASONING_TOOLS)) as server:
        model = chat(server)
        content = content_from_deltas(await collect(model.stream(prompt(), [])))
        await model.aclose()
    assert content[0]["providerData"] == {"format": "openai-chat", "field": "reasoning_content"}
    assert [b["type"] for b in content] == ["reasoning", "text", "tool-call", "tool-call"]


async def test_429_then_success_is_retried_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("DEBUG")
    retries: list[tuple[int, int | None]] = []
    async with FakeServer(
        Reply(status=429, headers={"Retry-After": "0"}), Reply(events=CHAT_TEXT)
    ) as server:
        model = chat(server, on_retry=lambda n, delay, err: retries.append((n, err.status)))
        deltas = await collect(model.stream(prompt(), []))
        await model.aclose()
    assert len(server.requests) == 2 and retries == [(1, 429)]
    logged = [r for r in caplog.records if r.name == "todo_sessions.models"]
    assert "HTTP 429" in logged[0].getMessage() and "retrying" in logged[0].getMessage()
    assert KEY not in caplog.text  # the key is never logged, at any level
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == "Hello, world"


async def test_a_reset_connection_before_any_event_is_retried() -> None:
    async with FakeServer(Reply(reset=True), Reply(events=CHAT_TEXT)) as server:
        model = chat(server)
        deltas = await collect(model.stream(prompt(), []))
        await model.aclose()
    assert len(server.requests) == 2 and isinstance(deltas[-1], Finish)


async def test_server_errors_give_up_after_the_attempts_with_a_typed_error() -> None:
    async with FakeServer(*[Reply(status=503)] * 3) as server:
        model = chat(server)
        with pytest.raises(ModelRequestError) as info:
            await collect(model.stream(prompt(), []))
        await model.aclose()
    assert info.value.status == 503 and info.value.retryable and info.value.attempts == 3
    assert len(server.requests) == 3


async def test_a_refused_key_is_an_auth_error_and_not_retried() -> None:
    async with FakeServer(Reply(status=401, body={"error": {"message": "bad key"}})) as server:
        model = chat(server)
        with pytest.raises(ModelAuthError, match="bad key") as info:
            await collect(model.stream(prompt(), []))
        await model.aclose()
    assert len(server.requests) == 1 and KEY not in str(info.value)


async def test_a_dropped_stream_is_a_request_error_and_not_retried() -> None:
    async with FakeServer(Reply(events=CHAT_TEXT, drop_after=2), Reply(events=CHAT_TEXT)) as server:
        model = chat(server)
        seen: list[ModelDelta] = []
        with pytest.raises(ModelRequestError, match="broke after 2 event") as info:
            async for delta in model.stream(prompt(), []):
                seen.append(delta)
        await model.aclose()
    assert info.value.retryable and info.value.status is None
    assert seen == [TextDelta("Hello")] and len(server.requests) == 1


async def test_a_stream_that_ends_without_finishing_is_an_error() -> None:
    async with FakeServer(Reply(events=[_chunk({"content": "Hel"})])) as server:
        model = chat(server)
        with pytest.raises(ModelRequestError, match="without a finish reason"):
            await collect(model.stream(prompt(), []))
        await model.aclose()


def test_keys_come_from_the_environment_and_are_required_without_a_base_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelAuthError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-x")
    with pytest.raises(ModelAuthError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-x")
    OpenAIChatModel("llama", base_url="http://127.0.0.1:1/v1")  # a local server needs none
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    model = model_from_spec("openai:deepseek-chat", base_url="https://api.deepseek.com")
    assert (model.provider, model.model) == ("deepseek", "deepseek-chat")
    assert KEY not in repr(model) and KEY not in repr(vars(model).get("system"))
    with pytest.raises(ValueError, match="openai:MODEL"):
        model_from_spec("gpt-4")


# -- Anthropic -------------------------------------------------------------------------------------


async def test_anthropic_streams_thinking_with_signature_and_tool_calls() -> None:
    async with FakeServer(Reply(events=ANTHROPIC_THINKING_TOOL, style="anthropic")) as server:
        model = AnthropicModel(
            "claude-x", base_url=server.url, api_key=KEY, retry=FAST, system="sys"
        )
        deltas = await collect(model.stream(prompt(), []))
        await model.aclose()
    content = content_from_deltas(deltas)
    assert content[0]["providerData"]["block"] == {"type": "thinking", "signature": "EqQB+sig=="}
    assert content[-1] == {
        "type": "tool-call",
        "id": "toolu_1",
        "name": "read",
        "arguments": '{"path": "a"}',
    }
    (request,) = server.requests
    assert request["path"] == "/v1/messages" and request["headers"]["x-api-key"] == KEY
    assert request["json"]["system"] == "sys" and request["json"]["stream"] is True


async def test_anthropic_overloaded_then_success() -> None:
    async with FakeServer(
        Reply(
            status=529,
            body={"type": "error", "error": {"type": "overloaded_error", "message": "overloaded"}},
        ),
        Reply(events=ANTHROPIC_THINKING_TOOL, style="anthropic"),
    ) as server:
        model = AnthropicModel("claude-x", base_url=server.url, api_key=KEY, retry=FAST)
        deltas = await collect(model.stream(prompt(), []))
        await model.aclose()
    assert len(server.requests) == 2 and isinstance(deltas[-1], Finish)


async def test_an_anthropic_stream_without_message_stop_is_an_error() -> None:
    assert ANTHROPIC_THINKING_TOOL[-1]["type"] == "message_stop"
    async with FakeServer(Reply(events=ANTHROPIC_THINKING_TOOL[:-1], style="anthropic")) as server:
        model = AnthropicModel("claude-x", base_url=server.url, api_key=KEY, retry=FAST)
        with pytest.raises(ModelRequestError, match="before message_stop") as info:
            await collect(model.stream(prompt(), []))
        await model.aclose()
    assert info.value.retryable and len(server.requests) == 1


# -- through the agent loop ------------------------------------------------------------------------


def new_session() -> Session:
    return Session(SessionHeader(id="s1", created_at=1_764_000_000_000, cwd="/r"), strict=True)


def tools() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(TodoWriteTool())
    return registry


async def test_the_loop_runs_a_tool_call_and_sends_the_result_back() -> None:
    plan = json.dumps({"todos": [{"content": "read a", "status": "in_progress"}]})
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "todo_write", "arguments": plan},
    }
    first = [
        _chunk({"role": "assistant", "reasoning_content": "plan first"}),
        _chunk({"tool_calls": [call]}),
        _chunk({}, "tool_calls"),
    ]
    async with FakeServer(Reply(events=first), Reply(events=CHAT_TEXT)) as server:
        model = chat(server)
        session = new_session()
        outcome = await AgentLoop(session, model, tools()).run_turn("plan it")
        await model.aclose()
    assert outcome.reason == "completed" and outcome.text == "Hello, world"
    assert all(KEY not in event.to_json() for event in session.events)  # nor stored
    assert [t.content for t in session.todos] == ["read a"]
    second = server.requests[1]["json"]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool"]
    assert second[1]["reasoning_content"] == "plan first"  # the current turn's reasoning
    assert second[1]["tool_calls"][0]["function"]["arguments"] == plan
    assert second[2]["tool_call_id"] == "call_1"


async def test_a_dropped_stream_ends_the_turn_with_the_partial_message_kept() -> None:
    async with FakeServer(Reply(events=CHAT_TEXT, drop_after=2)) as server:
        model = chat(server)
        session = new_session()
        outcome = await AgentLoop(session, model, tools()).run_turn("hi")
        await model.aclose()
    assert outcome.reason == "error"
    end = session.events[-1].data["reason"]
    assert end["error"]["code"] == "ModelRequestError" and "broke" in end["error"]["message"]
    partial = [e for e in session.events if e.type == "assistant/message"]
    assert partial[0].data["interrupted"] is True
    assert partial[0].data["message"]["content"] == [{"type": "text", "text": "Hello"}]


async def test_cancelling_the_turn_closes_the_http_stream() -> None:
    async with FakeServer(Reply(events=CHAT_TEXT, hang_after=2)) as server:
        model = chat(server)
        session = new_session()
        loop = AgentLoop(session, model, tools())
        streaming = asyncio.Event()
        session.subscribe(lambda e: streaming.set() if e.type == "assistant/chunk" else None)
        running = asyncio.create_task(loop.run_turn("hi"))
        await asyncio.wait_for(streaming.wait(), 10)
        loop.cancel()
        outcome = await asyncio.wait_for(running, 10)
        await asyncio.wait_for(server.client_left.wait(), 10)  # the server saw the close
        await model.aclose()
    assert outcome.reason == "aborted"


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from todo_sessions.errors import ModelError

    monkeypatch.setitem(sys.modules, "openai", None)  # not installed
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ModelError, match=r"pip install 'todo-sessions\[models\]'"):
        OpenAIChatModel("gpt-x", api_key=KEY)
    with pytest.raises(ModelError, match=r"pip install 'todo-sessions\[models\]'"):
        AnthropicModel("claude-x", api_key=KEY)


# -- OpenAI Responses ------------------------------------------------------------------------------


async def test_responses_streams_encrypted_reasoning_and_sends_it_back() -> None:
    async with FakeServer(
        Reply(events=RESPONSES_REASONING_TOOL, style="anthropic"),
        Reply(events=RESPONSES_REASONING_TOOL[:-1], style="anthropic"),
    ) as server:
        model = OpenAIResponsesModel(
            "o-x", base_url=f"{server.url}/v1", api_key=KEY, retry=FAST, reasoning={"effort": "low"}
        )
        deltas = await collect(model.stream(prompt(), []))
        content = content_from_deltas(deltas)
        history = messages_adapter.validate_python(
            [
                *[m.to_wire() for m in prompt()],
                {
                    "id": "a",
                    "role": "assistant",
                    "content": content,
                    "source": {"kind": "model", "provider": "openai", "model": "o-x"},
                },
            ]
        )
        with pytest.raises(ModelRequestError, match=r"before response\.completed"):
            await collect(model.stream(history, []))
        await model.aclose()
    item = RESPONSES_REASONING_TOOL[6]["item"]
    assert content[0] == {
        "type": "reasoning",
        "text": "Plan\n\nAct",
        "providerData": {"format": "openai-responses", "item": item},
    }
    first, second = (r["json"] for r in server.requests)
    assert server.requests[0]["path"] == "/v1/responses"
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    assert second["input"][1] == item  # the encrypted item goes back as it came
    assert second["input"][2]["type"] == "message" and second["input"][3]["type"] == "function_call"
