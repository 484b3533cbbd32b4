"""Child processes for the multi-process tests: ``python workers.py MODE URL NAME GO_FILE ...``.

Each waits for GO_FILE to appear (so all children start together), does its work, and prints
one JSON line with what the store acknowledged.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

from factories import T0, header, turn

from todo_sessions import (
    SeqConflictError,
    SessionEvent,
    SessionExistsError,
    SessionNotFoundError,
    SessionStore,
)


def wait_for(go: Path) -> None:
    deadline = time.monotonic() + 60
    while not go.exists():
        if time.monotonic() > deadline:
            raise SystemExit("GO file never appeared")
        time.sleep(0.005)


async def open_fresh(url: str, name: str) -> dict[str, object]:
    async with SessionStore(url) as store:
        await store.create(header(name))
        await store.append(name, [SessionEvent("request/context", 0, T0, {"by": name})])
        return {"name": name, "sessions": len(await store.list(limit=1000))}


async def race(url: str, name: str, session: str, attempts: int) -> dict[str, object]:
    """Try ``attempts`` single-event appends at the next seq of a shared session."""
    won: list[int] = []
    conflicts = 0
    async with SessionStore(url) as store:
        with contextlib.suppress(SessionExistsError):
            await store.create(header(session))
        for _ in range(attempts):
            try:
                seq = len(await store.read_from(session))
            except SessionNotFoundError:
                seq = 0  # not materialised yet
            event = SessionEvent("request/context", seq, T0, {"by": name, "seq": seq})
            try:
                await store.append(session, [event])
                won.append(seq)
            except SeqConflictError:
                conflicts += 1
    return {"name": name, "won": won, "conflicts": conflicts}


async def many(url: str, name: str, tasks: int, seconds: float) -> dict[str, object]:
    """``tasks`` tasks appending to their own sessions for ``seconds``."""
    acked: dict[str, int] = {}
    async with SessionStore(url) as store:

        async def task(i: int) -> None:
            session = f"{name}-t{i}"
            await store.create(header(session))
            seq = 0
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                batch = [
                    SessionEvent("request/context", seq + k, T0, {"task": i, "k": k})
                    for k in range(1 + seq % 3)
                ]
                await store.append(session, batch)
                seq += len(batch)
                acked[session] = seq

        await asyncio.gather(*(task(i) for i in range(tasks)))
    return {"name": name, "acked": acked}


async def append_slowly(url: str, name: str, session: str, count: int) -> dict[str, object]:
    """Append ``count`` events one by one (the session exists), a few ms apart."""
    async with SessionStore(url) as store:
        start = len(await store.read_from(session))
        for i in range(count):
            await asyncio.sleep(0.003)
            event = SessionEvent("request/context", start + i, T0, {"by": name, "i": i})
            await store.append(session, [event])
    return {"name": name, "appended": count}


async def mixed(url: str, name: str, tasks: int, seconds: float) -> dict[str, object]:
    """Half the tasks append to their own sessions, half race on one shared session."""
    own: dict[str, int] = {}
    won: list[int] = []
    conflicts = 0
    async with SessionStore(url) as store:

        async def own_task(i: int) -> None:
            session = f"{name}-own{i}"
            await store.create(header(session))
            seq, end = 0, time.monotonic() + seconds
            while time.monotonic() < end:
                await store.append(session, [SessionEvent("request/context", seq, T0, {"i": i})])
                seq += 1
                own[session] = seq

        async def racing_task(i: int) -> None:
            nonlocal conflicts
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                seq = await store.count("shared")
                event = SessionEvent("request/context", seq, T0, {"by": f"{name}.{i}", "seq": seq})
                try:
                    await store.append("shared", [event])
                    won.append(seq)
                except SeqConflictError:
                    conflicts += 1

        await asyncio.gather(*(own_task(i) if i % 2 == 0 else racing_task(i) for i in range(tasks)))
    return {"name": name, "own": own, "won": won, "conflicts": conflicts}


async def acks(url: str, name: str, tasks: int) -> dict[str, object]:
    """Append single events from ``tasks`` tasks (one session each) until killed, printing one
    JSON line per acknowledged append as soon as the store returns (for the SIGKILL test)."""
    async with SessionStore(url) as store:
        for i in range(tasks):
            await store.create(header(f"{name}-{i}"))

        async def run(session: str) -> None:
            for seq in range(100_000):
                data = {"by": session, "seq": seq, "pad": "x" * 200}
                await store.append(session, [SessionEvent("request/context", seq, T0, data)])
                print(json.dumps({"session": session, "next_seq": seq + 1}), flush=True)

        await asyncio.wait_for(
            asyncio.gather(*(run(f"{name}-{i}") for i in range(tasks))), timeout=120
        )
    return {"name": name}


async def turns(url: str, name: str, tasks: int) -> None:
    """Like `acks`, one well-formed turn (6 events, `factories.turn`) per append, so that
    ``verify`` of the log (or of any prefix of it that ends between turns) is clean."""
    async with SessionStore(url) as store:
        for i in range(tasks):
            await store.create(header(f"{name}-{i}"))

        async def run(session: str) -> None:
            for number in range(1, 20_000):
                seq = (number - 1) * 6
                await store.append(session, turn(seq, number, text=f"{session} {number}"))
                print(json.dumps({"session": session, "next_seq": seq + 6}), flush=True)

        await asyncio.wait_for(
            asyncio.gather(*(run(f"{name}-{i}") for i in range(tasks))), timeout=120
        )


def main() -> None:
    mode, url, name, go = sys.argv[1:5]
    rest = sys.argv[5:]
    wait_for(Path(go))
    if mode == "acks":
        asyncio.run(acks(url, name, int(rest[0])))
        return
    if mode == "turns":
        asyncio.run(turns(url, name, int(rest[0])))
        return
    if mode == "open":
        result = asyncio.run(open_fresh(url, name))
    elif mode == "race":
        result = asyncio.run(race(url, name, rest[0], int(rest[1])))
    elif mode == "append":
        result = asyncio.run(append_slowly(url, name, rest[0], int(rest[1])))
    elif mode == "mixed":
        result = asyncio.run(mixed(url, name, int(rest[0]), float(rest[1])))
    elif mode == "many":
        result = asyncio.run(many(url, name, int(rest[0]), float(rest[1])))
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps({**result, "pid": os.getpid()}))


if __name__ == "__main__":
    main()
