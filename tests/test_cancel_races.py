"""A task cancelled while it polls is cancelled, whatever else happens in that turn of the loop.

Python 3.11's `asyncio.wait_for` returns the inner result, and so swallows the cancel of its
caller, when the inner wait completed in the same turn of the loop as the cancel: a follower
(`store.follow`, the ACP bridge's `Followers`) cancelled just as an append woke it went on
polling, and the `unfollow` awaiting it hung (the likely cause of a CI run that hung, idle,
in the ACP bridge's close). The polling waits use `asyncio.timeout` instead.
"""

from __future__ import annotations

import asyncio

import pytest

from todo_sessions.store.wakeups import LocalWakeups


@pytest.mark.parametrize("turns", range(4))
async def test_a_poll_cancelled_as_an_append_wakes_it_is_cancelled(turns: int) -> None:
    wakeups = LocalWakeups()
    async with wakeups.polling("s") as wait:
        task = asyncio.create_task(wait(10))
        await asyncio.sleep(0)  # polling
        wakeups.wake("s")  # an append through the store
        for _ in range(turns):  # the wake-up under way, for a few turns of the loop
            await asyncio.sleep(0)
        if task.cancel():  # still waiting: the cancel must reach it
            with pytest.raises(asyncio.CancelledError):
                await task
        else:  # it had returned: woken, as it should be
            assert task.done() and task.exception() is None
