"""``session/load`` of a 100,000-event session replays in constant memory.

The agent runs as ``todo-sessions acp`` over stdio; a minimal line client (no SDK: it only
counts the updates, so the client's speed does not matter) loads a one-turn session, reads
the agent's peak resident memory (``VmHWM``), loads the 100,000-event session and reads the
peak again. The bound: less than 50 MB of growth. A replay that held the log (or its
updates) whole would need several times that.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from logs import LogBuilder

from todo_sessions import SessionHeader, SessionStore

pytestmark = pytest.mark.slow

BIG = 100_000
GROWTH_LIMIT = 50 * 1024 * 1024


def peak_rss(pid: int) -> int:
    """The process's peak resident set size in bytes (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")  # pragma: no cover


def big_log() -> tuple[LogBuilder, int]:
    """Completed turns of 12 events (prompt, a tool step, a streamed answer) up to ~100k."""
    log = LogBuilder(validate=False)
    turns = 0
    while log.next_seq + 12 <= BIG:
        turns += 1
        log.exchange(f"prompt {turns}: " + "p" * 40, f"c{turns}", answer="a" * 80)
    return log, turns


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
async def test_load_of_a_100k_event_session_stays_flat(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/big.db"
    log, turns = big_log()
    small = LogBuilder()
    small.exchange("hello", answer="hi")
    async with SessionStore(url, synchronous="NORMAL") as store:
        await store.create(SessionHeader(id="small", created_at=1, cwd=str(tmp_path)))
        await store.append("small", small.events)
        await store.create(SessionHeader(id="big", created_at=1, cwd=str(tmp_path)))
        await store.append("big", log.events)  # one transaction: the fastest build
        assert await store.count("big") == len(log.events) > BIG - 12
    del log

    env = {**os.environ, "TODO_SESSIONS_URL": url, "PYTHONPATH": os.pathsep.join(sys.path)}
    agent = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "todo_sessions", "acp",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env,
        limit=50 * 1024 * 1024,
    )  # fmt: skip
    assert agent.stdin is not None and agent.stdout is not None
    stdin, stdout = agent.stdin, agent.stdout

    async def call(request_id: int, method: str, params: dict[str, Any]) -> dict[str, int]:
        """Send a request; count the updates by kind until its answer."""
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        stdin.write(json.dumps(message).encode() + b"\n")
        await stdin.drain()
        counts: dict[str, int] = {}
        while True:
            line = await stdout.readline()
            assert line, "the agent exited"
            reply = json.loads(line)
            if reply.get("id") == request_id:
                assert "result" in reply, reply
                return counts
            kind = reply["params"]["update"]["sessionUpdate"]
            counts[kind] = counts.get(kind, 0) + 1

    try:
        await call(0, "initialize", {"protocolVersion": 1})
        load = {"cwd": str(tmp_path), "mcpServers": []}
        small_counts = await call(1, "session/load", {**load, "sessionId": "small"})
        assert small_counts["user_message_chunk"] == 1
        baseline = peak_rss(agent.pid)
        big_counts = await call(2, "session/load", {**load, "sessionId": "big"})
        grown = peak_rss(agent.pid) - baseline
    finally:
        stdin.close()
        await asyncio.wait_for(agent.wait(), 30)

    assert big_counts["user_message_chunk"] == turns
    assert big_counts["tool_call"] == big_counts["tool_call_update"] == turns
    assert big_counts["agent_message_chunk"] == turns  # each answer's one streamed chunk
    assert big_counts["usage_update"] == big_counts["session_info_update"] == 1
    assert grown < GROWTH_LIMIT, f"peak RSS grew by {grown / 2**20:.1f} MB"
