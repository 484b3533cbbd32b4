"""The PostgreSQL driver of the write plans (`plans`): runs a plan's steps on an asyncpg
connection, each statement prepared once per connection by asyncpg."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..batch import AppendBatch, AppendOutcome
from ..plans import EVENTS, MANY, ROW, RUN, Plan
from ..plans import append as append_plan
from ..queries import AppendStatements

__all__ = ["append", "in_transaction", "run_plan"]

T = TypeVar("T")


async def run_plan(driver: Any, plan: Plan[T], index_lock: str) -> T:
    """Run ``plan``'s steps on the asyncpg connection ``driver`` (inside the caller's
    transaction); its outcome. ``index_lock``: the statement that takes the search index's
    lock shared (`plans.INDEX_LOCK`)."""
    send = plan.send
    result: Any = None
    try:
        while True:
            kind, statement, args = send(result)
            if kind == ROW:
                result = await driver.fetchrow(statement.sql, *args)  # type: ignore[union-attr]
            elif kind == RUN:
                result = _rowcount(await driver.execute(statement.sql, *args))  # type: ignore[union-attr]
            elif kind == EVENTS:
                await driver.execute(statement.sql, *_event_arrays(statement.names, args))  # type: ignore[union-attr]
                result = None
            elif kind == MANY:
                await driver.executemany(statement.sql, args)  # type: ignore[union-attr]
                result = None
            else:  # INDEX_LOCK
                await driver.execute(index_lock)
                result = None
    except StopIteration as done:
        outcome: T = done.value
        return outcome


def _event_arrays(names: tuple[str, ...], rows: list[dict[str, Any]]) -> list[Any]:
    """The parameters of the one insert of a batch's rows (revision 0012): the session id
    once, then a list per column."""
    session_id = rows[0]["session_id"]
    return [session_id if n == "session_id" else [row[n] for row in rows] for n in names]


def _rowcount(status: str) -> int:
    """The row count of a command status (``DELETE 3``, ``UPDATE 1``, ``INSERT 0 1``)."""
    return int(status.rsplit(" ", 1)[-1])


async def in_transaction(
    driver: Any, index_lock: str, plan: Callable[..., Plan[T]], *args: Any
) -> T:
    """``plan(*args)`` in one transaction of its own on the asyncpg connection."""
    async with driver.transaction():
        return await run_plan(driver, plan(*args), index_lock)


async def append(driver: Any, batch: AppendBatch, sql: AppendStatements) -> AppendOutcome:
    """The append transaction (`plans.append`) on an asyncpg connection."""
    async with driver.transaction():
        return await run_plan(driver, append_plan(sql, batch), "")
