"""Cost of building and parsing one event against plain ``json`` (issue "cheap events").

Run:  python bench/events_bench.py [--rounds 15] [--target-ms 20] [--cpu]

For each typical payload (~300 bytes of JSON) it times, side by side in one run:

- build: ``SessionEvent(type, seq, time, data, ...)`` followed by ``validate_event`` (what an
  append runs) against ``json.dumps(data)``;
- parse: ``SessionEvent.from_json(text)`` against ``json.loads(text)``, where ``text`` is the
  event's wire line: our canonical form (``to_json``), and the same event as other producers
  write it (``json.dumps`` with its default spaces after separators, the keys in another order).

The two sides of a pair run alternately, ``--rounds`` times; in each round each side runs
through ``timeit`` for about ``--target-ms`` in total, in four slices interleaved with the other
side's. The table shows the MEDIAN µs per operation of each side with its spread over the
rounds (min-max), and the ratio of the medians (never the best run). Targets: both ratios at
most 2.5x. On a busy machine the spread widens; compare the ratios, which see the same load.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import timeit
from collections.abc import Callable
from functools import partial
from importlib.metadata import version
from typing import Any

from todo_sessions import SessionEvent, validate_event

T0 = 1_764_000_000_000
TARGET = 2.5
SLICES = 4
CLOCK: list[Callable[[], float]] = [time.perf_counter]  # --cpu: time.process_time


def payloads() -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(label, type, data, envelope extras) of the typical events."""
    assistant = {
        "turn": 3,
        "step": 2,
        "message": {
            "id": "msg-01J9Z3K4T5",
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "The failing test expects a trailing newline; I will fix the writer.",
                }
            ],
            "source": {"kind": "model", "provider": "anthropic", "model": "claude-sonnet-4"},
        },
        "usage": {"inputTokens": 18234, "outputTokens": 412, "cacheReadTokens": 17920},
    }
    tool_call = {
        "turn": 3,
        "step": 2,
        "callId": "toolu_01A2B3C4D5E6F7G8H9",
        "name": "edit_file",
        "arguments": json.dumps(
            {
                "path": "src/writer/output.py",
                "old": "    out.write(text)",
                "new": "    out.write(text + '\\n')",
            }
        ),
    }
    todos = {
        "todos": [
            {"content": "Reproduce the failing writer test", "status": "completed"},
            {"content": "Find where the trailing newline is dropped", "status": "completed"},
            {"content": "Fix the writer and keep the API", "status": "in_progress"},
            {"content": "Add a regression test", "status": "pending"},
            {"content": "Run the whole suite", "status": "pending"},
        ]
    }
    user = {
        "id": "u-01J9Z3K0AA",
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": "The export test fails since yesterday's merge: the last line of every "
                "file has no newline. Can you find out why and fix it? Keep the public API.",
            }
        ],
        "source": {"kind": "user"},
    }
    return [
        ("assistant/message", "assistant/message", assistant, {"surface_op": "append"}),
        ("tool/call", "tool/call", tool_call, {}),
        ("todo/write (5 items)", "todo/write", todos, {}),
        ("user/message", "user/message", user, {"surface_op": "append"}),
    ]


def build_and_validate(kind: str, data: Any, extra: dict[str, Any]) -> None:
    """What an append runs on each event it is given."""
    validate_event(SessionEvent(kind, 41, T0, data, **extra))


def calibrate(fn: Callable[[], Any], target_ms: float) -> int:
    number, seconds = timeit.Timer(fn, timer=CLOCK[0]).autorange()
    return max(1, round(number * target_ms / 1000 / seconds))


def side_by_side(
    baseline: Callable[[], Any], ours: Callable[[], Any], rounds: int, target_ms: float
) -> tuple[list[float], list[float]]:
    """Per-op µs of each side over ``rounds`` alternating rounds.

    Within a round each side runs in ``SLICES`` interleaved slices (base, ours, ours, base, ...)
    whose times add up, so a burst of load from elsewhere falls on both sides alike.
    """
    n_base = max(1, calibrate(baseline, target_ms) // SLICES)
    n_ours = max(1, calibrate(ours, target_ms) // SLICES)
    base_t, ours_t = timeit.Timer(baseline, timer=CLOCK[0]), timeit.Timer(ours, timer=CLOCK[0])
    base: list[float] = []
    mine: list[float] = []
    for _ in range(rounds):
        spent = {"base": 0.0, "ours": 0.0}
        for i in range(SLICES):
            order = [("base", base_t, n_base), ("ours", ours_t, n_ours)]
            for side, timer, number in order if i % 2 == 0 else order[::-1]:
                spent[side] += timer.timeit(number)
        base.append(spent["base"] / (n_base * SLICES) * 1e6)
        mine.append(spent["ours"] / (n_ours * SLICES) * 1e6)
    return base, mine


def cell(samples: list[float]) -> str:
    return f"{statistics.median(samples):7.2f} ({min(samples):.2f}-{max(samples):.2f})"


def main(rounds: int, target_ms: float) -> None:
    print(
        f"python {platform.python_version()}, {platform.machine()}, orjson {version('orjson')}, "
        f"pydantic {version('pydantic')}; {rounds} alternating rounds"
    )
    print("median µs/op (min-max over rounds); ratio = median / median\n")
    header = f"{'payload':<22} {'bytes':>5}  {'op':<38} {'baseline':>21}  {'ours':>21}  ratio"
    print(header)
    print("-" * len(header))
    worst = 0.0
    for label, kind, data, extra in payloads():
        event = SessionEvent(kind, 41, T0, data, **extra)
        validate_event(event)
        text = event.to_json()
        spaced = json.dumps(dict(reversed(event.to_dict().items())), ensure_ascii=False)
        assert SessionEvent.from_json(spaced) == event

        cases: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
            (
                "json.dumps vs SessionEvent+validate",
                partial(json.dumps, data),
                partial(build_and_validate, kind, data, extra),
            ),
            (
                "json.loads vs SessionEvent.from_json",
                partial(json.loads, text),
                partial(SessionEvent.from_json, text),
            ),
            (
                "  same, json.dumps text (spaces)",
                partial(json.loads, spaced),
                partial(SessionEvent.from_json, spaced),
            ),
        ]
        for op, baseline, ours in cases:
            base, mine = side_by_side(baseline, ours, rounds, target_ms)
            ratio = statistics.median(mine) / statistics.median(base)
            worst = max(worst, ratio)
            flag = "ok" if ratio <= TARGET else "OVER"
            size = len(event.data_json.encode())
            print(
                f"{label:<22} {size:>5}  {op:<38} {cell(base)}  {cell(mine)}  {ratio:4.2f}x {flag}"
            )
    print(f"\nworst ratio {worst:.2f}x (target <= {TARGET}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--target-ms", type=float, default=20.0)
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="time with the process's CPU clock instead of the wall clock (a busy machine)",
    )
    args = parser.parse_args()
    if args.cpu:
        CLOCK[0] = time.process_time
    main(args.rounds, args.target_ms)
