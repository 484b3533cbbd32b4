"""The stream value types and the content a stream of them makes (harness/deltas.py)."""

from __future__ import annotations

import dataclasses

import pytest

from todo_sessions.harness.deltas import (
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    content_from_deltas,
)


def test_the_values_are_frozen_and_finish_defaults_to_stop() -> None:
    assert Finish() == Finish("stop", None)
    assert ReasoningDelta("r").provider_data is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        TextDelta("a").text = "b"  # type: ignore[misc]


def test_consecutive_texts_and_reasonings_each_make_one_block() -> None:
    deltas = [
        ReasoningDelta("think "),
        ReasoningDelta("hard"),
        TextDelta("Hel"),
        TextDelta("lo"),
        ReasoningDelta("again"),
        Finish(),
    ]
    assert content_from_deltas(deltas) == [
        {"type": "reasoning", "text": "think hard"},
        {"type": "text", "text": "Hello"},
        {"type": "reasoning", "text": "again"},
    ]


def test_provider_data_closes_the_reasoning_block() -> None:
    signed = {"format": "anthropic", "signature": "s"}
    deltas = [ReasoningDelta("a"), ReasoningDelta("b", signed), ReasoningDelta("c")]
    assert content_from_deltas(deltas) == [
        {"type": "reasoning", "text": "ab", "providerData": signed},
        {"type": "reasoning", "text": "c"},
    ]


def test_tool_calls_are_blocks_of_their_own_unless_left_out() -> None:
    deltas = [TextDelta("a"), ToolCallDelta("c1", "read", '{"p":1}'), TextDelta("b")]
    call = {"type": "tool-call", "id": "c1", "name": "read", "arguments": '{"p":1}'}
    assert content_from_deltas(deltas) == [
        {"type": "text", "text": "a"},
        call,
        {"type": "text", "text": "b"},
    ]
    # An interrupted message keeps what was said: the texts stay apart, the call is dropped.
    assert content_from_deltas(deltas, with_calls=False) == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
    ]
    assert content_from_deltas([]) == []
