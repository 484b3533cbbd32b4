"""An appending process of tests/test_patroni.py: ``python patroni_worker.py URL NAME DIR TASKS``.

Opens one store on the cluster's multi-host URL (kept open through every fault: the store
recovers without being reopened), creates ``TASKS`` sessions ``NAME-i`` and appends one
well-formed turn (6 events, `factories.turn`) at a time to each from a task of its own until
DIR/stop exists. Each attempt's text is unique. Prints one JSON line per attempt as soon as it
is settled: ``ok`` (acknowledged) or not (raised: the store found it not stored, or could not
tell); after a raise the task reads the stored count and goes on from there.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from factories import header, turn

from todo_sessions import SessionStore, TodoSessionsError


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


async def main(url: str, name: str, directory: Path, tasks: int) -> None:
    stop = directory / "stop"
    async with SessionStore(url, reconnect_timeout=60.0) as store:
        ids = [f"{name}-{i}" for i in range(tasks)]
        for session_id in ids:
            await store.create(header(session_id))
        say(ready=name)

        async def run(session_id: str) -> None:
            seq, attempt = 0, 0
            while not stop.exists():
                attempt += 1
                text = f"{session_id} #{attempt}"
                started = time.time()
                try:
                    await store.append(session_id, turn(seq, seq // 6 + 1, text=text))
                except TodoSessionsError as exc:
                    say(s=session_id, seq=seq, text=text, ok=False, at=time.time(), err=repr(exc))
                    while True:  # where the log ends now (the raised attempt stored or not)
                        try:
                            seq = await store.count(session_id)
                            break
                        except TodoSessionsError:
                            await asyncio.sleep(0.2)
                    continue
                say(s=session_id, seq=seq, text=text, ok=True, started=started, at=time.time())
                seq += 6
                await asyncio.sleep(0.02)

        await asyncio.gather(*(run(s) for s in ids))
    say(done=name)


if __name__ == "__main__":
    url, name, directory, tasks = sys.argv[1:5]
    asyncio.run(main(url, name, Path(directory), int(tasks)))
