"""Content blocks and messages, the part of the log the model sees (docs/format.md, "The catalog").

Blocks and messages are tagged unions with a literal discriminator (``type`` for blocks,
``role`` for messages). A block of a type this version does not know is kept verbatim as an
`UnknownBlock`, and keys a model does not declare are kept too (forward compatibility).
Wire keys are camelCase (``mediaType``, ``toolCallId``, ``isError``); attributes are snake_case.
`MessageSnapshot` is the read-only list of derived messages a surface (`core.surface`) hands out.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated, Any, Literal, get_origin, overload

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter
from pydantic.alias_generators import to_camel

__all__ = [
    "AssistantMessage",
    "ContentBlock",
    "ImageBlock",
    "Message",
    "MessageSnapshot",
    "MessageSource",
    "ModelSource",
    "ReasoningBlock",
    "TextBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "UnknownBlock",
    "UserMessage",
    "messages_adapter",
]


class WireModel(BaseModel):
    """Base of every wire model: camelCase aliases, extra keys kept, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        frozen=True,
        strict=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The wire JSON dict (camelCase keys, unset optional keys left out). A tag (``type``,
        ``role``, ``kind``) left to its default is written too: without it the dict would not
        read back as this model."""
        return _with_tags(self, self.model_dump(mode="json", by_alias=True, exclude_unset=True))


def _with_tags(model: WireModel, wire: dict[str, Any]) -> dict[str, Any]:
    """``wire`` (``model``'s dump without unset keys) with its and its blocks' default tags."""
    out: dict[str, Any] = {}
    for name, info in type(model).model_fields.items():
        key = info.alias or name
        value = getattr(model, name)
        if key in wire:
            item = wire[key]
            if isinstance(value, WireModel):
                item = _with_tags(value, item)
            elif isinstance(value, list):
                item = [
                    _with_tags(v, w) if isinstance(v, WireModel) else w
                    for v, w in zip(value, item, strict=True)
                ]
            out[key] = item
        elif get_origin(info.annotation) is Literal:
            out[key] = value
    out.update((k, v) for k, v in wire.items() if k not in out)  # extra keys, as dumped
    return out


class TextBlock(WireModel):
    type: Literal["text"] = "text"
    text: str


class ReasoningBlock(WireModel):
    type: Literal["reasoning"] = "reasoning"
    text: str
    provider_data: dict[str, Any] | None = None
    """What the provider needs to accept this reasoning back (``providerData`` on the wire):
    ``{"format": ..., ...}``, e.g. an Anthropic thinking signature or an OpenAI encrypted
    reasoning item (docs/providers.md). Absent on blocks written without it."""


class ImageBlock(WireModel):
    type: Literal["image"] = "image"
    media_type: str
    data: str


class ToolCallBlock(WireModel):
    type: Literal["tool-call"] = "tool-call"
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: str
    """The raw JSON string the model produced, identical to its ``tool/call`` event's."""


class ToolResultBlock(WireModel):
    type: Literal["tool-result"] = "tool-result"
    tool_call_id: str = Field(min_length=1)
    content: list[ContentBlock]
    is_error: bool | None = None


class UnknownBlock(WireModel):
    """A block of a type this version does not know; every key is kept as it came."""

    type: str


_BLOCK_TAGS = {
    kind: f"block:{kind}" for kind in ("text", "reasoning", "image", "tool-call", "tool-result")
}


def _block_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    # (a str test first: a list "type" would not be hashable)
    return _BLOCK_TAGS.get(kind, "block:unknown") if isinstance(kind, str) else "block:unknown"


ContentBlock = Annotated[
    Annotated[TextBlock, Tag("block:text")]
    | Annotated[ReasoningBlock, Tag("block:reasoning")]
    | Annotated[ImageBlock, Tag("block:image")]
    | Annotated[ToolCallBlock, Tag("block:tool-call")]
    | Annotated[ToolResultBlock, Tag("block:tool-result")]
    | Annotated[UnknownBlock, Tag("block:unknown")],
    Discriminator(_block_tag),
]

ToolResultBlock.model_rebuild()


class MessageSource(WireModel):
    """Where a message came from: ``{kind, ...}`` (``user``, ``tool`` with ``callId``, ...)."""

    kind: str = Field(min_length=1)


class ModelSource(WireModel):
    """``{kind: "model", provider, model}``: every key required, provider and model non-empty."""

    kind: Literal["model"]
    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)


class UserMessage(WireModel):
    id: str = Field(min_length=1)
    role: Literal["user"]
    content: list[ContentBlock]
    source: MessageSource


class AssistantMessage(WireModel):
    id: str = Field(min_length=1)
    role: Literal["assistant"]
    content: list[ContentBlock]
    source: ModelSource


Message = Annotated[UserMessage | AssistantMessage, Field(discriminator="role")]
"""One entry of the history handed to the model."""

messages_adapter: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
"""Validates / dumps a whole message list (``messages_adapter.dump_python(m, by_alias=True)``)."""


class MessageSnapshot(Sequence[Message]):
    """A read-only sequence of derived messages that never changes once taken."""

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[Message], length: int) -> None:
        self._items = items
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return self._items[: self._length][index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("message index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Message]:
        return itertools.islice(self._items, self._length)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(other) == self._length and all(
                a == b for a, b in zip(self, other, strict=False)
            )
        return NotImplemented

    def __hash__(self) -> int:
        raise TypeError("MessageSnapshot is not hashable")

    def to_list(self) -> list[Message]:
        """A plain list (for serialisers that want one: ``TypeAdapter(list[Message])``)."""
        return self._items[: self._length]

    def __add__(self, other: Iterable[Message]) -> list[Message]:
        return [*self, *other]

    def __radd__(self, other: Iterable[Message]) -> list[Message]:
        return [*other, *self]

    def __repr__(self) -> str:
        return f"MessageSnapshot({list(self)!r})"
