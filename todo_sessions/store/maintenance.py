"""The maintenance hatch: a SQLAlchemy connection on a store's own database, outside the
recorder contract, for maintenance tools and tests that must write what the store never
would (damage a row, drop a trigger) or look at rows the store does not show."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.engine import Connection

from .store import SessionStore
from .translate import translate_errors

__all__ = ["run_maintenance"]

T = TypeVar("T")


async def run_maintenance(
    store: SessionStore, fn: Callable[[Connection], T], *, write: bool = False
) -> T:
    """Run ``fn(sync SQLAlchemy connection)`` in one transaction on ``store``'s database (on
    SQLite on its writer thread, ``write`` under the write lock), opening the store first."""
    recorder = await store._core.ready()
    with translate_errors("running a maintenance function"):
        return await recorder.run_maintenance(fn, write=write)
