"""The SDK session adapters against the SDKs' own stores, on the same transcripts.

Run (from the repository root)::

    .venv/bin/python bench/integrations_bench.py              # SQLite file, 9 rounds
    .venv/bin/python bench/integrations_bench.py --quick      # 3 short rounds
    TODO_SESSIONS_PG_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/integrations_bench.py --backend postgres

Rows (each side works on a fresh session every round):

- claude append: a Claude Code transcript of ``--entries`` lines (a prompt, then per step an
  assistant text line, a ``Bash`` tool use and its result; a ``TodoWrite`` every 10th step),
  appended in batches of ``--batch`` lines, as the SDK's transcript mirror flushes them.
  Product: `TodoSessionsStore` (uuid deduplication, the summary fold, the typed mapping, one
  durable append per batch). Baseline: the SDK's own ``InMemorySessionStore`` (the summary
  fold, no storage at all: an upper bound, not a like-for-like store; the SDK ships no SQLite
  store). Lines/s.
- claude load: ``load`` of that whole transcript. Lines/s.
- agents add: an Agents SDK conversation of ``--entries`` items (a user message, then per
  step a function call, its output and an assistant message), added in turns of 4 items.
  Product: `TodoSessionsSession`. Baseline: the SDK's ``SQLiteSession`` on a file in the same
  directory. Items/s.
- agents get: ``get_items()`` of that whole conversation. Items/s.

Method: product and baseline alternate (product, baseline, product, ...), one untimed warm-up
of each first, ``gc.collect()`` before each timed run; each row reports the median over the
rounds with the p25-p75 spread and the ratio of the medians (product / baseline, above 1 the
product is faster). Never the best run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents import SQLiteSession
from claude_agent_sdk import InMemorySessionStore

from todo_sessions import SessionStore
from todo_sessions.integrations.claude_agent_sdk import TodoSessionsStore
from todo_sessions.integrations.openai_agents import TodoSessionsSession


def claude_transcript(n: int) -> list[dict[str, Any]]:
    """``n`` transcript lines of one session (fresh uuids each call)."""
    sid = str(uuid.uuid4())
    lines: list[dict[str, Any]] = []

    def add(kind: str, message: dict[str, Any], **extra: Any) -> None:
        lines.append(
            {
                "type": kind,
                "uuid": str(uuid.uuid4()),
                "parentUuid": lines[-1]["uuid"] if lines else None,
                "sessionId": sid,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "cwd": "/work/project",
                "isSidechain": False,
                "message": message,
                **extra,
            }
        )

    add("user", {"role": "user", "content": "Fix the failing tests"})
    step = 0
    while len(lines) < n:
        step += 1
        model = {"role": "assistant", "model": "claude-sonnet-4-5", "id": f"msg_{step}"}
        text = {"type": "text", "text": f"Step {step}: looking at the next failure. " * 3}
        add("assistant", {**model, "content": [text]})
        if step % 10 == 1:
            todos = [
                {
                    "content": f"Fix test {k}",
                    "status": "completed" if k < step // 10 else "pending",
                    "activeForm": f"Fixing test {k}",
                }
                for k in range(5)
            ]
            use = {
                "type": "tool_use",
                "id": f"todo_{step}",
                "name": "TodoWrite",
                "input": {"todos": todos},
            }
        else:
            use = {
                "type": "tool_use",
                "id": f"bash_{step}",
                "name": "Bash",
                "input": {"command": f"pytest tests/test_{step}.py -q"},
            }
        add("assistant", {**model, "content": [use]})
        result = {"type": "tool_result", "tool_use_id": use["id"], "content": "3 passed " * 20}
        add("user", {"role": "user", "content": [result]})
    return lines[:n]


def agents_items(n: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing tests"}]
    step = 0
    while len(items) < n:
        step += 1
        call = f"call_{step}"
        items.append(
            {
                "type": "function_call",
                "call_id": call,
                "name": "shell",
                "arguments": f'{{"command": "pytest tests/test_{step}.py"}}',
                "id": f"fc_{step}",
                "status": "completed",
            }
        )
        items.append({"type": "function_call_output", "call_id": call, "output": "3 passed " * 20})
        items.append(
            {
                "role": "assistant",
                "type": "message",
                "id": f"msg_{step}",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": f"Step {step} passes. " * 3, "annotations": []}
                ],
            }
        )
    return items[:n]


class PlainSQLiteStore:
    """A minimal durable Claude store for comparison: one ``sqlite3`` table of JSON lines
    (WAL, synchronous=FULL, like the product), ``INSERT OR IGNORE`` on a unique
    ``(project, session, uuid)``, one transaction per batch, on the event-loop thread. No
    summary, no mapping, no listing."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS lines (id INTEGER PRIMARY KEY, project TEXT, "
            "session TEXT, uuid TEXT, entry TEXT, UNIQUE (project, session, uuid))"
        )

    async def append(self, key: dict[str, Any], entries: list[dict[str, Any]]) -> None:
        rows = [
            (key["project_key"], key["session_id"], e.get("uuid"), json.dumps(e)) for e in entries
        ]
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany(
            "INSERT OR IGNORE INTO lines (project, session, uuid, entry) VALUES (?, ?, ?, ?)",
            rows,
        )
        self.db.execute("COMMIT")

    async def load(self, key: dict[str, Any]) -> list[dict[str, Any]] | None:
        rows = self.db.execute(
            "SELECT entry FROM lines WHERE project = ? AND session = ? ORDER BY id",
            (key["project_key"], key["session_id"]),
        ).fetchall()
        return [json.loads(r[0]) for r in rows] or None


def clock() -> float:
    gc.collect()
    return time.perf_counter()


async def claude_side(store: Any, lines: list[dict[str, Any]], batch: int) -> tuple[float, float]:
    key = {"project_key": "bench", "session_id": lines[0]["sessionId"]}
    start = clock()
    for i in range(0, len(lines), batch):
        await store.append(key, lines[i : i + batch])
    appended = time.perf_counter() - start
    start = clock()
    loaded = await store.load(key)
    load = time.perf_counter() - start
    assert loaded == lines
    return len(lines) / appended, len(lines) / load


async def agents_side(session: Any, items: list[dict[str, Any]]) -> tuple[float, float]:
    start = clock()
    for i in range(0, len(items), 4):
        await session.add_items(items[i : i + 4])
    added = time.perf_counter() - start
    start = clock()
    got = await session.get_items()
    get = time.perf_counter() - start
    assert got == items
    return len(items) / added, len(items) / get


def summary(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{statistics.median(values):>10,.0f} [{q[0]:,.0f}-{q[2]:,.0f}]"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=25)
    parser.add_argument("--quick", action="store_true", help="3 rounds of 500 entries")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.entries = 3, 500
    tmp = Path(tempfile.mkdtemp(prefix="integrations-bench-"))
    url = f"sqlite:///{tmp}/store.db"
    if args.backend == "postgres":
        url = os.environ.get(
            "TODO_SESSIONS_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        )
    print(f"python {platform.python_version()}, {platform.platform()}, {os.cpu_count()} CPUs")
    print(
        f"product store: {url.split('@')[-1]}; {args.rounds} alternating rounds, "
        f"{args.entries} entries, Claude batches of {args.batch}, Agents turns of 4 items"
    )
    names = ["claude append", "claude load", "agents add", "agents get"]
    product: dict[str, list[float]] = {name: [] for name in names}
    baselines: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    began = time.perf_counter()
    plain = PlainSQLiteStore(tmp / "plain.db")
    async with SessionStore(url) as store:
        ours = TodoSessionsStore(store)

        async def run_round(timed: bool) -> None:
            lines, items = claude_transcript(args.entries), agents_items(args.entries)
            again = claude_transcript(args.entries)
            sid = f"bench-{uuid.uuid4().hex[:12]}"
            theirs = SQLiteSession(sid, tmp / f"{sid}.db")
            batch = args.batch
            sides: list[tuple[str, str, Callable[[], Awaitable[tuple[float, float]]]]] = [
                ("claude", "", lambda: claude_side(ours, lines, batch)),
                (
                    "claude",
                    "InMemorySessionStore",
                    lambda: claude_side(InMemorySessionStore(), lines, batch),
                ),
                ("claude", "", lambda: claude_side(ours, again, batch)),
                ("claude", "plain sqlite3", lambda: claude_side(plain, again, batch)),
                ("agents", "", lambda: agents_side(TodoSessionsSession(sid, store), items)),
                ("agents", "SQLiteSession", lambda: agents_side(theirs, items)),
            ]
            for sdk, baseline, run in sides:
                first, second = await run()
                if not timed:
                    continue
                pair = (
                    ("claude append", "claude load")
                    if sdk == "claude"
                    else ("agents add", "agents get")
                )
                for name, value in zip(pair, (first, second), strict=True):
                    if baseline:
                        baselines[name].setdefault(baseline, []).append(value)
                    else:
                        product[name].append(value)
            theirs.close()

        await run_round(timed=False)
        for _ in range(args.rounds):
            await run_round(timed=True)
    plain.db.close()
    print()
    columns = f"{'product median [p25-p75]':>28} {'baseline median [p25-p75]':>30}"
    header = f"{'row':<14} {'unit':<8} {'baseline':<21} {columns}  ratio"
    print(header)
    print("-" * len(header))
    for name in names:
        unit = "lines/s" if name.startswith("claude") else "items/s"
        for baseline, values in baselines[name].items():
            ratio = statistics.median(product[name]) / statistics.median(values)
            print(
                f"{name:<14} {unit:<8} {baseline:<21} {summary(product[name]):>28} "
                f"{summary(values):>30}  {ratio:.2f}x"
            )
    print(f"\n({time.perf_counter() - began:.0f} s)")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
