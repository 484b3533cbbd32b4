"""Two versions of the store side by side: `store_bench.py`'s store rows, alternating.

Run (from the repository root; BASE is a copy of the older commit's tree)::

    git archive main | tar -x -C /tmp/base   # and, to edit on meanwhile: --this <a copy>
    .venv/bin/python bench/chain_ab.py --base /tmp/base --runs 6 --rounds 3 \\
        --only single,batch100,read [--backend postgres]

Each run is one ``bench/store_bench.py --only ... --rounds R`` in a fresh process, with the
base tree or this one first on ``PYTHONPATH`` (base, this, base, this, ...: one run of each
per alternation, so both share the machine's drift). Of each run it takes the store's median
per row (the baseline column of store_bench is ignored); it reports, per row and version, the
median of those over the runs with the p25-p75 spread, and the ratio this / base of the
medians and of each alternation's pair ("paired").
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^(single|batch100|read \S+)\s+ev/s\s+([\d,]+) \[")


def run_once(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(tree / "bench" / "store_bench.py"), "--only", args.only]
    cmd += ["--rounds", str(args.rounds), "--backend", args.backend]
    out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=True)
    found = {}
    for line in out.stdout.splitlines():
        match = ROW.match(line.strip())
        if match:
            found[match[1]] = float(match[2].replace(",", ""))
    return found


def spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:,.0f}"
    p25, p50, p75 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{p50:,.0f} [{p25:,.0f}-{p75:,.0f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--this", type=Path, default=HERE, help="this tree (default: here)")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="single,batch100,read")
    parser.add_argument("--backend", default="sqlite", choices=("sqlite", "postgres"))
    args = parser.parse_args()
    base: dict[str, list[float]] = {}
    this: dict[str, list[float]] = {}
    for i in range(args.runs):
        for tree, into in ((args.base, base), (args.this, this)):
            for row, value in run_once(tree, args).items():
                into.setdefault(row, []).append(value)
        print(f"run {i + 1}/{args.runs} done", file=sys.stderr, flush=True)
        table(args, i + 1, base, this)  # after each run: a long run can be cut short


def table(
    args: argparse.Namespace, runs: int, base: dict[str, list[float]], this: dict[str, list[float]]
) -> None:
    print(f"{args.backend}: store ev/s, median [p25-p75] of {runs} runs of {args.rounds} rounds")
    print(f"{'row':<12} {'base':>26} {'this':>26} {'ratio':>6} {'paired':>6}")
    for row in base:
        b, t = base[row], this[row]
        ratio = statistics.median(t) / statistics.median(b)
        paired = statistics.median(x / y for x, y in zip(t, b, strict=True))
        print(f"{row:<12} {spread(b):>26} {spread(t):>26} {ratio:>5.2f}x {paired:>5.2f}x")
    print(flush=True)


if __name__ == "__main__":
    main()
