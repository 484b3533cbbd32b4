"""Failover and replication costs on PostgreSQL (issue #28).

    python bench/failover_bench.py [--failovers 5] [--rounds 5] [--appends 200] [--writers 4]
    python bench/failover_bench.py --patroni [--patroni-faults 5] [--patroni-kinds kill,...]

Servers of its own (``tests/pg_cluster.py``: Debian's PostgreSQL 15 binaries, as the postgres
user, in a temporary directory on free ports; ``fsync`` on), never the machine's own.

1. **Failover.** A store on a multi-host URL (``h1,h2?target_session_attrs=read-write``)
   appends single events in a loop on a primary with a synchronous standby. The primary is
   stopped with ``pg_ctl stop -m immediate`` and the standby promoted at once
   (``pg_ctl promote -w``). Measured: the time from the stop to the end of the first append
   that succeeds afterwards (on the new primary), and, inside it, how long the promotion
   took. Median (with min and max) of ``--failovers``, a new pair each time.
2. **Synchronous vs asynchronous replication.** One primary and standby; rounds alternate
   ``synchronous_standby_names = '*'`` (``synchronous_commit = on``: each commit waits for the
   standby's flush) and ``''`` (asynchronous), reloaded between rounds. Each round:
   ``--writers`` tasks appending ``--appends`` single events each to sessions of their own,
   on one store. Appends per second, median of the rounds with the p25-p75 spread, and the
   ratio.
3. **Under Patroni** (``--patroni``, instead of 1 and 2): bench/patroni_faults.py (time to the
   first append after each kind of fault, appends/s during a switchover, the cost of
   ``synchronous_mode`` on store_bench's single and batch100 rows).
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pg_cluster

from todo_sessions import SessionEvent, SessionHeader, SessionStore


def event(seq: int) -> SessionEvent:
    return SessionEvent("request/context", seq, 1, {"model": "m", "seq": seq, "pad": "x" * 200})


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return q[0], statistics.median(values), q[2]


async def one_failover(template: pg_cluster.Template) -> tuple[float, float]:
    """(seconds from the primary's stop to the next successful append, of which promoting)."""
    pair = template.pair(synchronous=True)
    try:
        url = pair.multi_host_url(attrs="read-write")
        async with SessionStore(url, reconnect_timeout=30.0) as store:
            await store.create(SessionHeader(id="f", created_at=1))
            seq = 0
            for _ in range(50):
                await store.append("f", [event(seq)])
                seq += 1
            stopped_at = time.perf_counter()
            await asyncio.to_thread(pair.primary.stop, "immediate")
            promoting = asyncio.create_task(asyncio.to_thread(pair.standby.promote))
            await store.append("f", [event(seq)])  # waits out the failover
            recovered = time.perf_counter() - stopped_at
            await promoting
            promoted = time.perf_counter() - stopped_at  # promote -w returned (upper bound)
        return recovered, min(promoted, recovered)
    finally:
        pair.stop()


async def append_rate(store: SessionStore, prefix: str, writers: int, appends: int) -> float:
    ids = [f"{prefix}-{w}" for w in range(writers)]
    for session_id in ids:
        await store.create(SessionHeader(id=session_id, created_at=1))

    async def write(session_id: str) -> None:
        for seq in range(appends):
            await store.append(session_id, [event(seq)])

    started = time.perf_counter()
    await asyncio.gather(*(write(s) for s in ids))
    return writers * appends / (time.perf_counter() - started)


async def set_synchronous(pair: pg_cluster.Pair, synchronous: bool) -> None:
    import asyncpg

    conn = await asyncpg.connect(pair.primary.url)
    try:
        names = "*" if synchronous else ""
        await conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
        await conn.execute("SELECT pg_reload_conf()")
        for _ in range(500):  # until the setting is live and the standby is in its mode
            state = await conn.fetchval(
                "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'"
            )
            if state == ("sync" if synchronous else "async"):
                return
            await asyncio.sleep(0.02)
        raise RuntimeError("the standby never changed mode")
    finally:
        await conn.close()


async def throughput(
    template: pg_cluster.Template, rounds: int, writers: int, appends: int
) -> dict[str, list[float]]:
    pair = template.pair(synchronous=False)
    rates: dict[str, list[float]] = {"sync": [], "async": []}
    try:
        async with SessionStore(pair.multi_host_url(attrs="read-write")) as store:
            await append_rate(store, "warm", writers, 20)
            for round_ in range(rounds):
                for mode in ("sync", "async") if round_ % 2 == 0 else ("async", "sync"):
                    await set_synchronous(pair, mode == "sync")
                    rate = await append_rate(store, f"{mode}{round_}", writers, appends)
                    rates[mode].append(rate)
    finally:
        pair.stop()
    return rates


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--patroni", action="store_true", help="the Patroni columns instead")
    parser.add_argument("--patroni-faults", type=int, default=5, help="faults of each kind")
    parser.add_argument("--patroni-kinds", default="kill,switchover,stall,etcd")
    args = parser.parse_args()
    if args.patroni:
        import patroni_faults

        kinds = tuple(args.patroni_kinds.split(","))
        print(f"python {platform.python_version()}, {platform.machine()}")
        await patroni_faults.run(args.patroni_faults, args.rounds, kinds)
        return
    if not pg_cluster.available():
        raise SystemExit("needs PostgreSQL 15 binaries in /usr/lib/postgresql/15/bin")
    print(f"python {platform.python_version()}, {platform.machine()}")
    with pg_cluster.template() as template:
        samples = [await one_failover(template) for _ in range(args.failovers)]
        recovered = [r for r, _ in samples]
        promoted = [p for _, p in samples]
        print(
            f"failover (sync standby, stop -m immediate + promote), {args.failovers} runs: "
            f"first append after the stop median {statistics.median(recovered):.2f} s "
            f"(min {min(recovered):.2f}, max {max(recovered):.2f}); of it the promotion "
            f"median {statistics.median(promoted):.2f} s"
        )
        rates = await throughput(template, args.rounds, args.writers, args.appends)
    for mode in ("sync", "async"):
        low, mid, high = quartiles(rates[mode])
        print(
            f"{mode:>5} replication: {mid:7.0f} appends/s (p25-p75 {low:.0f}-{high:.0f}), "
            f"{args.writers} writers x {args.appends} single-event appends, {args.rounds} rounds"
        )
    ratio = statistics.median(rates["sync"]) / statistics.median(rates["async"])
    print(f"sync / async: {ratio:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
