"""The payload models of the ``compaction/*`` event types (docs/format.md, "Compaction").

They are log-only records (no ``surfaceOp``): the history the model sees changes only through
the surface replacements they bracket. The fields follow the reference harness's wire
vocabulary, so its logs validate; todo-sessions adds ``trigger``, ``tokensBefore`` and
``tokensAfter`` (optional: a reference log has none of them).

- ``compaction/start`` ``{compactionId, turn, trigger?, tokensBefore?, sourceCommandId?}``
- ``compaction/summary`` ``{compactionId, summary, shadowedRange, shadowedSeqs,
  shadowedTokenCount, provider?, model?, maxTokens?, usage?, rawOutput?, llmStreamCall?}``:
  the summary and the facts of the call that wrote it; the ``user/message`` replacement comes
  right after it.
- ``compaction/end`` ``{compactionId, turn, error?, tokensAfter?, sourceCommandId?}``
- ``compaction/prune`` ``{shadowedRange, shadowedSeqs, shadowedTokenCount}``: right before each
  content-only ``tool/result`` replacement it prices.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from .messages import ContentBlock, WireModel
from .types import COMPACTION_END, COMPACTION_PRUNE, COMPACTION_START, COMPACTION_SUMMARY

__all__ = [
    "COMPACTION_EVENT_TYPES",
    "CompactionEndData",
    "CompactionPruneData",
    "CompactionStartData",
    "CompactionSummaryData",
    "ShadowedRange",
]

_Seq = Annotated[int, Field(ge=0)]
_Count = Annotated[int, Field(ge=0)]
_Turn = Annotated[int, Field(ge=1)]


class ShadowedRange(WireModel):
    """The first and last surface node of a replaced span (surface order, not seq order)."""

    start: _Seq
    end: _Seq


class _Shadowed(WireModel):
    shadowed_range: ShadowedRange
    shadowed_seqs: list[_Seq] = Field(min_length=1)
    """Every surface node the replacement removes, in surface order."""
    shadowed_token_count: _Count
    """An estimate of the removed nodes' size in tokens."""

    @model_validator(mode="after")
    def _range_matches_seqs(self) -> _Shadowed:
        seqs = self.shadowed_seqs
        if (self.shadowed_range.start, self.shadowed_range.end) != (seqs[0], seqs[-1]):
            raise ValueError(
                f"shadowedRange {self.shadowed_range.start}..{self.shadowed_range.end} is not "
                f"the first and last of shadowedSeqs {seqs}"
            )
        if len(set(seqs)) != len(seqs):
            raise ValueError(f"shadowedSeqs {seqs} repeat a seq")
        return self


class CompactionStartData(WireModel):
    compaction_id: str = Field(min_length=1)
    turn: _Turn | None
    """The open turn the compaction ran in, or null between turns."""
    trigger: Literal["manual", "auto"] | None = None
    tokens_before: _Count | None = None
    source_command_id: str | None = None


class CompactionSummaryData(_Shadowed):
    compaction_id: str = Field(min_length=1)
    summary: list[ContentBlock]
    provider: str | None = None
    model: str | None = None
    max_tokens: _Count | None = None
    usage: dict[str, Any] | None = None
    raw_output: list[ContentBlock] | None = None
    llm_stream_call: bool | None = None
    source_command_id: str | None = None


class CompactionEndData(WireModel):
    compaction_id: str = Field(min_length=1)
    turn: _Turn | None
    error: str | None = None
    """Set when the attempt failed (nothing was replaced)."""
    tokens_after: _Count | None = None
    source_command_id: str | None = None


class CompactionPruneData(_Shadowed):
    pass


COMPACTION_EVENT_TYPES: dict[str, type[WireModel]] = {
    COMPACTION_START: CompactionStartData,
    COMPACTION_SUMMARY: CompactionSummaryData,
    COMPACTION_END: CompactionEndData,
    COMPACTION_PRUNE: CompactionPruneData,
}
"""The ``compaction/*`` types and their payload models (registered by the catalog)."""
