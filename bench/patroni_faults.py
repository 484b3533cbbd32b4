"""The Patroni columns of bench/failover_bench.py (``--patroni``): a cluster of
``tests/patroni_cluster.py`` (etcd and three Patroni members on loopback, Debian's packages).

- **Time to the first append after a fault**: 4 tasks append single events through one store
  on the multi-host URL; the fault is injected; the time from the fault to the first append
  acknowledged after the outage (the end of the longest pause between acknowledgements after
  the fault), and the longest pause itself. Also the time to the end of the first append that
  started after the fault: near 0 when such appends still reach the old primary before the
  fault takes hold (a killed postmaster's backends finish their statement, etcd down lets the
  primary go on until it demotes itself). Kinds: ``kill`` (kill -9 of the primary's postmaster),
  ``switchover`` (``patronictl switchover``), ``stall`` (SIGSTOP of the primary's Patroni,
  postmaster and backends for 3.5 ttl, then SIGCONT), ``etcd`` (etcd killed for 2 ttl); ttl 10.
  Median and worst of ``--patroni-faults`` per kind (the cluster healthy again before each),
  and over every fault of every kind.
- **Appends/s during a switchover**: acknowledged appends in the 10 s after the switchover
  command, against the 10 s before it.
- **The cost of synchronous_mode**: `store_bench`'s single and batch100 rows (one session,
  single-event appends; appends of 100 events) on a synchronous and an asynchronous cluster.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import patroni_cluster
from store_bench import StoreSide, message

from todo_sessions import SessionEvent, SessionHeader, SessionStore, TodoSessionsError

KINDS = ("kill", "switchover", "stall", "etcd")


def inject(cluster: patroni_cluster.Cluster, kind: str) -> None:
    leader = cluster.leader()
    assert leader is not None
    if kind == "kill":
        leader.kill_postmaster()
    elif kind == "switchover":
        cluster.switchover()
    elif kind == "stall":
        leader.signal_all(signal.SIGSTOP)
        try:
            time.sleep(3.5 * cluster.ttl)
        finally:
            leader.signal_all(signal.SIGCONT)
    else:
        cluster.stop_etcd()
        try:
            time.sleep(2 * cluster.ttl)
        finally:
            cluster.start_etcd()


async def one_fault(
    cluster: patroni_cluster.Cluster, kind: str, label: str
) -> tuple[float, float, float, float, float]:
    """(seconds from the fault to the first acknowledgement after the longest pause, that
    pause, seconds to the first append started after the fault, appends/s in the 10 s before
    the fault, in the 10 s after it)."""
    await asyncio.to_thread(cluster.wait_healthy)
    acks: list[tuple[float, float]] = []  # (started, done)
    stop, recovered = asyncio.Event(), asyncio.Event()
    fault_at = float("inf")
    async with SessionStore(cluster.url(), reconnect_timeout=90.0) as store:

        async def write(session_id: str) -> None:
            await store.create(SessionHeader(id=session_id, created_at=1))
            seq = 0
            while not stop.is_set():
                started = time.time()
                try:
                    await store.append(
                        session_id, [SessionEvent("request/context", seq, 1, {"seq": seq})]
                    )
                except TodoSessionsError:
                    seq = await store.count(session_id)
                    continue
                acks.append((started, time.time()))
                if started > fault_at:
                    recovered.set()
                seq += 1

        writers = [asyncio.create_task(write(f"{label}-{i}")) for i in range(4)]
        await asyncio.sleep(12)  # 2 s to warm up, then the 10 s before the fault
        fault_at = time.time()
        injecting = asyncio.create_task(asyncio.to_thread(inject, cluster, kind))
        await recovered.wait()
        await asyncio.sleep(max(0.0, fault_at + 10 - time.time()))
        await injecting
        stop.set()
        await asyncio.gather(*writers)
    first = min(d for s, d in acks if s > fault_at) - fault_at
    done = sorted(d for _, d in acks if d > fault_at - 1)
    pause, back_at = max(((b - a, b) for a, b in itertools.pairwise(done)), default=(0.0, fault_at))
    before = sum(1 for _, d in acks if fault_at - 10 <= d < fault_at) / 10
    after = sum(1 for _, d in acks if fault_at <= d < fault_at + 10) / 10
    return back_at - fault_at, pause, first, before, after


async def sync_cost(synchronous: bool, rounds: int) -> dict[str, list[float]]:
    cluster = patroni_cluster.Cluster(synchronous=synchronous)
    rates: dict[str, list[float]] = {"single": [], "batch100": []}
    try:
        await asyncio.to_thread(cluster.start)
        payloads = [message(i) for i in range(6001)]
        async with SessionStore(cluster.url()) as store:
            side = StoreSide(store, payloads)
            await side.single(50)  # warm
            for _ in range(rounds):
                rates["single"].append(await side.single(300))
                rates["batch100"].append(await side.batches(20, 100))
    finally:
        await asyncio.to_thread(cluster.stop)
    return rates


def lines(kind: str, seen: dict[str, list[float]]) -> None:
    print(f"patroni {kind:>10}: first append after the outage {summary(seen['back'], _s)}")
    print(f"patroni {kind:>10}: longest pause in appends {summary(seen['pause'], _s)}")
    print(
        f"patroni {kind:>10}: first append started after the fault done "
        f"{summary(seen['first'], _s)}"
    )


def summary(values: list[float], fmt: Callable[[float], str]) -> str:
    return f"median {fmt(statistics.median(values))}, worst {fmt(max(values))} (n={len(values)})"


async def run(faults: int, rounds: int, kinds: tuple[str, ...] = KINDS) -> None:
    reason = patroni_cluster.missing()
    if reason:
        print(f"patroni: skipped ({reason})")
        return
    cluster = patroni_cluster.Cluster()
    try:
        await asyncio.to_thread(cluster.start)
        every: dict[str, list[float]] = {"back": [], "pause": [], "first": []}
        for kind in kinds:
            seen: dict[str, list[float]] = {"back": [], "pause": [], "first": []}
            during = []
            for i in range(faults):
                back, pause, first, before, after = await one_fault(cluster, kind, f"{kind}{i}")
                for name, value in (("back", back), ("pause", pause), ("first", first)):
                    seen[name].append(value)
                    every[name].append(value)
                during.append((before, after))
            lines(kind, seen)
            if kind == "switchover":
                b = statistics.median(x for x, _ in during)
                a = statistics.median(y for _, y in during)
                print(
                    f"patroni switchover: {a:.0f} appends/s in the 10 s after the command "
                    f"({b:.0f} in the 10 s before; 4 tasks, single events; medians)"
                )
        lines("all", every)
    finally:
        await asyncio.to_thread(cluster.stop)
    sync = await sync_cost(True, rounds)
    unsync = await sync_cost(False, rounds)
    for row in ("single", "batch100"):
        s, a = statistics.median(sync[row]), statistics.median(unsync[row])
        print(
            f"patroni {row:>8}: synchronous_mode {s:.0f} events/s, asynchronous {a:.0f} "
            f"events/s: {s / a:.2f}x ({rounds} rounds, medians)"
        )


def _s(value: float) -> str:
    return f"{value:.2f} s"
