"""What one ACP client was shown of a session's log so far: `ClientView`.

`todo_sessions.acp.mapping.UpdateMapper` (the SDK models' path) and
`todo_sessions.acp.wire` (the replay's fast path) keep it alike, so both send the same
updates for the same events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.envelope import SessionEvent

__all__ = ["ClientView", "PresentCall"]

PresentCall = Callable[[str, Any], Mapping[str, Any] | None]
"""``present_call(tool_name, parsed_arguments)``: ``{title, kind, raw_input}`` or ``None``.

Any key that is missing or ``None`` falls back to the default (tool name, ``"other"``, the
parsed arguments); a ``kind`` the SDK does not know becomes ``"other"``.
"""


@dataclass(slots=True)
class ClientView:
    """The tool calls the client saw start, and the model call being streamed."""

    present_call: PresentCall | None = None
    calls: set[str] = field(default_factory=set)
    """The call ids the client was shown a ``tool_call`` for."""
    anchor: int | None = None
    """The seq of the first ``assistant/chunk`` of the model call being streamed."""
    streamed: set[str] = field(default_factory=set)
    """The kinds of blocks (``text``, ``reasoning``) that call streamed so far."""

    def chunk(self, seq: int, kind: str | None) -> int:
        """Note an ``assistant/chunk`` at ``seq`` that streamed a block of ``kind`` (None:
        nothing shown); the anchor of its call."""
        if self.anchor is None:
            self.anchor = seq
        if kind is not None:
            self.streamed.add(kind)
        return self.anchor

    def end_call(self, message: SessionEvent) -> tuple[int | None, frozenset[str]]:
        """The streamed call an ``assistant/message`` closes: its anchor and streamed kinds,
        or ``(None, {})`` when the message cites none of its chunks. Forgets the call."""
        anchor, streamed = self.anchor, frozenset(self.streamed)
        self.forget_call()
        if anchor is None or anchor not in (message.source_event_seqs or ()):
            return None, frozenset()
        return anchor, streamed

    def forget_call(self) -> None:
        """A step or turn boundary: chunks no message cited stay shown as they were."""
        self.anchor, self.streamed = None, set()
