"""Import throughput of Codex rollout files against reading and ``json.loads`` of them alone.

Run (from the repository root)::

    .venv/bin/python bench/import_bench.py                 # 1,000 sessions, 3 rounds
    .venv/bin/python bench/import_bench.py --sessions 10000 --rounds 3

Corpus (generated once, untimed): ``--sessions`` rollout files of mixed size, each a
``session_meta`` line and 1 to 40 turns of the committed fixture's turn (a prompt, reasoning,
an ``update_plan`` call, a shell call, their outputs, an answer, token counts: 19 lines a turn),
so files run from 20 to about 760 lines.

Rows, in the same round, alternating which goes first:

- read: every file read and each line parsed with ``json.loads`` (the floor any importer pays);
- import: `import_paths` with `CodexImporter` into a new SQLite file store (the whole
  pipeline: discovery, reading, mapping, one append per file, search index).

Reported: lines/s of each (median over rounds, p25-p75 spread) and import / read.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from todo_sessions import SessionStore
from todo_sessions.importers import CodexImporter, import_paths

FIXTURE = next(
    (Path(__file__).resolve().parents[1] / "tests/fixtures/importers/codex/sessions").rglob(
        "rollout-*0199d0a4*.jsonl"
    )
)


def corpus(root: Path, sessions: int, seed: int = 7) -> int:
    """Write the rollout files; the number of lines written."""
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    head, turn = lines[0], lines[3:22]
    rng = random.Random(seed)
    total = 0
    day = root / "sessions" / "2025" / "10" / "11"
    day.mkdir(parents=True)
    for n in range(sessions):
        thread = f"0199d0a4-0000-7000-8000-{n:012d}"
        meta = json.loads(head)
        meta["payload"]["id"] = thread
        out = [json.dumps(meta, separators=(",", ":"))]
        out += turn * rng.randint(1, 40)
        (day / f"rollout-2025-10-11T09-00-00-{thread}.jsonl").write_text(
            "".join(line + "\n" for line in out), encoding="utf-8"
        )
        total += len(out)
    return total


def read_all(root: Path) -> int:
    count = 0
    for path in sorted(root.rglob("rollout-*.jsonl")):
        with path.open("rb") as handle:
            for raw in handle:
                json.loads(raw)
                count += 1
    return count


async def import_all(root: Path, db: Path) -> int:
    async with SessionStore(f"sqlite:///{db}") as store:
        results = await import_paths(store, CodexImporter(), [root / "sessions"])
    return sum(r.lines for r in results)


def timed_read(root: Path) -> tuple[float, int]:
    gc.collect()
    start = time.perf_counter()
    lines = read_all(root)
    return time.perf_counter() - start, lines


def timed_import(root: Path, db: Path) -> tuple[float, int]:
    gc.collect()
    start = time.perf_counter()
    lines = asyncio.run(import_all(root, db))
    return time.perf_counter() - start, lines


def spread(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{statistics.median(values):,.0f} lines/s (p25-p75 {q[0]:,.0f}-{q[2]:,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        total = corpus(root, args.sessions)
        print(f"{args.sessions:,} rollout files, {total:,} lines; load {os.getloadavg()}")
        reads: list[float] = []
        imports: list[float] = []
        for r in range(args.rounds):
            order = ["read", "import"] if r % 2 == 0 else ["import", "read"]
            for what in order:
                if what == "read":
                    seconds, lines = timed_read(root)
                    reads.append(lines / seconds)
                else:
                    seconds, lines = timed_import(root, root / f"store-{r}.db")
                    imports.append(lines / seconds)
                assert lines == total, (what, lines, total)
        print(f"read + json.loads: {spread(reads)}")
        print(f"import:            {spread(imports)}")
        ratios = [a / b for a, b in zip(reads, imports, strict=True)]
        print(f"import / read:     {statistics.median(ratios):.1f}x; load {os.getloadavg()}")


if __name__ == "__main__":
    main()
