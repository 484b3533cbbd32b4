"""What staying up costs (issue #11).

    python bench/staying_up_bench.py [--pg URL] [--terminations 20] [--rounds 11] [--appends 300]

1. **Recovery after a backend termination (PostgreSQL).** A store appends single events in a
   loop; every ~0.5 s every backend of the database is terminated (``pg_terminate_backend``).
   For each termination: the time from the termination to the end of the next append that
   succeeds (it runs on a fresh connection). Median, p90 and worst over ``--terminations``.
2. **The lease check per append.** Single durable appends of one event, with a lease
   (``append(..., lease=...)``: one more indexed read inside the transaction) and without, in
   alternating rounds on the same store; median of the rounds with the p25-p75 spread, and
   the ratio. SQLite file (``synchronous=FULL``) and, with ``--pg``, PostgreSQL.

The PostgreSQL URL defaults to ``TODO_SESSIONS_PG_URL``; each run creates and drops a database.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pg_chaos import terminate_backends, with_scratch_database

from todo_sessions import SessionEvent, SessionHeader, SessionStore


def event(seq: int) -> SessionEvent:
    return SessionEvent("request/context", seq, 1, {"model": "m", "seq": seq, "pad": "x" * 200})


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return q[0], statistics.median(values), q[2]


async def recovery(url: str, terminations: int) -> list[float]:
    """Seconds from each termination to the next successful append."""
    samples: list[float] = []
    async with SessionStore(url) as store:
        await store.create(SessionHeader(id="r", created_at=1))
        seq = 0
        for _ in range(terminations):
            for _ in range(20):  # steady appends on pooled connections
                await store.append("r", [event(seq)])
                seq += 1
            await asyncio.sleep(0.2)
            await terminate_backends(url)
            killed_at = time.perf_counter()
            while True:
                try:
                    await store.append("r", [event(seq)])
                    break
                except Exception:
                    await asyncio.sleep(0.01)
            samples.append(time.perf_counter() - killed_at)
            seq += 1
    return samples


async def lease_cost(url: str, rounds: int, appends: int) -> tuple[list[float], list[float]]:
    """Appends/s without and with a lease, alternating rounds."""
    plain: list[float] = []
    leased: list[float] = []
    async with SessionStore(url) as store:
        for r in range(rounds):
            for with_lease in (False, True) if r % 2 == 0 else (True, False):
                sid = f"l{r}{int(with_lease)}"
                await store.create(SessionHeader(id=sid, created_at=1))
                await store.append(sid, [event(0)])
                lease = await store.acquire_lease(sid, "bench", ttl=600) if with_lease else None
                append: Callable[..., Awaitable[str]] = store.append
                t = time.perf_counter()
                for seq in range(1, appends + 1):
                    await append(sid, [event(seq)], lease=lease)
                rate = appends / (time.perf_counter() - t)
                (leased if with_lease else plain).append(rate)
    return plain, leased


def print_lease_row(backend: str, plain: list[float], leased: list[float]) -> None:
    p = quartiles(plain)
    q = quartiles(leased)
    print(
        f"{backend:<22} {p[1]:>9,.0f} [{p[0]:,.0f}-{p[2]:,.0f}]   "
        f"{q[1]:>9,.0f} [{q[0]:,.0f}-{q[2]:,.0f}]   {q[1] / p[1]:.2f}x   "
        f"{(1 / q[1] - 1 / p[1]) * 1e6:+.0f} µs/append"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default=os.environ.get("TODO_SESSIONS_PG_URL"))
    parser.add_argument("--terminations", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--appends", type=int, default=300)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {platform.platform()}, {os.cpu_count()} CPUs")

    if args.pg:

        async def terminated(url: str) -> None:
            samples = await recovery(url, args.terminations)
            ms = sorted(s * 1000 for s in samples)
            p90 = statistics.quantiles(ms, n=10)[-1] if len(ms) > 1 else ms[0]
            print(
                f"\n== PostgreSQL: backend termination → next successful append "
                f"({len(ms)} terminations) ==\n"
                f"median {statistics.median(ms):.1f} ms, p90 {p90:.1f} ms, worst {ms[-1]:.1f} ms"
                f", best {ms[0]:.1f} ms"
            )

        await with_scratch_database(args.pg, terminated)

    print(
        f"\n== lease check: single durable appends, {args.rounds} alternating rounds of "
        f"{args.appends} ==\n"
        f"{'backend':<22} {'no lease ev/s [p25-p75]':>26}   {'with lease ev/s [p25-p75]':>28}"
        "   ratio   cost"
    )
    with tempfile.TemporaryDirectory() as tmp:
        plain, leased = await lease_cost(f"sqlite:///{tmp}/b.db", args.rounds, args.appends)
        print_lease_row("SQLite file, FULL", plain, leased)
    if args.pg:

        async def leases_pg(url: str) -> None:
            plain, leased = await lease_cost(url, args.rounds, args.appends)
            print_lease_row("PostgreSQL", plain, leased)

        await with_scratch_database(args.pg, leases_pg)


if __name__ == "__main__":
    asyncio.run(main())
