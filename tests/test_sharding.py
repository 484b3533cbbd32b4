"""Ready to shard by session (docs/design.md, "Scaling out"): every statement of the append,
read, lease and checkpoint paths, as compiled for PostgreSQL, touches one table and filters it
by one session id (or joins co-located tables on the session key, one of them filtered so), so
on a distributed engine (Citus: tables distributed and co-located by session id) each
statement runs on one shard. The listings across sessions are the named exceptions (a
fan-out), the store id the one reference table."""

from __future__ import annotations

import dataclasses
import re

import pytest

from todo_sessions.store import postgres
from todo_sessions.store.namespace import DEFAULT, Namespace
from todo_sessions.store.read_sql import list_statement

SESSION_KEY = {
    "sessions": "id",
    "session_events": "session_id",
    "session_tags": "session_id",
    "session_leases": "session_id",
    "session_checkpoints": "session_id",
    "search_text": "session_id",
}
"""The distribution column of each table (all co-located: one session's rows on one shard)."""
SESSION_PARAMETERS = frozenset({"session_id", "id", "b_id", "p_id", "l_session_id"})
"""The names the statements give the session id they are bound to."""
FAN_OUT = frozenset({"summaries", "summaries_before", "ids_of_sessions", "ids_of_events"})
"""Reads across sessions (listing, verify's enumeration): every shard answers."""
LISTING = list_statement(frozenset())
"""The filtered listings (``list(cwd=..., tag=...)``), compiled on first use: fan-outs too."""
REFERENCE = frozenset({"store_id"})
"""``store_state``: one row, a reference table (copied to every node)."""

_TABLE = re.compile(r'\b(?:FROM|UPDATE|INTO|JOIN)\s+(?:"?\w+"?\.)?"?(\w+)\b"?(?!\()')
"""A table a statement names (a function in FROM, such as the append's ``unnest`` of its
rows' arrays, is none)."""


def single_session_problem(sql: str, names: tuple[str, ...]) -> str | None:
    """Why ``sql`` (positional parameters ``names``) is not a one-session statement, or None."""
    sql = " ".join(sql.split())
    tables = set(_TABLE.findall(sql))
    if len(tables) > 1:
        return co_located_problem(sql, names, tables)
    if not tables:
        return "touches no table"
    table = tables.pop()
    key = SESSION_KEY.get(table)
    if key is None:
        return f"{table} is not keyed by session"
    verb = sql.lstrip().split(None, 1)[0].upper()
    if verb == "INSERT":
        columns = [c.strip().strip('"') for c in sql.split("(", 1)[1].split(")", 1)[0].split(",")]
        if key not in columns or names[columns.index(key)] not in SESSION_PARAMETERS:
            return f"the insert does not set {table}.{key} from a session id"
        return None
    if " WHERE " not in sql:
        return "no WHERE clause"
    where = sql.split(" WHERE ", 1)[1]
    if re.search(r"\bOR\b", where, re.IGNORECASE):
        return "an OR in the WHERE clause"
    found = re.match(rf'\s*(?:"?\w+"?\.)?"?{table}"?\.{key} = \$(\d+)', where)
    if found is None:
        return f"the WHERE clause does not start with {table}.{key} = $n"
    if names[int(found[1]) - 1] not in SESSION_PARAMETERS:
        return f"{table}.{key} is compared with {names[int(found[1]) - 1]}, not a session id"
    return None


def co_located_problem(sql: str, names: tuple[str, ...], tables: set[str]) -> str | None:
    """Why a statement over several tables is not a one-shard statement, or None: one of them
    must be filtered by a session-id parameter and every other joined to it on the session
    keys (co-located tables: the rows it joins lie on the same shard)."""
    unkeyed = sorted(t for t in tables if t not in SESSION_KEY)
    if unkeyed:
        return f"{unkeyed[0]} is not keyed by session"
    if re.search(r"\bOR\b", sql, re.IGNORECASE):
        return "an OR in the statement"
    pinned = []
    for table in tables:
        found = re.search(rf"\b{table}\.{SESSION_KEY[table]} = \$(\d+)", sql)
        if found is not None and names[int(found[1]) - 1] in SESSION_PARAMETERS:
            pinned.append(table)
    if len(pinned) != 1:
        return f"touches {sorted(tables)}, not one table filtered by a session id"
    outer = pinned[0]
    for table in sorted(tables - {outer}):
        ours, theirs = SESSION_KEY[table], SESSION_KEY[outer]
        join = rf'\b{table}"?\.{ours} = (?:"?\w+"?\.)?"?{outer}"?\.{theirs}\b'
        if re.search(join, sql) is None:
            return f"{table} is not joined to {outer} on the session key"
    return None


def hot_path_statements(namespace: Namespace) -> dict[str, tuple[str, tuple[str, ...]]]:
    compiled = postgres.statements(namespace)
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for group in (compiled.append, compiled.writes):
        for field in dataclasses.fields(group):
            statement = getattr(group, field.name)
            if statement is None:  # a statement of the other backend (SQLite's FTS5)
                continue
            found[f"{type(group).__name__}.{field.name}"] = (statement.sql, statement.names)
    for name, read in compiled.reads.items():
        if name not in FAN_OUT | REFERENCE and not name.startswith(LISTING):
            found[f"reads.{name}"] = (read.sql, read.names)
    return found


@pytest.mark.parametrize(
    "namespace", [DEFAULT, Namespace(schema="agent")], ids=["default", "schema"]
)
def test_every_hot_path_statement_touches_one_session(namespace: Namespace) -> None:
    statements = hot_path_statements(namespace)
    # the append, lease and checkpoint writes and the per-session reads are all there
    for name in (
        "AppendStatements.insert_events",
        "AppendStatements.state",
        "WriteStatements.insert_lease",
        "WriteStatements.insert_checkpoint",
        "reads.events",
        "reads.checkpoints_at_most",
    ):
        assert name in statements
    problems = {
        name: problem
        for name, (sql, names) in statements.items()
        if (problem := single_session_problem(sql, names)) is not None
    }
    assert problems == {}


def test_the_check_refuses_what_would_fan_out() -> None:
    reads = postgres.statements(DEFAULT).reads
    for name in FAN_OUT:
        assert single_session_problem(reads[name].sql, reads[name].names) is not None
    sql = "SELECT session_events.seq FROM session_events WHERE session_events.session_id = $1"
    assert single_session_problem(sql, ("session_id",)) is None
    assert single_session_problem(sql + " OR session_events.seq = $2", ("session_id", "seq"))
    assert single_session_problem(sql, ("after",))  # bound to something else
    joined = "SELECT 1 FROM sessions JOIN session_events ON true WHERE sessions.id = $1"
    assert single_session_problem(joined, ("session_id",))
    # a co-located subquery joined on the session key stays on the shard; on another key not
    correlated = (
        "SELECT sessions.next_seq, (SELECT session_events.chain FROM session_events WHERE "
        "session_events.session_id = sessions.id AND session_events.seq = 1) FROM sessions "
        "WHERE sessions.id = $1"
    )
    assert single_session_problem(correlated, ("session_id",)) is None
    assert single_session_problem(correlated.replace("= sessions.id", "= sessions.cwd"), ("id",))
    assert single_session_problem(correlated, ("after",))
    insert = "INSERT INTO session_tags (tag, session_id) VALUES ($1, $2)"
    assert single_session_problem(insert, ("tag", "session_id")) is None
    assert single_session_problem(insert, ("tag", "owner"))
