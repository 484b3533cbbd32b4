"""The message and block models: wire keys, defaults, tags, strictness, immutability (issue #17).

These are the models the model sees (docs/format.md, "The catalog"): wire keys are camelCase,
attributes snake_case; the ``type``/``role``/``kind`` tags default to their literal; a block
of an unknown type is kept verbatim; everything is strict and frozen.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from todo_sessions.core.messages import (
    AssistantMessage,
    ContentBlock,
    ImageBlock,
    MessageSource,
    ModelSource,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UnknownBlock,
    UserMessage,
    WireModel,
    messages_adapter,
)

blocks: TypeAdapter[list[ContentBlock]] = TypeAdapter(list[ContentBlock])

WIRE_BLOCKS: list[tuple[dict[str, Any], type[WireModel]]] = [
    ({"type": "text", "text": "hi"}, TextBlock),
    ({"type": "reasoning", "text": "hm"}, ReasoningBlock),
    ({"type": "image", "mediaType": "image/png", "data": "AA=="}, ImageBlock),
    ({"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"}, ToolCallBlock),
    (
        {"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": "ok"}]},
        ToolResultBlock,
    ),
    ({"type": "future", "x": [1, {"y": None}]}, UnknownBlock),
]


@pytest.mark.parametrize(("wire", "cls"), WIRE_BLOCKS, ids=[c.__name__ for _, c in WIRE_BLOCKS])
def test_each_block_type_is_picked_by_its_tag_and_round_trips(
    wire: dict[str, Any], cls: type[WireModel]
) -> None:
    (block,) = blocks.validate_python([wire])
    assert type(block) is cls
    assert block.to_wire() == wire
    assert blocks.dump_python([block], mode="json", by_alias=True, exclude_unset=True) == [wire]


def test_the_tags_of_the_known_block_types() -> None:
    made: list[Any] = [
        TextBlock(text="a"),
        ReasoningBlock(text="b"),
        ImageBlock(media_type="image/png", data="AA"),
        ToolCallBlock(id="c1", name="read", arguments="{}"),
        ToolResultBlock(tool_call_id="c1", content=[]),
    ]
    assert [b.type for b in made] == ["text", "reasoning", "image", "tool-call", "tool-result"]
    # constructed models (not only wire dicts) pass through the discriminated union
    assert [type(b) for b in blocks.validate_python(made)] == [type(b) for b in made]


def test_snake_case_attributes_and_camel_case_wire_keys() -> None:
    image = ImageBlock.model_validate({"type": "image", "mediaType": "image/png", "data": "AA"})
    assert image.media_type == "image/png"
    assert image.model_extra == {}
    by_name = ImageBlock(media_type="image/png", data="AA")  # populate_by_name
    assert by_name.media_type == "image/png" and by_name.model_extra == {}
    result = ToolResultBlock.model_validate(
        {"type": "tool-result", "toolCallId": "c1", "content": [], "isError": True}
    )
    assert (result.tool_call_id, result.is_error) == ("c1", True)
    assert result.to_wire() == {
        "type": "tool-result",
        "toolCallId": "c1",
        "content": [],
        "isError": True,
    }


def test_defaults() -> None:
    assert ToolResultBlock(tool_call_id="c1", content=[]).is_error is None


@pytest.mark.parametrize(
    ("cls", "data", "loc"),
    [
        (ModelSource, {"provider": "p", "model": "m"}, ("kind",)),
        (ModelSource, {"kind": "model", "provider": "", "model": "m"}, ("provider",)),
        (ModelSource, {"kind": "model", "provider": "p", "model": ""}, ("model",)),
        (UserMessage, {"id": "u1", "content": [], "source": {"kind": "user"}}, ("role",)),
        (
            AssistantMessage,
            {"id": "a1", "content": [], "source": {"kind": "model", "provider": "p", "model": "m"}},
            ("role",),
        ),
    ],
)
def test_required_fields_have_no_defaults(
    cls: type[WireModel], data: dict[str, Any], loc: tuple[str, ...]
) -> None:
    """Issue 25, item 4: a missing role or source kind, or an empty provider, is refused."""
    with pytest.raises(ValidationError) as info:
        cls.model_validate(data)
    assert info.value.errors()[0]["loc"] == loc


def test_to_wire_leaves_unset_optional_keys_out_and_keeps_extra_keys() -> None:
    wire = {"type": "tool-result", "toolCallId": "c1", "content": [], "future": {"a": 1}}
    block = ToolResultBlock.model_validate(wire)
    assert block.is_error is None
    assert block.to_wire() == wire
    explicit = {**wire, "isError": None}
    assert ToolResultBlock.model_validate(explicit).to_wire() == explicit


def test_an_unknown_block_keeps_every_key() -> None:
    wire = {"type": "audio", "mediaType": "audio/wav", "data": "UklG", "n": 3}
    (block,) = blocks.validate_python([wire])
    assert isinstance(block, UnknownBlock)
    assert block.type == "audio"
    assert block.model_extra == {"mediaType": "audio/wav", "data": "UklG", "n": 3}
    assert block.to_wire() == wire


@pytest.mark.parametrize("tag", [["text"], {"t": 1}, 3, None])
def test_a_block_whose_type_is_not_a_string_is_an_invalid_unknown_block(tag: Any) -> None:
    wire: dict[str, Any] = {"text": "x"} if tag is None else {"type": tag, "text": "x"}
    with pytest.raises(ValidationError) as info:
        blocks.validate_python([wire])
    (error,) = info.value.errors()
    expected = "missing" if tag is None else "string_type"
    assert (error["loc"], error["type"]) == ((0, "block:unknown", "type"), expected)


@pytest.mark.parametrize(
    ("cls", "data", "field"),
    [
        (ToolCallBlock, {"id": "", "name": "read", "arguments": "{}"}, "id"),
        (ToolCallBlock, {"id": "c1", "name": "", "arguments": "{}"}, "name"),
        (ToolResultBlock, {"toolCallId": "", "content": []}, "toolCallId"),
        (MessageSource, {"kind": ""}, "kind"),
        (UserMessage, {"id": "", "role": "user", "content": [], "source": {"kind": "user"}}, "id"),
        (
            AssistantMessage,
            {
                "id": "",
                "role": "assistant",
                "content": [],
                "source": {"kind": "model", "provider": "p", "model": "m"},
            },
            "id",
        ),
    ],
)
def test_ids_names_and_kinds_must_not_be_empty(
    cls: type[WireModel], data: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as info:
        cls.model_validate(data)
    (error,) = info.value.errors()
    assert (error["loc"], error["type"]) == ((field,), "string_too_short")
    one_char = {k: ("x" if v == "" else v) for k, v in data.items()}
    assert getattr(cls.model_validate(one_char), _attr(field)) == "x"


def _attr(wire_key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in wire_key)


@pytest.mark.parametrize(
    ("cls", "data"),
    [
        (TextBlock, {"type": "text", "text": b"bytes"}),  # lax mode would decode bytes
        (ToolResultBlock, {"toolCallId": "c1", "content": [], "isError": "true"}),
        (ToolResultBlock, {"toolCallId": "c1", "content": [], "isError": 1}),
        (ToolCallBlock, {"id": "c1", "name": "read", "arguments": b"{}"}),
        (ToolResultBlock, {"toolCallId": "c1", "content": ({"type": "text", "text": "a"},)}),
    ],
)
def test_models_are_strict(cls: type[WireModel], data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        cls.model_validate(data)


def test_models_are_frozen_and_hashable() -> None:
    block = TextBlock(text="a")
    with pytest.raises(ValidationError) as info:
        block.text = "b"  # type: ignore[misc]
    assert info.value.errors()[0]["type"] == "frozen_instance"
    assert block.text == "a"
    assert hash(block) == hash(TextBlock(text="a"))
    source = ModelSource(kind="model", provider="p", model="m")
    with pytest.raises(ValidationError):
        source.model = "n"  # type: ignore[misc]


def test_wire_model_config() -> None:
    config = WireModel.model_config
    assert {k: config.get(k) for k in ("populate_by_name", "extra", "frozen", "strict")} == {
        "populate_by_name": True,
        "extra": "allow",
        "frozen": True,
        "strict": True,
    }


def test_messages_are_picked_by_role() -> None:
    wire = [
        {
            "id": "u1",
            "role": "user",
            "content": [{"type": "text", "text": "hi"}],
            "source": {"kind": "user"},
        },
        {
            "id": "a1",
            "role": "assistant",
            "content": [{"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"}],
            "source": {"kind": "model", "provider": "p", "model": "m"},
        },
    ]
    user, assistant = messages_adapter.validate_python(wire)
    assert type(user) is UserMessage and type(assistant) is AssistantMessage
    assert type(assistant.content[0]) is ToolCallBlock
    assert messages_adapter.dump_python([user, assistant], mode="json", by_alias=True) == wire
    with pytest.raises(ValidationError) as info:
        messages_adapter.validate_python([{**wire[0], "role": "system"}])
    assert info.value.errors()[0]["type"] == "union_tag_invalid"


def test_an_assistant_message_needs_a_model_source() -> None:
    with pytest.raises(ValidationError) as info:
        AssistantMessage.model_validate(
            {
                "id": "a1",
                "role": "assistant",
                "content": [],
                "source": {"kind": "user", "provider": "p", "model": "m"},
            }
        )
    assert info.value.errors()[0]["loc"] == ("source", "kind")


def test_constructed_models_write_their_default_tags() -> None:
    result = ToolResultBlock(
        tool_call_id="c1",
        content=[TextBlock(text="ok"), UnknownBlock(type="audio", data="UklG")],
    )
    message = UserMessage(
        id="u1", role="user", content=[result], source=MessageSource(kind="tool", callId="c1")
    )
    wire = message.to_wire()
    assert wire == {
        "id": "u1",
        "role": "user",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": "c1",
                "content": [{"type": "text", "text": "ok"}, {"type": "audio", "data": "UklG"}],
            }
        ],
        "source": {"kind": "tool", "callId": "c1"},
    }
    # in field order, extra keys last, like a dump of the wire model
    assert list(wire) == ["id", "role", "content", "source"]
    assert list(wire["content"][0]) == ["type", "toolCallId", "content"]
    assert messages_adapter.validate_python([wire]) == [message]
    assistant = AssistantMessage(
        id="a1",
        role="assistant",
        content=[ReasoningBlock(text="hm"), ToolCallBlock(id="c1", name="read", arguments="{}")],
        source=ModelSource(kind="model", provider="p", model="m"),
    )
    assert assistant.to_wire() == {
        "id": "a1",
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "hm"},
            {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"},
        ],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    assert list(assistant.to_wire()["source"]) == ["kind", "provider", "model"]
    assert messages_adapter.validate_python([assistant.to_wire()]) == [assistant]
    assert ImageBlock(media_type="image/png", data="AA").to_wire() == {
        "type": "image",
        "mediaType": "image/png",
        "data": "AA",
    }


def test_to_wire_of_a_wire_dict_gives_it_back_with_its_tags() -> None:
    wire = {
        "id": "a1",
        "role": "assistant",
        "content": [{"type": "tool-result", "toolCallId": "c1", "content": []}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
        "extra": [1],
    }
    message = AssistantMessage.model_validate(wire)
    assert message.to_wire() == {
        "id": "a1",
        "role": "assistant",
        "content": [{"type": "tool-result", "toolCallId": "c1", "content": []}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
        "extra": [1],
    }
    assert list(message.to_wire()) == ["id", "role", "content", "source", "extra"]


def test_the_message_models_are_complete_at_import() -> None:
    """ToolResultBlock nests ContentBlock, defined after it: rebuilt at import, so the payload
    models that nest it get a compiled fast check (`catalog._CHECKS`)."""
    from todo_sessions.core import catalog

    for kind in ("user/message", "assistant/message"):
        assert catalog._CHECKS[kind] is not None, kind


def test_to_wire_is_json() -> None:
    """Extra keys are kept as given (strict models check no extra value): `to_wire` still
    writes JSON values."""
    block = TextBlock(text="a", span=(1, 2))
    assert block.model_extra == {"span": (1, 2)}
    assert block.to_wire() == {"type": "text", "text": "a", "span": [1, 2]}
