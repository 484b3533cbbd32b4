"""Compactions as ``compaction_update`` / ``compaction_summary_chunk``. Pure: no I/O.

For a client that advertised ``clientCapabilities.session.compaction``, each compaction of
the log (the loop's automatic ones and `Session.compact`'s, failed attempts included) is an
entity of the client's timeline, addressed by the ``compactionId`` its ``compaction/*``
events carry (stable: it is stored in the log, so live and replay name it alike):

- ``compaction/start``: ``compaction_update`` ``in_progress`` (fixes its place);
- ``compaction/summary``: one ``compaction_summary_chunk`` per text or image block of the
  summary;
- ``compaction/end``: ``compaction_update`` ``completed``, or ``failed`` with the error.

The summary ``user/message`` the compaction put in the model's view is not sent to such a
client (the summary is the compaction's); a client without the capability is sent nothing
for the ``compaction/*`` events and sees that message as before.
"""

from __future__ import annotations

from typing import Any

from ..core.envelope import SessionEvent
from ..core.types import COMPACTION_END, COMPACTION_START, COMPACTION_SUMMARY

__all__ = ["COMPACTION_KINDS", "compaction_updates"]

COMPACTION_KINDS = frozenset((COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END))
"""The events that become compaction updates (``compaction/prune`` shows nothing)."""


def _block(block: Any) -> dict[str, Any] | None:
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind in ("text", "reasoning") and isinstance(block.get("text"), str) and block["text"]:
        return {"type": "text", "text": block["text"]}
    if kind == "image" and isinstance(block.get("data"), str):
        return {"type": "image", "data": block["data"], "mimeType": block.get("mediaType")}
    return None


def compaction_updates(event: SessionEvent) -> list[dict[str, Any]]:
    """The wire updates of one ``compaction/*`` event (none for another event)."""
    data = event.data
    compaction_id = data.get("compactionId")
    if event.type not in COMPACTION_KINDS or not isinstance(compaction_id, str):
        return []
    if event.type == COMPACTION_START:
        return [
            {
                "sessionUpdate": "compaction_update",
                "compactionId": compaction_id,
                "status": "in_progress",
            }
        ]
    if event.type == COMPACTION_SUMMARY:
        summary = data.get("summary")
        blocks = [b for b in map(_block, summary if isinstance(summary, list) else []) if b]
        return [
            {
                "sessionUpdate": "compaction_summary_chunk",
                "compactionId": compaction_id,
                "content": block,
            }
            for block in blocks
        ]
    error = data.get("error")
    update: dict[str, Any] = {
        "sessionUpdate": "compaction_update",
        "compactionId": compaction_id,
        "status": "completed" if error is None else "failed",
    }
    if error is not None:
        update["error"] = str(error)
    return [update]
