"""The names of the event types the library itself writes and reads, as constants.

Compare ``event.type`` with these (``event.type == TODO_WRITE``) rather than spelling the name
again: a typo then fails at import, not silently at run time. The catalog
(`todo_sessions.core.catalog`) registers each with its payload model (docs/format.md, "The
catalog"); the rest of the reference's vocabulary (`todo_sessions.core.vocabulary`) is kept
without a constant, as the library only stores it.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ASSISTANT_CHUNK",
    "ASSISTANT_MESSAGE",
    "COMPACTION_END",
    "COMPACTION_PRUNE",
    "COMPACTION_START",
    "COMPACTION_SUMMARY",
    "REQUEST_CONTEXT",
    "REQUEST_HEADER",
    "SESSION_END_SEED",
    "SESSION_META",
    "STEP_END",
    "STEP_START",
    "TODO_WRITE",
    "TOOL_CALL",
    "TOOL_RESULT",
    "TURN_END",
    "TURN_START",
    "USER_MESSAGE",
]

# -- the turn and step structure (docs/format.md, "Turns and steps") --------------------------
TURN_START: Final = "turn/start"
TURN_END: Final = "turn/end"
STEP_START: Final = "step/start"
STEP_END: Final = "step/end"

# -- the conversation: the surface types and what streams or calls beside them ----------------
USER_MESSAGE: Final = "user/message"
ASSISTANT_MESSAGE: Final = "assistant/message"
ASSISTANT_CHUNK: Final = "assistant/chunk"
TOOL_CALL: Final = "tool/call"
TOOL_RESULT: Final = "tool/result"

# -- the session's own records -----------------------------------------------------------------
TODO_WRITE: Final = "todo/write"
SESSION_META: Final = "session/meta"
SESSION_END_SEED: Final = "session/end-seed"
REQUEST_HEADER: Final = "request/header"
REQUEST_CONTEXT: Final = "request/context"

# -- compaction (docs/format.md, "Compaction") -------------------------------------------------
COMPACTION_START: Final = "compaction/start"
COMPACTION_SUMMARY: Final = "compaction/summary"
COMPACTION_END: Final = "compaction/end"
COMPACTION_PRUNE: Final = "compaction/prune"
