"""The SQLite driver of the write plans (`plans`): runs a plan's steps on the writer's
``sqlite3`` connection, synchronously, on the writer thread (the caller holds the write lock,
or takes it here: `in_write_transaction`)."""

from __future__ import annotations

import functools
import operator
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..plans import EVENTS, MANY, ROW, RUN, Plan
from .driver import begin_write

__all__ = ["in_write_transaction", "run_plan"]

T = TypeVar("T")


def run_plan(conn: sqlite3.Connection, plan: Plan[T]) -> T:
    """Run ``plan``'s steps on ``conn`` (inside the caller's transaction); its outcome."""
    execute = conn.execute
    send = plan.send
    result: Any = None
    try:
        while True:
            kind, statement, args = send(result)
            if kind == ROW:
                result = execute(statement.sql, args).fetchone()  # type: ignore[union-attr]
            elif kind == RUN:
                result = execute(statement.sql, args).rowcount  # type: ignore[union-attr]
            elif kind == EVENTS:
                conn.executemany(statement.sql, map(_row_getter(statement.names), args))  # type: ignore[union-attr]
                result = None
            elif kind == MANY:
                conn.executemany(statement.sql, args)  # type: ignore[union-attr]
                result = None
            else:  # INDEX_LOCK: the writer holds SQLite's one write lock already
                result = None
    except StopIteration as done:
        outcome: T = done.value
        return outcome


@functools.cache
def _row_getter(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """An event row's statement parameters in one C call (``Compiled.args`` of a row, without
    a generator per row); one per namespace's column order, which the code fixes."""
    return operator.itemgetter(*names)


def in_write_transaction(
    conn: sqlite3.Connection, patience: float, plan: Callable[..., Plan[T]], *args: Any
) -> T:
    """``plan(*args)`` run in one write transaction of its own (writer thread)."""
    begin_write(conn, patience)
    try:
        result = run_plan(conn, plan(*args))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result
