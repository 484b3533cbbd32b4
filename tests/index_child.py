"""A writer process for the deferred search index's tests: appends complete turns, each
with a word of its own, and says so once each append is acknowledged.

``python index_child.py URL SESSION COUNT SEARCH_EVERY`` appends ``COUNT`` turns (6 events
each) to ``SESSION`` (created first), the user message of turn ``i`` holding the word
``word_of(SESSION, i)``; after each acknowledged append it prints ``ACK i`` (flushed). With
``SEARCH_EVERY`` > 0 it also searches after every that many appends (so a kill can land in the
catch-up a search runs). Then it prints ``DONE`` and waits to be killed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from factories import header, turn

from todo_sessions import SessionStore


def word_of(session_id: str, i: int) -> str:
    return f"w{session_id.replace('-', '')}n{i}q"


async def main(url: str, session_id: str, count: int, search_every: int) -> None:
    async with SessionStore(url, pool_size=2) if "postgres" in url else SessionStore(url) as store:
        await store.create(header(session_id))
        for i in range(count):
            await store.append(session_id, turn(6 * i, i + 1, text=word_of(session_id, i)))
            print(f"ACK {i}", flush=True)
            if search_every and (i + 1) % search_every == 0:
                await store.search(word_of(session_id, i))
        print("DONE", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
