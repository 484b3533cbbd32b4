"""The payload models of the compaction records (docs/format.md, "Compaction")."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from todo_sessions import EVENT_TYPES, InvalidEventError, SessionEvent, validate_event
from todo_sessions.core.compaction_events import (
    COMPACTION_EVENT_TYPES,
    CompactionEndData,
    CompactionPruneData,
    CompactionStartData,
    CompactionSummaryData,
)

SUMMARY: dict[str, Any] = {
    "compactionId": "c",
    "summary": [{"type": "text", "text": "what happened"}],
    "shadowedRange": {"start": 1, "end": 3},
    "shadowedSeqs": [1, 2, 3],
    "shadowedTokenCount": 40,
}


def test_the_four_types_are_registered_log_only_with_their_models() -> None:
    assert {
        "compaction/start": CompactionStartData,
        "compaction/summary": CompactionSummaryData,
        "compaction/end": CompactionEndData,
        "compaction/prune": CompactionPruneData,
    } == COMPACTION_EVENT_TYPES
    for name, model in COMPACTION_EVENT_TYPES.items():
        assert EVENT_TYPES[name].model is model
        assert not EVENT_TYPES[name].surface


def test_a_summary_and_a_prune_read_back_their_fields() -> None:
    summary = CompactionSummaryData.model_validate(SUMMARY)
    assert isinstance(summary, CompactionSummaryData)
    assert summary.shadowed_seqs == [1, 2, 3]
    assert (summary.shadowed_range.start, summary.shadowed_range.end) == (1, 3)
    one = {"shadowedRange": {"start": 7, "end": 7}, "shadowedSeqs": [7], "shadowedTokenCount": 0}
    prune = CompactionPruneData.model_validate(one)  # a single node, no tokens: allowed
    assert isinstance(prune, CompactionPruneData) and prune.shadowed_seqs == [7]
    validate_event(SessionEvent("compaction/summary", 4, 0, SUMMARY))


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"shadowedRange": {"start": 2, "end": 3}}, "shadowedRange 2..3 is not the first and last"),
        ({"shadowedRange": {"start": 1, "end": 2}}, "shadowedRange 1..2 is not the first and last"),
        (
            {"shadowedSeqs": [1, 2, 1], "shadowedRange": {"start": 1, "end": 1}},
            "shadowedSeqs [1, 2, 1] repeat a seq",
        ),
        ({"shadowedSeqs": []}, "at least 1 item"),
        ({"compactionId": ""}, "at least 1 character"),
        ({"shadowedTokenCount": -1}, "greater than or equal to 0"),
    ],
)
def test_a_bad_summary_is_refused_naming_the_field(change: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        CompactionSummaryData.model_validate({**SUMMARY, **change})
    with pytest.raises(InvalidEventError):
        validate_event(SessionEvent("compaction/summary", 4, 0, {**SUMMARY, **change}))


@pytest.mark.parametrize("model", [CompactionStartData, CompactionEndData])
def test_start_and_end_need_an_id_and_a_turn_or_null(model: type[Any]) -> None:
    assert model.model_validate({"compactionId": "x", "turn": None}).turn is None
    assert model.model_validate({"compactionId": "x", "turn": 2}).compaction_id == "x"
    for bad in ({"compactionId": "", "turn": 1}, {"compactionId": "x", "turn": 0}, {"turn": 1}):
        with pytest.raises(ValidationError):
            model.model_validate(bad)


def test_start_knows_its_trigger_and_tokens() -> None:
    start = CompactionStartData.model_validate(
        {"compactionId": "x", "turn": 1, "trigger": "auto", "tokensBefore": 0}
    )
    assert (start.trigger, start.tokens_before) == ("auto", 0)
    for bad in ({"trigger": "sometimes"}, {"tokensBefore": -1}):
        with pytest.raises(ValidationError):
            CompactionStartData.model_validate({"compactionId": "x", "turn": 1, **bad})
    end = CompactionEndData.model_validate(
        {"compactionId": "x", "turn": 1, "error": "the model said nothing", "tokensAfter": 5}
    )
    assert (end.error, end.tokens_after) == ("the model said nothing", 5)


def test_seq_0_may_be_shadowed_and_a_negative_seq_may_not() -> None:
    first = {"shadowedRange": {"start": 0, "end": 0}, "shadowedSeqs": [0], "shadowedTokenCount": 1}
    assert CompactionPruneData.model_validate(first).shadowed_seqs == [0]
    negative = {**first, "shadowedRange": {"start": -1, "end": -1}, "shadowedSeqs": [-1]}
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        CompactionPruneData.model_validate(negative)
