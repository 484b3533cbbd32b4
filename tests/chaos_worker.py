"""A worker process of tests/test_chaos.py: ``python chaos_worker.py MODE URL NAME DIR``.

``append``: until DIR/stop exists, append one event at a time to its own session ``own-NAME``
and to the session ``shared`` (racing the other workers there), recording every acknowledged
append with its time. A failed call is retried with the same event (an append whose outcome
the store could not decide is found stored by reading back, as `SessionService` does).
``follow``: follow ``shared`` until DIR/total holds the final count and that many events were
seen. Each prints one JSON line at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path

from todo_sessions import (
    SeqConflictError,
    SessionEvent,
    SessionHeader,
    SessionStore,
    StoreError,
    TodoSessionsError,
)


async def append_until_stopped(url: str, name: str, directory: Path) -> dict[str, object]:
    acked: list[dict[str, object]] = []
    failures: list[float] = []
    async with SessionStore(url, pool_size=2) as store:
        own = f"own-{name}"
        await store.create(SessionHeader(id=own, created_at=1))
        own_next, i = 0, 0
        while not (directory / "stop").exists():
            for sid in (own, "shared"):
                i += 1
                payload = {"w": name, "i": i}
                seq = own_next if sid == own else await store.count(sid)
                while True:
                    event = SessionEvent("request/context", seq, 1, payload)
                    try:
                        await store.append(sid, [event])
                        break
                    except SeqConflictError:
                        stored = await store.read_from(sid, seq, limit=1)
                        if stored and stored[0].data == payload:
                            break  # ours: committed, the answer was lost
                        seq = await store.count(sid)  # another worker was first
                    except (StoreError, TodoSessionsError):
                        failures.append(time.time())
                        await asyncio.sleep(0.05)
                acked.append({"session": sid, "seq": seq, "i": i, "at": time.time()})
                if sid == own:
                    own_next = seq + 1
                elif len(acked) == 2:  # one of each stored: this worker is under way
                    (directory / f"ready-{name}").touch()
    return {"acked": acked, "failures": failures}


async def follow_shared(url: str, directory: Path) -> dict[str, object]:
    seen: list[int] = []
    total = directory / "total"
    async with SessionStore(url) as store:

        async def consume() -> None:
            async for event in store.follow("shared", reconnect_timeout=30):
                seen.append(event.seq)
                if len(seen) == 1:
                    (directory / "ready-follower").touch()

        following = asyncio.create_task(consume())
        while not (total.exists() and len(seen) >= int(total.read_text())):
            if following.done():
                following.result()  # the follower raised: report it
            await asyncio.sleep(0.05)
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
    return {"seen": seen}


async def main(mode: str, url: str, name: str, directory: Path) -> None:
    if mode == "append":
        result = await append_until_stopped(url, name, directory)
    else:
        result = await follow_shared(url, directory)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])))
