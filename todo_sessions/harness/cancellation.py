"""How a turn is cancelled: `Aborted`, and `until_cancelled` around a model stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["Aborted", "until_cancelled"]


class Aborted(Exception):
    """The turn was cancelled through `AgentLoop.cancel`."""


async def until_cancelled(stream: AsyncIterator[Any], cancel: asyncio.Event) -> Any:
    """Iterate ``stream`` but raise `Aborted` as soon as ``cancel`` is set (the pending
    step of the stream is cancelled, and the stream closed). When the task iterating is
    itself cancelled, the pending step is cancelled too before the stream is closed."""
    iterator = stream.__aiter__()
    stop = asyncio.ensure_future(cancel.wait())
    nxt: asyncio.Future[Any] | None = None
    try:
        while True:
            nxt = asyncio.ensure_future(iterator.__anext__())
            await asyncio.wait({nxt, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not nxt.done():
                nxt.cancel()
                await asyncio.gather(nxt, return_exceptions=True)
                raise Aborted
            try:
                yield nxt.result()
            except StopAsyncIteration:
                return
    finally:
        stop.cancel()
        if nxt is not None and not nxt.done():
            # the task itself was cancelled while the stream's step ran: stop that step first
            # (a generator cannot be closed while it runs)
            nxt.cancel()
            await asyncio.gather(nxt, return_exceptions=True)
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
