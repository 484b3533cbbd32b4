"""The workload of `peers_bench.py` and its floors (`floor_sides.py`): a generated
coding-agent session, the same payloads as bench/store_bench.py."""

from __future__ import annotations

import uuid
from typing import Any

from store_bench import message, todo_write, tool_call

T0 = 1_764_000_000_000
SEP = (",", ":")

Event = tuple[str, int, int, dict[str, Any], str | None]
"""(type, seq, time, data, surface_op)"""


def workload(size: int, start: int = 0) -> list[Event]:
    """Events ``start .. start+size-1`` of the generated coding-agent session."""
    out: list[Event] = []
    for i in range(start, start + size):
        if i % 100 == 99:
            out.append(("todo/write", i, T0 + i, todo_write(i), None))
        elif i % 2:
            out.append(("tool/call", i, T0 + i, tool_call(i), None))
        else:  # a message is on the surface
            out.append(("assistant/message", i, T0 + i, message(i), "append"))
    return out


def new_id(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:16]}"
