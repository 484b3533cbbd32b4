"""A second process owning a session through its own service (tests/test_leases.py).

``python lease_child.py URL SESSION_ID READY_FILE GO_FILE``: resumes the session, appends and
flushes one event, writes READY_FILE, waits for GO_FILE, appends one more event and flushes,
then prints one JSON line: what happened to that flush.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from todo_sessions import LeaseLostError, SessionService, SessionStore


def signal_and_wait(ready: Path, go: Path) -> None:
    ready.write_text("ok")
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


async def main(url: str, session_id: str, ready: Path, go: Path) -> None:
    service = SessionService(SessionStore(url))
    await service.store.open()
    session = await service.resume(session_id)
    session.append("request/context", {"by": "child", "n": 1})
    await service.flush(session_id)
    await asyncio.to_thread(signal_and_wait, ready, go)
    session.append("request/context", {"by": "child", "n": 2})
    try:
        await service.flush(session_id)
        outcome = {"flush": "stored"}
    except LeaseLostError as exc:
        path = await service.discard(session_id)
        outcome = {"flush": "LeaseLostError", "message": str(exc), "recovery": str(path)}
    await service.aclose()
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])))
