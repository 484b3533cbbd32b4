"""The ACP bridge's ``session/list`` and ``session/load`` against the store reads under them.

Run (from the repository root)::

    .venv/bin/python bench/acp_bench.py             # 10,000 sessions, a 100,000-event session
    .venv/bin/python bench/acp_bench.py --quick     # 1,000 sessions, 20,000 events, 3 rounds
    .venv/bin/python bench/acp_bench.py --keep /tmp/acp.db   # build once, reuse the file

Population (built once, untimed, on SQLite): 10,000 sessions of one small turn each (a
prompt, a streamed answer), every other one titled, cwd one of 20 projects; and one session
of 100,000 events (turns of a prompt, a tool step and a streamed answer: 12 events, 4
updates each).

Rows, each product against its baseline in the same round:

- ``session/list`` first page: `TodoSessionsAgent.list_sessions` (`LIST_PAGE_SIZE` entries,
  titles of untitled sessions read from their first user message) against
  ``store.list(limit=LIST_PAGE_SIZE + 1)``.
- ``session/list`` deep page: the same, from the cursor after the 5,000th session (the
  store's ``before=`` that session).
- ``session/load`` replay of the 100,000-event session: the agent's whole ``session/load``
  through the agent's connection into its own stdio transport (`GuardedStdioTransport`, every
  message serialised to its JSON line) over a writer that drops the bytes (no pipe, so the
  replay's own cost) against reading the same
  session with ``store.stream`` alone. Reported as seconds, events/s, updates/s and the
  ratio replay / read (target: at most 2x).

Method: the rounds alternate the order of product and baseline; ``gc.collect()`` before each
timing; list rows time the median of 5 calls per round. Each row reports the median over the
rounds and the p25-p75 spread.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from todo_sessions import SessionEvent, SessionHeader, SessionService, SessionStore
from todo_sessions.acp.agent import LIST_PAGE_SIZE, TodoSessionsAgent
from todo_sessions.acp.connection import AgentConnection
from todo_sessions.acp.jsonrpc import GuardedStdioTransport
from todo_sessions.acp.listing import encode_cursor

T0 = 1_764_000_000_000
MODEL = {"kind": "model", "provider": "p", "model": "m"}
CALLS = 5


def small_session(i: int) -> list[SessionEvent]:
    """One turn: a prompt, a streamed two-chunk answer (7 events)."""
    user = {"id": f"u{i}", "role": "user", "source": {"kind": "user"}}
    user["content"] = [{"type": "text", "text": f"task {i}\nwith details"}]
    chunk = {"type": "text-delta", "index": 0, "text": "an answer "}
    message = {"id": f"a{i}", "role": "assistant", "source": MODEL}
    message["content"] = [{"type": "text", "text": "an answer an answer "}]
    rows: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("turn/start", {"turn": 1}, {}),
        ("user/message", user, {"surface_op": "append"}),
        ("step/start", {"turn": 1, "step": 1}, {}),
        ("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk}, {}),
        ("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk}, {}),
        (
            "assistant/message",
            {"turn": 1, "step": 1, "message": message},
            {"surface_op": "append", "source_event_seqs": [3, 4]},
        ),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}, {}),
    ]
    return [SessionEvent(t, n, T0 + n, d, **e) for n, (t, d, e) in enumerate(rows)]


def big_session(size: int) -> list[SessionEvent]:
    """Completed turns of 12 events (prompt, tool step, streamed answer) up to ``size``."""
    out: list[SessionEvent] = []

    def add(kind: str, data: dict[str, Any], **extra: Any) -> None:
        out.append(SessionEvent(kind, len(out), T0 + len(out), data, **extra))

    turn = 0
    while len(out) + 12 <= size:
        turn += 1
        step = {"turn": turn, "step": 1}
        user = {"id": f"u{turn}", "role": "user", "source": {"kind": "user"}}
        user["content"] = [{"type": "text", "text": f"prompt {turn}: " + "p" * 200}]
        call = {"type": "tool-call", "id": f"c{turn}", "name": "read", "arguments": "{}"}
        asks = {"id": f"a{turn}", "role": "assistant", "source": MODEL, "content": [call]}
        result = {
            "id": f"r{turn}",
            "role": "user",
            "source": {"kind": "tool", "callId": f"c{turn}"},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": f"c{turn}",
                    "content": [{"type": "text", "text": "r" * 200}],
                }
            ],
        }
        text = "a" * 300
        answer = {"id": f"b{turn}", "role": "assistant", "source": MODEL}
        answer["content"] = [{"type": "text", "text": text}]
        add("turn/start", {"turn": turn})
        add("user/message", user, surface_op="append")
        add("step/start", step)
        add("assistant/message", {**step, "message": asks}, surface_op="append")
        call_seq = len(out)
        add("tool/call", {**step, "callId": f"c{turn}", "name": "read", "arguments": "{}"})
        add("tool/result", {**step, "message": result}, surface_op="append",
            source_event_seqs=[call_seq])  # fmt: skip
        add("step/end", step)
        step2 = {"turn": turn, "step": 2}
        add("step/start", step2)
        chunk_seq = len(out)
        chunk = {"type": "text-delta", "index": 0, "text": text}
        add("assistant/chunk", {**step2, "chunk": chunk})
        add("assistant/message", {**step2, "message": answer}, surface_op="append",
            source_event_seqs=[chunk_seq])  # fmt: skip
        add("step/end", step2)
        add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return out


async def build(url: str, sessions: int, big: int) -> None:
    async with SessionStore(url, synchronous="NORMAL") as store:
        if await store.list(limit=1):
            return  # --keep: built already
        for start in range(0, sessions, 200):
            group = range(start, min(start + 200, sessions))
            for i in group:
                title = f"session {i}" if i % 2 else None
                header = SessionHeader(
                    id=f"s{i:05d}", created_at=T0, cwd=f"/src/project-{i % 20}", title=title
                )
                await store.create(header)
            await asyncio.gather(*(store.append(f"s{i:05d}", small_session(i)) for i in group))
        await store.create(SessionHeader(id="big", created_at=T0, cwd="/src/big"))
        events = big_session(big)
        for start in range(0, len(events), 20_000):
            await store.append("big", events[start : start + 20_000])


class _NullWriter:
    """A stream writer that counts what it is given and drops it."""

    def __init__(self) -> None:
        self.bytes = 0
        self.lines = 0

    def write(self, data: bytes) -> None:
        self.bytes += len(data)
        self.lines += data.count(b"\n")

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None


class Discard(GuardedStdioTransport):
    """The agent's own stdio transport (each message serialised to its JSON line, written,
    drained) over a writer that drops the bytes: the wire's cost without a pipe."""

    def __init__(self) -> None:
        self.writer = _NullWriter()
        super().__init__(asyncio.StreamReader(), self.writer)  # type: ignore[arg-type]

    @property
    def messages(self) -> int:
        return self.writer.lines

    async def receive(self) -> dict[str, Any] | None:
        return None


async def timed(fn: Callable[[], Awaitable[Any]], calls: int = 1) -> float:
    gc.collect()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def spread(values: list[float], scale: float = 1.0, unit: str = "ms") -> str:
    values = sorted(v * scale for v in values)
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{statistics.median(values):9.2f} {unit} (p25-p75 {q[0]:.2f}-{q[2]:.2f})"


async def run(url: str, rounds: int) -> None:
    service = SessionService(SessionStore(url))
    async with service:
        store = service.store
        agent = TodoSessionsAgent(service)
        transport = Discard()
        AgentConnection(agent, transport)
        await agent.initialize(protocol_version=1)
        listed = await store.list(limit=5000)
        deep = listed[min(4999, len(listed) // 2)]  # the 5,000th (--quick: the middle one)
        cursor = encode_cursor(store.store_id, deep.updated_at, deep.id)
        big_events = await store.count("big")

        async def list_first() -> None:
            await agent.list_sessions()

        async def store_first() -> None:
            await store.list(limit=LIST_PAGE_SIZE + 1)

        async def list_deep() -> None:
            await agent.list_sessions(cursor=cursor)

        async def store_deep() -> None:
            await store.list(limit=LIST_PAGE_SIZE + 1, before=deep)

        async def load() -> None:
            await agent.load_session(cwd="/src/big", session_id="big")

        async def read() -> None:
            async for _ in store.stream("big"):
                pass

        before = transport.messages
        await load()  # warm-up, and the number of updates one load sends
        updates = transport.messages - before - 1
        await agent.aclose()
        pairs = {
            "session/list first page": (list_first, store_first, CALLS),
            "session/list deep page": (list_deep, store_deep, CALLS),
            "session/load replay": (load, read, 1),
        }
        results: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in pairs}
        for r in range(rounds):
            for name, (product, baseline, calls) in pairs.items():
                order = [(0, product), (1, baseline)]
                for side, fn in order if r % 2 == 0 else order[::-1]:
                    results[name][side].append(await timed(fn, calls))
                await agent.aclose()

    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus")
    sessions = len(await _count_sessions(url))
    print(f"{sessions} sessions; the big one {big_events} events, {updates} updates per load")
    print(f"{rounds} rounds, median (p25-p75)\n")
    for name in ("session/list first page", "session/list deep page"):
        product, baseline = results[name]
        print(f"{name:28} agent {spread(product, 1000)}   store.list {spread(baseline, 1000)}")
    product, baseline = results["session/load replay"]
    ratio = [p / b for p, b in zip(product, baseline, strict=True)]
    print(f"{'session/load replay':28} agent {spread(product, 1, 's')}   "
          f"store.stream {spread(baseline, 1, 's')}")  # fmt: skip
    load_s, read_s = statistics.median(product), statistics.median(baseline)
    print(
        f"{'':28} replay {big_events / load_s:,.0f} events/s, {updates / load_s:,.0f} "
        f"updates/s; read {big_events / read_s:,.0f} events/s"
    )
    print(f"{'':28} replay / read: {spread(ratio, 1, 'x')} (target <= 2x)")


async def _count_sessions(url: str) -> list[str]:
    async with SessionStore(url) as store:
        return [sid async for sid in store.session_ids()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="1,000 sessions, 20,000 events")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="SQLite file to build or reuse")
    args = parser.parse_args()
    sessions, big = (1_000, 20_000) if args.quick else (10_000, 100_000)
    rounds = args.rounds or (3 if args.quick else 7)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "acp.db"
        url = f"sqlite:///{path}"
        started = time.perf_counter()
        asyncio.run(build(url, sessions, big))
        print(f"built in {time.perf_counter() - started:.1f} s ({path})", file=sys.stderr)
        asyncio.run(run(url, rounds))


if __name__ == "__main__":
    main()
