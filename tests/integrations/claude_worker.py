"""A child process appending Claude transcript batches: ``python claude_worker.py URL NAME
GO_FILE BATCHES``. Waits for GO_FILE, then appends BATCHES batches of 5 lines to its own key
and to the shared key, alternating, sending every batch twice (as the SDK retries); prints
"ok"."""

import asyncio
import sys
import time
from pathlib import Path

from todo_sessions.integrations.claude_agent_sdk import TodoSessionsStore


def batch(name: str, i: int) -> list[dict]:
    return [{"type": "user", "uuid": f"{name}-{i}-{j}", "n": j} for j in range(5)]


def wait_for(go: str) -> None:
    while not Path(go).exists():
        time.sleep(0.01)


async def main(url: str, name: str, batches: int) -> None:
    async with TodoSessionsStore(url) as store:
        for i in range(batches):
            for key in (
                {"project_key": "p", "session_id": name},
                {"project_key": "p", "session_id": "shared"},
            ):
                entries = batch(name, i)
                await store.append(key, entries)
                await store.append(key, entries)  # the retry of a batch that landed
    print("ok")


wait_for(sys.argv[3])
asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[4])))
