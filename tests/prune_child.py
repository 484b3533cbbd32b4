"""A child process that prunes a file database into an archive directory, to be killed.

`run` (the target of a forked ``multiprocessing`` child: no interpreter start-up, no imports)
opens the store, sets ``ready``, then runs ``store.prune(keep_last=0, archive=ARCHIVE)``. The
parent kills it with SIGKILL at a random moment (tests/test_prune.py). ``python
prune_child.py URL ARCHIVE`` does the same from a shell.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from todo_sessions import SessionStore


async def _prune(url: str, archive: str, ready: Any) -> int:
    async with SessionStore(url) as store:
        if ready is not None:
            ready.set()
        report = await store.prune(keep_last=0, archive=archive)
        return len(report.deleted)


def run(url: str, archive: str, ready: Any = None) -> None:
    asyncio.run(_prune(url, archive, ready))


if __name__ == "__main__":
    print(f"deleted {asyncio.run(_prune(sys.argv[1], sys.argv[2], None))}")
