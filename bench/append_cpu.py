"""What an append costs in CPU, beside plain ``sqlite3``: a figure that a loaded disk moves less.

Run (from the repository root)::

    .venv/bin/python bench/append_cpu.py              # 9 alternating rounds
    .venv/bin/python bench/append_cpu.py --rounds 5

`bench/peers_bench.py`'s ``limit`` and ``store`` sides (WAL, ``synchronous=FULL``, the search
index on), alternating in each round: 300 single-event appends and 30 appends of 100 events,
each on a fresh session. Per run: events/s of wall time, and the process's CPU time per event
(``time.process_time``: every thread of the process, so the store's writer thread and its
catch-up of the search index too; the store's runs end with a search that brings the deferred
index up to date, inside the CPU figure and outside the wall one). On a machine whose disk other
work keeps busy the wall figures follow the fsyncs; the CPU figures follow the code. Medians of
the rounds [p25-p75], and the store's ratio to the limit (above 1: slower / more CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers_bench import LimitSide, Side, StoreSide, workload


async def one_run(side: Side, count: int, per: int) -> tuple[float, float]:
    """(events/s of wall time, CPU µs per event)."""
    handle = await side.session()
    chunks = [workload(per, first) for first in range(1, count * per + 1, per)]
    cpu, wall = time.process_time(), time.perf_counter()
    for chunk in chunks:
        await side.append(handle, chunk)
    elapsed = time.perf_counter() - wall
    if isinstance(side, StoreSide):
        await side.store.search("settle")  # the deferred index's work: counted in CPU
    used = time.process_time() - cpu
    return count * per / elapsed, used / (count * per) * 1e6


def spread(values: list[float]) -> str:
    p25, p50, p75 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{p50:,.1f} [{p25:,.1f}-{p75:,.1f}]"


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sides: list[Side] = [
            LimitSide(Path(tmp) / "limit.db"),
            await StoreSide.open(Path(tmp) / "store.db"),
        ]
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        try:
            for r in range(rounds + 1):  # the first round warms up
                for side in sides if r % 2 else sides[::-1]:
                    for column, count, per in (("1/tx", 300, 1), ("100/tx", 30, 100)):
                        found = await one_run(side, count, per)
                        if r:
                            results.setdefault((column, side.name), []).append(found)
        finally:
            for side in sides:
                await side.close()
    print(f"load {os.getloadavg()[0]:.1f}; medians of {rounds} rounds [p25-p75]")
    for column in ("1/tx", "100/tx"):
        limit, store = results[(column, "limit")], results[(column, "store")]
        for index, unit in ((0, "ev/s"), (1, "CPU µs/event")):
            a = [x[index] for x in limit]
            b = [x[index] for x in store]
            ratio = (
                statistics.median(a) / statistics.median(b)
                if index == 0
                else statistics.median(b) / statistics.median(a)
            )
            print(
                f"append {column:6} {unit:13} limit {spread(a):28} store {spread(b):28} "
                f"ratio {ratio:.2f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    asyncio.run(main(parser.parse_args().rounds))
