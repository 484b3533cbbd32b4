"""Provider formats: the derived history as OpenAI Chat, OpenAI Responses and Anthropic
requests, checked against the official SDKs' own request types, and responses back to deltas.

The SDKs describe their request params as TypedDicts; `conform` walks a value against one
(required keys, no unknown keys, literals, unions, lists) so a golden request that conforms
is one the SDK would type-check.
"""

from __future__ import annotations

import collections.abc
import json
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest
import typing_extensions
from anthropic.types.message_create_params import MessageCreateParamsStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

from todo_sessions import SessionService, SessionStore
from todo_sessions.core.messages import AssistantMessage, Message, messages_adapter
from todo_sessions.errors import ProviderResponseError
from todo_sessions.harness import AgentLoop, ToolRegistry
from todo_sessions.harness.model import (
    Finish,
    ModelDelta,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    content_from_deltas,
)
from todo_sessions.harness.providers import anthropic, openai_chat, openai_responses
from todo_sessions.harness.providers._common import MISSING_RESULT
from todo_sessions.harness.tools.base import ToolContext, ToolResult

# -- conformance to the SDKs' TypedDicts ---------------------------------------------------------

_WRAPPERS = {typing_extensions.Required, typing_extensions.NotRequired, typing.Annotated}
_LISTS = {
    list,
    collections.abc.Iterable,
    collections.abc.Sequence,
    typing.Iterable,
    typing.Sequence,
    typing.List,  # noqa: UP006
}


def conform(value: Any, tp: Any, path: str = "$") -> list[str]:
    """Problems of ``value`` against the type ``tp`` (empty: it conforms)."""
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any or tp is object:
        return []
    if origin in _WRAPPERS or origin is typing_extensions.Annotated:
        return conform(value, args[0], path)
    if typing_extensions.is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: expected an object for {tp.__name__}, got {value!r:.60}"]
        hints = get_type_hints(tp, include_extras=True)
        problems = [f"{path}: missing {k!r}" for k in _required(tp, hints) if k not in value]
        for key, item in value.items():
            if key not in hints:
                problems.append(f"{path}: unknown key {key!r} for {tp.__name__}")
            else:
                problems += conform(item, hints[key], f"{path}.{key}")
        return problems
    if origin in (Union, types.UnionType):
        best: list[str] | None = None
        for option in args:
            problems = conform(value, option, path)
            if not problems:
                return []
            if best is None or len(problems) < len(best):
                best = problems
        return best or [f"{path}: no option"]
    if origin is Literal:
        ok = any(value == a and type(value) is type(a) for a in args)
        return [] if ok else [f"{path}: {value!r} not in {args}"]
    if tp is type(None):
        return [] if value is None else [f"{path}: expected null"]
    if origin in _LISTS or getattr(origin, "__name__", "") == "SequenceNotStr":
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {value!r:.60}"]
        return [
            p
            for i, v in enumerate(value)
            for p in conform(v, args[0] if args else Any, f"{path}[{i}]")
        ]
    if origin in (dict, collections.abc.Mapping, typing.Dict):  # noqa: UP006
        if not isinstance(value, dict):
            return [f"{path}: expected an object"]
        return [
            p for k, v in value.items() for p in conform(v, args[1] if args else Any, f"{path}.{k}")
        ]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{path}: expected a boolean"]
    if tp is int:
        return [] if type(value) is int else [f"{path}: expected an integer"]
    if tp is float:
        return [] if type(value) in (int, float) else [f"{path}: expected a number"]
    if tp is str:
        return [] if isinstance(value, str) else [f"{path}: expected a string, got {value!r:.60}"]
    if isinstance(tp, type):  # e.g. the SDK's response models, also allowed in requests
        return [] if isinstance(value, tp) else [f"{path}: expected a {tp.__name__}"]
    return []  # a typing form this walker does not know: not checked


def _required(tp: Any, hints: dict[str, Any]) -> set[str]:
    """Required keys. (``__required_keys__`` misses ``Required[...]`` written as a string, as
    the SDKs do under ``from __future__ import annotations``.)"""
    keys = set()
    for key, hint in hints.items():
        origin = get_origin(hint)
        if origin is typing_extensions.Required or (
            origin is not typing_extensions.NotRequired and key in tp.__required_keys__
        ):
            keys.add(key)
    return keys


def assert_conforms(value: Any, tp: Any) -> None:
    problems = conform(value, tp)
    assert not problems, "\n".join(problems[:10])


def test_the_conformance_walker_bites() -> None:
    good = {"model": "m", "max_tokens": 5, "stream": True, "messages": []}
    assert_conforms(good, MessageCreateParamsStreaming)
    assert conform({**good, "bogus": 1}, MessageCreateParamsStreaming)
    assert conform({"model": "m", "stream": True, "messages": []}, MessageCreateParamsStreaming)
    bad = {**good, "messages": [{"role": "robot", "content": "x"}]}
    assert conform(bad, MessageCreateParamsStreaming)
    bad_block = {**good, "messages": [{"role": "user", "content": [{"type": "text"}]}]}
    assert conform(bad_block, MessageCreateParamsStreaming)


# -- histories -----------------------------------------------------------------------------------

MODEL = {"kind": "model", "provider": "p", "model": "m"}
PNG = "iVBORw0KGgo="
THINKING = {"format": "anthropic", "block": {"type": "thinking", "signature": "sig/AbC+=="}}
REDACTED = {"format": "anthropic", "block": {"type": "redacted_thinking", "data": "RED+ACTED=="}}
ENCRYPTED = {
    "format": "openai-responses",
    "item": {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "plan"}],
        "encrypted_content": "gAAAAB-encrypted==",
    },
}
DEEPSEEK = {"format": "openai-chat", "field": "reasoning_content"}


def user(text: str, *extra: dict[str, Any], mid: str = "u") -> dict[str, Any]:
    content = [{"type": "text", "text": text}, *extra]
    return {"id": mid, "role": "user", "content": content, "source": {"kind": "user"}}


def assistant(*content: dict[str, Any], mid: str = "a") -> dict[str, Any]:
    return {"id": mid, "role": "assistant", "content": list(content), "source": MODEL}


def call(cid: str, name: str = "read", args: str = '{"path": "a.py"}') -> dict[str, Any]:
    return {"type": "tool-call", "id": cid, "name": name, "arguments": args}


def result(cid: str, *content: dict[str, Any], error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool-result", "toolCallId": cid, "content": list(content)}
    if error:
        block["isError"] = True
    return {
        "id": f"r-{cid}",
        "role": "user",
        "content": [block],
        "source": {"kind": "tool", "callId": cid},
    }


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def image() -> dict[str, Any]:
    return {"type": "image", "mediaType": "image/png", "data": PNG}


def reasoning(t: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "reasoning", "text": t}
    if data is not None:
        block["providerData"] = data
    return block


def history(*messages: dict[str, Any]) -> list[Message]:
    return messages_adapter.validate_python(list(messages))


TOOLS = [
    {
        "name": "read",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


def full_history(think: dict[str, Any] | None = THINKING) -> list[Message]:
    """Text and image prompt; reasoning, text and two parallel calls; a text result and an
    error result with an image; another prompt; a final answer."""
    return history(
        user("look at this", image()),
        assistant(reasoning("I should read both", think), text("Reading."), call("c1"), call("c2")),
        result("c1", text("contents of a")),
        result("c2", text("cannot read b"), image(), error=True),
        user("and now?"),
        assistant(text("Done.")),
        user("thanks"),
    )


# -- goldens: one reference history in each format ---------------------------------------------

GOLDEN = Path(__file__).parent / "providers_golden"


def reference() -> list[Message]:
    """Everything at once: a text+image prompt; reasoning of the format under test, text and
    two parallel calls; a text result and an error result with an image; a repair closer
    (a call that never ran); the next prompt; an answer."""
    return history(
        user("look at this", image()),
        assistant(
            reasoning("thinking (anthropic)", THINKING),
            reasoning("", REDACTED),
            reasoning("plan", ENCRYPTED),
            reasoning("thinking (deepseek)", DEEPSEEK),
            text("Reading."),
            call("c1"),
            call("c2", args='{"path": "b.png"}'),
            call("c3", name="write", args='{"path": "c"}'),
        ),
        result("c1", text("contents of a")),
        result("c2", text("cannot read b"), image(), error=True),
        result("c3", text("not run: interrupted before it started; it may be retried"), error=True),
        user("and now?"),
        assistant(text("Done.")),
        user("thanks"),
    )


GOLDENS: list[tuple[str, Any, Any]] = [
    (
        "openai_chat",
        lambda: openai_chat.to_request(
            reference(), model="deepseek-chat", system="sys", tools=TOOLS, reasoning="all"
        ),
        CompletionCreateParamsStreaming,
    ),
    (
        "openai_responses",
        lambda: openai_responses.to_request(
            reference(), model="o4-mini", system="sys", tools=TOOLS, reasoning={"effort": "low"}
        ),
        ResponseCreateParamsStreaming,
    ),
    (
        "anthropic",
        lambda: anthropic.to_request(
            reference(), model="claude-x", system="sys", tools=TOOLS, thinking_budget=2048
        ),
        MessageCreateParamsStreaming,
    ),
]


@pytest.mark.parametrize(("name", "build", "sdk_type"), GOLDENS, ids=[g[0] for g in GOLDENS])
def test_golden_requests(name: str, build: Any, sdk_type: Any) -> None:
    params = build()
    if name == "openai_chat":  # reasoning_content is DeepSeek's field, not in OpenAI's types
        checked = {
            **params,
            "messages": [
                {k: v for k, v in m.items() if k != "reasoning_content"} for m in params["messages"]
            ],
        }
        assert_conforms(checked, sdk_type)
    else:
        assert_conforms(params, sdk_type)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(params, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return
    assert path.exists(), f"missing golden {path.name}; run with UPDATE_GOLDEN=1 to create it"
    assert params == json.loads(path.read_text(encoding="utf-8")), f"differs from {path.name}"


def test_events_without_provider_data_keep_their_canonical_json() -> None:
    from todo_sessions.core.catalog import validate_event
    from todo_sessions.core.envelope import SessionEvent
    from todo_sessions.core.surface import derive_messages

    line = (
        '{"type":"assistant/message","seq":1,"time":5,"data":{"turn":1,"step":1,"message":'
        '{"id":"a","role":"assistant","content":[{"type":"reasoning","text":"hm"},'
        '{"type":"text","text":"ok"}],"source":{"kind":"model","provider":"p","model":"m"}}},'
        '"surfaceOp":"append","sourceEventSeqs":[]}'
    )
    event = SessionEvent.from_json(line)
    validate_event(event)
    assert event.to_json() == line  # byte for byte, no providerData appears
    (message,) = derive_messages([event])
    assert message.to_wire()["content"][0] == {"type": "reasoning", "text": "hm"}


# -- OpenAI Chat Completions ---------------------------------------------------------------------


def test_openai_chat_request_conforms_and_pairs_calls() -> None:
    params = openai_chat.to_request(
        full_history(), model="gpt-x", system="be brief", tools=TOOLS, reasoning="none"
    )
    assert_conforms(params, CompletionCreateParamsStreaming)
    roles = [m["role"] for m in params["messages"]]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "user",
        "assistant",
        "user",
    ]
    msgs = params["messages"]
    assert msgs[1]["content"][1]["image_url"]["url"] == f"data:image/png;base64,{PNG}"
    assert msgs[2]["content"] == "Reading."
    assert [c["id"] for c in msgs[2]["tool_calls"]] == ["c1", "c2"]
    assert "reasoning_content" not in msgs[2]  # Anthropic reasoning is not sent to OpenAI
    assert msgs[3] == {"role": "tool", "tool_call_id": "c1", "content": "contents of a"}
    assert msgs[4] == {"role": "tool", "tool_call_id": "c2", "content": "cannot read b"}
    # The image of c2's result comes after both tool messages, in a user message.
    assert msgs[5]["content"][0]["text"] == "Images from the result of tool call c2:"
    assert msgs[5]["content"][1]["type"] == "image_url"
    assert params["tools"][0]["function"]["name"] == "read"


def test_openai_chat_deepseek_reasoning_is_sent_back_in_the_current_turn_only() -> None:
    msgs = history(
        user("q1"),
        assistant(reasoning("old thought", DEEPSEEK), text("a1")),
        user("q2"),
        assistant(reasoning("new thought", DEEPSEEK), call("c1")),
        result("c1", text("r")),
    )
    out = openai_chat.to_messages(msgs)
    assert "reasoning_content" not in out[1]
    assert out[3]["reasoning_content"] == "new thought" and "content" not in out[3]
    assert out[3]["tool_calls"][0]["id"] == "c1"
    everything = openai_chat.to_messages(msgs, reasoning="all")
    assert everything[1]["reasoning_content"] == "old thought"
    stripped = [{k: v for k, v in m.items() if k != "reasoning_content"} for m in everything]
    assert_conforms(
        {"model": "m", "messages": stripped, "stream": True}, CompletionCreateParamsStreaming
    )


def test_openai_chat_response_and_stream_back_to_deltas() -> None:
    response = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "deepseek-chat",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "reasoning_content": "think",
                    "content": "Reading.",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "read", "arguments": '{"path": "a"}'},
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "read", "arguments": "{}"},
                        },
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }
    deltas = openai_chat.parse_response(response)
    assert deltas[-1] == Finish(
        "tool-calls", {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    )
    content = content_from_deltas(deltas)
    assert content == [
        reasoning("think", DEEPSEEK),
        text("Reading."),
        call("c1", args='{"path": "a"}'),
        call("c2", args="{}"),
    ]
    # Round trip: the stored message goes back as the same assistant message.
    again = openai_chat.to_messages(history(user("q"), assistant(*content)))
    assert again[1] == response["choices"][0]["message"]  # type: ignore[index]
    with pytest.raises(ProviderResponseError):
        openai_chat.parse_response({"choices": []})


# -- OpenAI Responses ----------------------------------------------------------------------------


def test_openai_responses_request_conforms_and_pairs_calls() -> None:
    msgs = full_history(ENCRYPTED)
    params = openai_responses.to_request(
        msgs, model="o-x", system="be brief", tools=TOOLS, reasoning={"effort": "low"}
    )
    assert_conforms(params, ResponseCreateParamsStreaming)
    kinds = [(i["type"], i.get("role")) for i in params["input"]]
    assert kinds == [
        ("message", "user"),
        ("reasoning", None),
        ("message", "assistant"),
        ("function_call", None),
        ("function_call", None),
        ("function_call_output", None),
        ("function_call_output", None),
        ("message", "user"),
        ("message", "assistant"),
        ("message", "user"),
    ]
    items = params["input"]
    assert items[1] == ENCRYPTED["item"]  # byte for byte, as the API returned it
    assert items[5] == {"type": "function_call_output", "call_id": "c1", "output": "contents of a"}
    assert [p["type"] for p in items[6]["output"]] == ["input_text", "input_image"]
    assert params["instructions"] == "be brief" and params["store"] is False
    assert params["include"] == ["reasoning.encrypted_content"]
    # Anthropic reasoning is dropped for OpenAI, cleanly.
    other = openai_responses.to_input(full_history(THINKING))
    assert all(i["type"] != "reasoning" for i in other)


def test_openai_responses_response_round_trip() -> None:
    item = {**ENCRYPTED["item"], "status": None}
    response = {
        "id": "resp_1",
        "status": "completed",
        "output": [
            item,
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Reading.", "annotations": []}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "c1",
                "name": "read",
                "arguments": "{}",
            },
        ],
        "usage": {"input_tokens": 5, "output_tokens": 6, "total_tokens": 11},
    }
    deltas = openai_responses.parse_response(response)
    content = content_from_deltas(deltas)
    assert content == [reasoning("plan", ENCRYPTED), text("Reading."), call("c1", args="{}")]
    assert deltas[-1].reason == "tool-calls"  # type: ignore[union-attr]
    items = openai_responses.to_input(history(user("q"), assistant(*content)))
    assert items[1] == ENCRYPTED["item"]
    assert items[3] == {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}
    assert items[4]["output"] == MISSING_RESULT  # the call has no result yet: one is made up
    with pytest.raises(ProviderResponseError):
        openai_responses.parse_response({"status": "failed", "error": {"message": "boom"}})


# -- Anthropic -----------------------------------------------------------------------------------


def test_anthropic_request_conforms_and_pairs_calls() -> None:
    msgs = history(
        user("look at this", image()),
        assistant(
            reasoning("I should read both", THINKING),
            reasoning("", REDACTED),
            text("Reading."),
            call("c1"),
            call("c2", args="not json"),
        ),
        result("c1", text("contents of a")),
        result("c2", text("cannot read b"), image(), error=True),
        user("and now?"),
        assistant(text("Done.")),
        user("thanks", text("")),
    )
    params = anthropic.to_request(msgs, model="claude-x", system="be brief", tools=TOOLS)
    assert_conforms(params, MessageCreateParamsStreaming)
    out = params["messages"]
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant", "user"]
    assert out[1]["content"] == [
        {"type": "thinking", "thinking": "I should read both", "signature": "sig/AbC+=="},
        {"type": "redacted_thinking", "data": "RED+ACTED=="},
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a.py"}},
        {"type": "tool_use", "id": "c2", "name": "read", "input": {"_raw_arguments": "not json"}},
    ]
    # Both results first, in call order, then what the user said next, in one message.
    assert [b["type"] for b in out[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert out[2]["content"][1]["is_error"] is True
    assert [b["type"] for b in out[2]["content"][1]["content"]] == ["text", "image"]
    assert out[4]["content"] == [{"type": "text", "text": "thanks"}]  # empty text left out
    assert params["tools"][0]["input_schema"]["type"] == "object"
    # Reasoning of other providers (or none) is dropped; the turn stays valid.
    for fmt in (ENCRYPTED, DEEPSEEK, None):
        other = anthropic.to_messages(full_history(fmt))
        assert [b["type"] for b in other[1]["content"]] == ["text", "tool_use", "tool_use"]


def test_anthropic_response_round_trip_keeps_signatures() -> None:
    response = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 6},
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig/AbC+=="},
            {"type": "redacted_thinking", "data": "RED+ACTED=="},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a"}},
        ],
    }
    deltas = anthropic.parse_response(response)
    assert deltas[-1] == Finish("tool-calls", {"input_tokens": 5, "output_tokens": 6})
    content = content_from_deltas(deltas)
    assert content[:2] == [reasoning("hmm", THINKING), reasoning("", REDACTED)]
    again = anthropic.to_messages(history(user("q"), assistant(*content)))
    assert again[1]["content"] == response["content"]


# -- history repair for providers ---------------------------------------------------------------


def test_orphan_and_missing_results_are_made_valid_for_every_format() -> None:
    msgs = history(
        user("summary of earlier work"),  # a compaction replaced the call that made "old"
        result("old", text("stale output")),
        assistant(call("c1"), call("c2")),
        result("c2", text("second")),  # out of order; c1 never answered
        user("next"),
    )
    chat = openai_chat.to_messages(msgs)
    assert chat[0]["content"][1]["text"] == "[result of tool call old]"
    assert [(m["role"], m.get("tool_call_id")) for m in chat[1:4]] == [
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
    ]
    assert chat[2]["content"] == MISSING_RESULT and chat[3]["content"] == "second"
    claude = anthropic.to_messages(msgs)
    ids = [b["tool_use_id"] for b in claude[2]["content"] if b["type"] == "tool_result"]
    assert ids == ["c1", "c2"] and claude[2]["content"][0]["is_error"] is True
    items = openai_responses.to_input(msgs)
    outputs = [i["call_id"] for i in items if i["type"] == "function_call_output"]
    assert outputs == ["c1", "c2"]
    for params, tp in (
        (openai_chat.to_request(msgs, model="m"), CompletionCreateParamsStreaming),
        (openai_responses.to_request(msgs, model="m"), ResponseCreateParamsStreaming),
        (anthropic.to_request(msgs, model="m"), MessageCreateParamsStreaming),
    ):
        assert_conforms(params, tp)


def test_an_assistant_turn_with_only_foreign_reasoning_is_left_out() -> None:
    msgs = history(user("q"), assistant(reasoning("x", THINKING)), user("again"))
    assert [m["role"] for m in openai_chat.to_messages(msgs)] == ["user", "user"]
    assert [
        m["role"]
        for m in anthropic.to_messages(
            history(user("q"), assistant(reasoning("x", ENCRYPTED)), user("again"))
        )
    ] == ["user"]


# -- stored, resumed, sent back byte for byte ------------------------------------------------------


class DeltaModel:
    provider = "anthropic"
    model = "claude-x"

    def __init__(self, *responses: list[ModelDelta]) -> None:
        self.responses = list(responses)

    async def stream(self, messages: Any, tools: Any) -> Any:
        for delta in self.responses.pop(0):
            yield delta


class ReadTool:
    name = "read"
    description = "Read a file."
    parameters: dict[str, Any] = {"type": "object"}

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult.text("contents")


async def test_signatures_and_encrypted_reasoning_survive_store_and_resume(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.db"
    signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDYL+/+Q==\u00e9"
    first = [
        ReasoningDelta("let me "),
        ReasoningDelta("look"),
        ReasoningDelta(
            "", {"format": "anthropic", "block": {"type": "thinking", "signature": signature}}
        ),
        ReasoningDelta("", REDACTED),
        ReasoningDelta("", ENCRYPTED),
        TextDelta("Reading."),
        ToolCallDelta("c1", "read", '{"path":  "a"}'),
        Finish("tool-calls"),
    ]
    tools = ToolRegistry()
    tools.register(ReadTool())
    async with SessionService(SessionStore(url), strict=True) as service:
        session = await service.new(cwd="/r")
        loop = AgentLoop(
            session,
            DeltaModel(first, [TextDelta("ok"), Finish()]),
            tools,
            checkpoint=service.checkpoint_for(session.id),
        )
        await loop.run_turn("go")
        sid = session.id
    async with SessionService(SessionStore(url), strict=True) as service:
        stored = (await service.resume(sid)).derive_messages().to_list()
    message = stored[1]
    assert isinstance(message, AssistantMessage)
    claude = anthropic.to_messages(stored)
    assert claude[1]["content"][0] == {
        "type": "thinking",
        "thinking": "let me look",
        "signature": signature,
    }
    assert claude[1]["content"][1] == {"type": "redacted_thinking", "data": "RED+ACTED=="}
    assert claude[1]["content"][-1]["input"] == {"path": "a"}
    responses = openai_responses.to_input(stored)
    assert responses[1] == ENCRYPTED["item"]
    assert json.dumps(responses[1]) == json.dumps(ENCRYPTED["item"])
    chat = openai_chat.to_messages(stored)
    assert chat[1]["tool_calls"][0]["function"]["arguments"] == '{"path":  "a"}'  # raw, as produced


def test_reasoning_goes_back_only_to_the_provider_that_wrote_it() -> None:
    def turn(provider: str, block: dict[str, Any]) -> list[Message]:
        source = {"kind": "model", "provider": provider, "model": "m"}
        message = {"id": "a", "role": "assistant", "content": [block, call("c1")], "source": source}
        return history(user("q"), message, result("c1", text("r")))

    deepseek = turn("deepseek", reasoning("hm", DEEPSEEK))
    assert (
        openai_chat.to_messages(deepseek, reasoning_from="deepseek")[1]["reasoning_content"] == "hm"
    )
    assert "reasoning_content" not in openai_chat.to_messages(deepseek, reasoning_from="openai")[1]
    claude = turn("anthropic", reasoning("hm", THINKING))
    kept = anthropic.to_messages(claude, reasoning_from="anthropic")[1]["content"][0]
    assert kept["type"] == "thinking"
    dropped = anthropic.to_messages(claude, reasoning_from="bedrock")[1]["content"][0]
    assert dropped["type"] == "tool_use"
    gpt = turn("openai", reasoning("plan", ENCRYPTED))
    assert openai_responses.to_input(gpt, reasoning_from="openai")[1]["type"] == "reasoning"
    assert openai_responses.to_input(gpt, reasoning_from="azure")[1]["type"] == "function_call"
