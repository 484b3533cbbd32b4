"""The engine's own check of the file: ``PRAGMA integrity_check`` and our tables' foreign keys."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import TypeVar

from .writer import Writer

T = TypeVar("T")


def integrity_check_on(
    _conn: sqlite3.Connection, writer: Writer, tables: Iterable[str]
) -> list[str]:
    with writer.configured_timeout() as conn:
        return _integrity_check(conn, tables)


def _integrity_check(conn: sqlite3.Connection, tables: Iterable[str]) -> list[str]:
    # A damaged file's report can quote bytes that are not UTF-8: show them, never fail on them.
    factory = conn.text_factory
    conn.text_factory = _lenient_text
    try:
        return _integrity_problems(conn, tables)
    except UnicodeDecodeError as exc:  # SQLite's own error text quotes the damaged bytes
        return [f"the integrity check stopped on damaged text ({exc.reason}): the file is damaged"]
    finally:
        conn.text_factory = factory


def _lenient_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _integrity_problems(conn: sqlite3.Connection, tables: Iterable[str]) -> list[str]:
    """The whole file's integrity check, and the foreign keys of our ``tables`` only: a host
    application's tables in the same file (or another namespace's) are none of our business."""
    found = [str(row[0]) for row in conn.execute("PRAGMA integrity_check").fetchall()]
    problems = [] if found == ["ok"] else found
    broken: dict[tuple[str, str], int] = {}
    present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for name in sorted(set(tables) & present):
        for table, _rowid, parent, _fk in conn.execute(f'PRAGMA foreign_key_check("{name}")'):
            broken[(table, parent)] = broken.get((table, parent), 0) + 1
    problems += [
        f"{count} row(s) of {table} refer to a missing row of {parent}"
        for (table, parent), count in broken.items()
    ]
    return problems
