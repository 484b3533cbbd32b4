"""Handing work to the writer thread and results back to each caller's event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from ..batch import (
    AppendBatch,
    AppendOutcome,
)

T = TypeVar("T")


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the awaiting task was cancelled; the work itself still ran
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _settle_all(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, error in outcomes:
        _settle(future, result, error)


def hand_back_one(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """Settle one future on its loop (a lone append, a call): one wake-up, no lists.

    The wake-up is the thread's last Python before it blocks on its queue again: the woken
    loop needs the GIL that this thread holds until then (hence no ``suppress`` block, whose
    ``__exit__`` would run after it)."""
    try:  # noqa: SIM105
        future.get_loop().call_soon_threadsafe(_settle, future, result, error)
    except RuntimeError:  # its loop is closed: nobody is waiting any more
        pass


def hand_back(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    """Settle a group's futures on their loops, one wake-up per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Any]] = {}
    for outcome in outcomes:
        by_loop.setdefault(outcome[0].get_loop(), []).append(outcome)
    for loop, items in by_loop.items():
        # A closed loop (RuntimeError) means nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle_all, items)


class AppendJob:
    __slots__ = ("batch", "future")

    def __init__(self, batch: AppendBatch, future: asyncio.Future[AppendOutcome]) -> None:
        self.batch = batch
        self.future = future


class CallJob:
    __slots__ = ("args", "fn", "future")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], future: Any) -> None:
        self.fn = fn
        self.args = args
        self.future = future


CLOSED = "the store was closed before this could run"
NO_JOB: Any = object()
"""`Writer._next_job`'s answer when it caught the index up instead."""
