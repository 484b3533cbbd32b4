"""Compaction (issue #23): `Session.compact` on long sessions, and deriving the history after.

    python bench/compaction_bench.py [--sizes 10000,100000] [--rounds 7]

The session: turns of a user prompt, one step with an assistant message calling a tool, the
``tool/call``, a ``tool/result`` of about 1 KB, a ``todo/write``, and the closers (8 events per
turn), closed. 100,000 events are 12,500 turns and 37,500 surface nodes.

For each size, in alternating rounds (median and p25-p75, milliseconds):

- ``compact``: `Session.compact` with the default span (everything before the last prompt)
  on a live session (a fresh copy of the folded state each round), which checks the span,
  builds the summary with its plan block and appends the four events on a trial copy;
- ``derive after``: resuming from the checkpoint written after the compaction and taking
  ``derive_messages()`` (what a resumed session pays for its history: the checkpoint's surface
  nodes are decoded then), against the same from a checkpoint of the session not compacted:
  the compacted side costs the kept tail, the other the whole conversation;
- ``store.derive_messages``: the same through a SQLite file store (newest checkpoint + rows
  after it), compacted against not compacted.

The compacted side should stay flat from 10k to 100k events; the other grows with the log.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from todo_sessions import Session, SessionEvent, SessionHeader, SessionStore
from todo_sessions.core.checkpoint import LiveState, fold

OUTPUT = "lorem ipsum dolor sit amet " * 40


def build(size: int) -> list[SessionEvent]:
    events: list[SessionEvent] = []

    def add(kind: str, data: dict[str, Any], **envelope: Any) -> int:
        seq = len(events)
        events.append(SessionEvent(kind, seq, 1_764_000_000_000 + seq, data, **envelope))
        return seq

    turn = 0
    while len(events) + 8 <= size:
        turn += 1
        add("turn/start", {"turn": turn})
        user = {"type": "text", "text": f"please do step {turn}"}
        add(
            "user/message",
            {"id": f"u{turn}", "role": "user", "content": [user], "source": {"kind": "user"}},
            surface_op="append",
        )
        add("step/start", {"turn": turn, "step": 1})
        call = {"type": "tool-call", "id": f"c{turn}", "name": "read", "arguments": "{}"}
        add(
            "assistant/message",
            {
                "turn": turn,
                "step": 1,
                "message": {
                    "id": f"a{turn}",
                    "role": "assistant",
                    "content": [call],
                    "source": {"kind": "model", "provider": "p", "model": "m"},
                },
            },
            surface_op="append",
        )
        call_seq = add(
            "tool/call",
            {"turn": turn, "step": 1, "callId": f"c{turn}", "name": "read", "arguments": "{}"},
        )
        result = {
            "type": "tool-result",
            "toolCallId": f"c{turn}",
            "content": [{"type": "text", "text": OUTPUT}],
        }
        add(
            "tool/result",
            {
                "turn": turn,
                "step": 1,
                "message": {
                    "id": f"r{turn}",
                    "role": "user",
                    "source": {"kind": "tool", "callId": f"c{turn}"},
                    "content": [result],
                },
            },
            surface_op="append",
            source_event_seqs=[call_seq],
        )
        add("step/end", {"turn": turn, "step": 1})
        add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    # the last turn writes the plan
    events.insert(
        len(events) - 2,
        SessionEvent("todo/write", 0, 0, {"todos": [{"content": "go on", "status": "pending"}]}),
    )
    return [e.replace(seq=seq, time=1_764_000_000_000 + seq) for seq, e in enumerate(events)]


def quartiles(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{statistics.median(values):9.2f} [{q[0]:.2f}-{q[2]:.2f}]"


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


async def run_size(size: int, rounds: int, directory: Path) -> list[tuple[str, str, str]]:
    header = SessionHeader(id=f"b{size}", created_at=0)
    events = build(size)
    plain = fold(events)
    live = Session(header, state=plain.copy())
    live.compact("The earlier turns read files.")
    compacted = live.checkpoint_state()
    plain_text, compacted_text = plain.encode(), compacted.encode()
    tail = live.events_from(plain.next_seq)

    def compact_once() -> None:
        Session(header, state=plain.copy()).compact("The earlier turns read files.")

    def derive(text: str, seq: int) -> Callable[[], None]:
        def run() -> None:
            Session(header, state=LiveState.decode(text, seq=seq)).derive_messages()

        return run

    url = f"sqlite:///{directory / f'b{size}.db'}"
    async with SessionStore(url) as store:
        for sid, log in (("plain", events), ("compacted", [*events, *tail])):
            await store.create(SessionHeader(id=sid, created_at=0))
            for start in range(0, len(log), 5000):
                await store.append(sid, log[start : start + 5000])
        await store.write_checkpoint("plain", plain)
        await store.write_checkpoint("compacted", compacted)

        compact_ms: list[float] = []
        derive_after: list[float] = []
        derive_plain: list[float] = []
        store_after: list[float] = []
        store_plain: list[float] = []
        for _ in range(rounds):
            compact_ms.append(timed(compact_once))
            derive_after.append(timed(derive(compacted_text, compacted.next_seq)))
            derive_plain.append(timed(derive(plain_text, plain.next_seq)))
            start = time.perf_counter()
            after = await store.derive_messages("compacted")
            store_after.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            before = await store.derive_messages("plain")
            store_plain.append((time.perf_counter() - start) * 1000)
        assert len(after) == 4 and len(before) == len(plain.surface)
    nodes = len(plain.surface)
    return [
        (f"{size:,} events ({nodes:,} nodes)", "compact", quartiles(compact_ms)),
        ("", "derive after, compacted (4 nodes)", quartiles(derive_after)),
        ("", f"derive after, not compacted ({nodes:,} nodes)", quartiles(derive_plain)),
        ("", "store.derive_messages, compacted", quartiles(store_after)),
        ("", "store.derive_messages, not compacted", quartiles(store_plain)),
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"python {platform.python_version()}, {platform.platform()}, rounds {args.rounds}")
    print("milliseconds: median [p25-p75] of alternating rounds")
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as directory:
        for size in sizes:
            rows += await run_size(size, args.rounds, Path(directory))
    for session, what, value in rows:
        print(f"{session:<28} {what:<42} {value}")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
