"""Writing and pruning projection checkpoints (`core.checkpoint`): what a write stores.

Checkpoints are derived data, the only rows the library deletes and rewrites: a checkpoint is
written for a seq at or below the stored end of its session (the events it folds are stored),
replacing any earlier one at that seq, and only the newest ``keep`` of a session are kept.
Each backend runs that in one write transaction with its own compiled statements
(`Recorder.write_checkpoint`); reading them is `folds.live_state` / `folds.surface_state`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.checkpoint import CHECKPOINT_FORMAT

__all__ = ["CheckpointWrite"]


@dataclass(frozen=True, slots=True)
class CheckpointWrite:
    """One checkpoint to store: the state ``text`` for ``seq`` of ``session_id``, stamped
    ``now``, keeping the newest ``keep`` of the session."""

    session_id: str
    seq: int
    text: str
    now: int
    keep: int

    def row(self) -> dict[str, Any]:
        """The ``session_checkpoints`` row."""
        return {
            "session_id": self.session_id,
            "seq": self.seq,
            "format_version": CHECKPOINT_FORMAT,
            "state": self.text,
            "created_at": self.now,
        }
