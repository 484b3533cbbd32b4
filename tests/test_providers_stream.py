"""Stream decoders: recorded streaming responses (as the APIs send them) to deltas.

The recordings here are reused by tests/test_model_adapters.py, which serves them over a
local HTTP server to the real SDK clients.
"""

from __future__ import annotations

from typing import Any

import pytest

from todo_sessions.errors import ProviderResponseError
from todo_sessions.harness.model import (
    Finish,
    ModelDelta,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    content_from_deltas,
)
from todo_sessions.harness.providers import anthropic, openai_chat, openai_responses


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "deepseek-chat",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


CHAT_TEXT: list[dict[str, Any]] = [
    _chunk({"role": "assistant", "content": ""}),
    _chunk({"content": "Hello"}),
    _chunk({"content": ", world"}),
    _chunk({}, "stop"),
    {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "deepseek-chat",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    },
]

CHAT_REASONING_TOOLS: list[dict[str, Any]] = [
    _chunk({"role": "assistant", "reasoning_content": "Need "}),
    _chunk({"reasoning_content": "the file."}),
    _chunk({"content": "Reading."}),
    _chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "read", "arguments": ""},
                }
            ]
        }
    ),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]}),
    _chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "b"}'},
                }
            ]
        }
    ),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"a"}'}}]}),
    _chunk({}, "tool_calls"),
]

ANTHROPIC_THINKING_TOOL: list[dict[str, Any]] = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    },
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "Let me "},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "think."},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "signature_delta", "signature": "EqQB+sig=="},
    },
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "redacted_thinking", "data": "REDACTED=="},
    },
    {"type": "content_block_stop", "index": 1},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "text_delta", "text": "Reading."},
    },
    {"type": "content_block_stop", "index": 2},
    {
        "type": "content_block_start",
        "index": 3,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 3,
        "delta": {"type": "input_json_delta", "partial_json": '{"path":'},
    },
    {
        "type": "content_block_delta",
        "index": 3,
        "delta": {"type": "input_json_delta", "partial_json": ' "a"}'},
    },
    {"type": "content_block_stop", "index": 3},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 42},
    },
    {"type": "message_stop"},
]

RESPONSES_REASONING_TOOL: list[dict[str, Any]] = [
    {
        "type": "response.created",
        "sequence_number": 0,
        "response": {"id": "resp_1", "status": "in_progress", "output": []},
    },
    {
        "type": "response.output_item.added",
        "sequence_number": 1,
        "output_index": 0,
        "item": {"type": "reasoning", "id": "rs_1", "summary": []},
    },
    {
        "type": "response.reasoning_summary_part.added",
        "sequence_number": 2,
        "item_id": "rs_1",
        "output_index": 0,
        "summary_index": 0,
        "part": {"type": "summary_text", "text": ""},
    },
    {
        "type": "response.reasoning_summary_text.delta",
        "sequence_number": 3,
        "item_id": "rs_1",
        "output_index": 0,
        "summary_index": 0,
        "delta": "Plan",
    },
    {
        "type": "response.reasoning_summary_part.added",
        "sequence_number": 4,
        "item_id": "rs_1",
        "output_index": 0,
        "summary_index": 1,
        "part": {"type": "summary_text", "text": ""},
    },
    {
        "type": "response.reasoning_summary_text.delta",
        "sequence_number": 5,
        "item_id": "rs_1",
        "output_index": 0,
        "summary_index": 1,
        "delta": "Act",
    },
    {
        "type": "response.output_item.done",
        "sequence_number": 6,
        "output_index": 0,
        "item": {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "Plan"},
                {"type": "summary_text", "text": "Act"},
            ],
            "encrypted_content": "gAAAA-enc==",
        },
    },
    {
        "type": "response.output_text.delta",
        "sequence_number": 7,
        "item_id": "msg_1",
        "output_index": 1,
        "content_index": 0,
        "delta": "Reading.",
    },
    {
        "type": "response.output_item.done",
        "sequence_number": 8,
        "output_index": 2,
        "item": {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "read",
            "arguments": '{"path":"a"}',
            "status": "completed",
        },
    },
    {
        "type": "response.completed",
        "sequence_number": 9,
        "response": {
            "id": "resp_1",
            "status": "completed",
            "output": [],
            "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
        },
    },
]


def decode(decoder: Any, events: list[dict[str, Any]]) -> list[ModelDelta]:
    out: list[ModelDelta] = []
    for event in events:
        out += decoder.feed(event)
    return out + decoder.end()


def test_chat_text_stream() -> None:
    deltas = decode(openai_chat.ChatStreamDecoder(), CHAT_TEXT)
    assert deltas == [
        TextDelta("Hello"),
        TextDelta(", world"),
        Finish("stop", {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}),
    ]


def test_chat_reasoning_and_parallel_tool_calls_stream() -> None:
    deltas = decode(openai_chat.ChatStreamDecoder(), CHAT_REASONING_TOOLS)
    assert deltas[:2] == [ReasoningDelta("Need "), ReasoningDelta("the file.")]
    assert deltas[2] == ReasoningDelta("", {"format": "openai-chat", "field": "reasoning_content"})
    assert deltas[3:] == [
        TextDelta("Reading."),
        ToolCallDelta("call_a", "read", '{"path": "a"}'),
        ToolCallDelta("call_b", "read", '{"path": "b"}'),
        Finish("tool-calls", None),
    ]
    assert content_from_deltas(deltas)[0] == {
        "type": "reasoning",
        "text": "Need the file.",
        "providerData": {"format": "openai-chat", "field": "reasoning_content"},
    }


def test_anthropic_thinking_signature_and_tool_stream() -> None:
    deltas = decode(anthropic.AnthropicStreamDecoder(), ANTHROPIC_THINKING_TOOL)
    content = content_from_deltas(deltas)
    assert content == [
        {
            "type": "reasoning",
            "text": "Let me think.",
            "providerData": {
                "format": "anthropic",
                "block": {"type": "thinking", "signature": "EqQB+sig=="},
            },
        },
        {
            "type": "reasoning",
            "text": "",
            "providerData": {
                "format": "anthropic",
                "block": {"type": "redacted_thinking", "data": "REDACTED=="},
            },
        },
        {"type": "text", "text": "Reading."},
        {"type": "tool-call", "id": "toolu_1", "name": "read", "arguments": '{"path": "a"}'},
    ]
    assert deltas[-1] == Finish("tool-calls", {"input_tokens": 10, "output_tokens": 42})
    with pytest.raises(ProviderResponseError, match="overloaded"):
        anthropic.AnthropicStreamDecoder().feed(
            {"type": "error", "error": {"type": "overloaded_error", "message": "overloaded"}}
        )


def test_responses_reasoning_summary_and_tool_stream() -> None:
    deltas = decode(openai_responses.ResponsesStreamDecoder(), RESPONSES_REASONING_TOOL)
    content = content_from_deltas(deltas)
    item = RESPONSES_REASONING_TOOL[6]["item"]
    assert content == [
        {
            "type": "reasoning",
            "text": "Plan\n\nAct",
            "providerData": {"format": "openai-responses", "item": item},
        },
        {"type": "text", "text": "Reading."},
        {"type": "tool-call", "id": "call_1", "name": "read", "arguments": '{"path":"a"}'},
    ]
    assert deltas[-1] == Finish(
        "tool-calls", {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}
    )
    # The same reasoning, decoded from the whole response, gives the same block.
    whole = openai_responses.parse_response({"status": "completed", "output": [item]})
    assert content_from_deltas(whole)[0] == content[0]
    with pytest.raises(ProviderResponseError, match=r"before response\.completed"):
        decode(openai_responses.ResponsesStreamDecoder(), RESPONSES_REASONING_TOOL[:-1])
