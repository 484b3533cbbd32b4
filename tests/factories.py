"""Small builders of valid events for store tests."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from todo_sessions import Message, SessionEvent, SessionHeader, SessionStore
from todo_sessions.store.recorder import Recorder

T = TypeVar("T")

T0 = 1_764_000_000_000


def header(session_id: str = "s1", **fields: Any) -> SessionHeader:
    fields.setdefault("created_at", T0)
    return SessionHeader(id=session_id, **fields)


def user_message(seq: int, text: str = "hello") -> SessionEvent:
    return SessionEvent(
        "user/message",
        seq,
        T0 + seq,
        {
            "id": f"u{seq}",
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        },
        surface_op="append",
    )


def todo_write(seq: int, *items: tuple[str, str]) -> SessionEvent:
    todos = [{"content": c, "status": s} for c, s in items]
    return SessionEvent("todo/write", seq, T0 + seq, {"todos": todos})


def turn(start: int, number: int = 1, *, text: str = "hi") -> list[SessionEvent]:
    """A complete small turn starting at seq ``start``: 6 events."""
    s = start
    return [
        SessionEvent("turn/start", s, T0 + s, {"turn": number}),
        user_message(s + 1, text),
        todo_write(s + 2, ("plan", "in_progress")),
        SessionEvent("step/start", s + 3, T0 + s + 3, {"turn": number, "step": 1}),
        SessionEvent("step/end", s + 4, T0 + s + 4, {"turn": number, "step": 1}),
        SessionEvent(
            "turn/end", s + 5, T0 + s + 5, {"turn": number, "reason": {"kind": "completed"}}
        ),
    ]


def chunks(start: int, count: int, *, text: str = "x" * 40) -> list[SessionEvent]:
    """``count`` assistant chunks from seq ``start`` (payload sizes like a real stream)."""
    return [
        SessionEvent(
            "assistant/chunk",
            start + i,
            T0 + start + i,
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}},
        )
        for i in range(count)
    ]


def call_ids(messages: Sequence[Message]) -> tuple[list[str], list[str]]:
    """(tool-call ids asked for by assistant messages, tool-result ids answered), in order."""
    calls = [
        b.id for m in messages if m.role == "assistant" for b in m.content if b.type == "tool-call"
    ]
    results = [
        b.tool_call_id
        for m in messages
        if m.role == "user"
        for b in m.content
        if b.type == "tool-result"
    ]
    return calls, results


_OUR_TABLES = re.compile(
    r"\b(session_events|session_checkpoints|session_leases|session_tags|store_state|sessions)\b"
)


def in_namespace(store: SessionStore, statement: str) -> str:
    """Raw SQL written with our default table names, naming the store's namespace's tables
    instead (``"agent".session_events``, ``agent_session_events``)."""
    namespace = store.namespace
    if namespace.is_default:
        return statement
    return _OUR_TABLES.sub(lambda m: namespace.sql_name(m.group(1)), statement)


def chain_literal(store: SessionStore, value: str) -> str:
    """A chain value (hex) as the SQL literal of the stored column (BLOB / bytea)."""
    return f"X'{value}'" if store.dialect == "sqlite" else f"'\\x{value}'::bytea"


async def tamper(store: SessionStore, *statements: str) -> None:
    """Run ``statements`` (in one transaction) past the append-only triggers, as someone with
    raw access would (our table names in them are the store's namespace's: `in_namespace`)."""
    events = store.namespace.name("session_events")
    sessions = store.namespace.name("sessions")

    def run(conn: Connection) -> None:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SET LOCAL session_replication_role = replica"))
        else:
            conn.execute(text(f"DROP TRIGGER IF EXISTS trg_{events}_no_update"))
            conn.execute(text(f"DROP TRIGGER IF EXISTS trg_{events}_no_delete"))
            conn.execute(text(f"DROP TRIGGER IF EXISTS trg_{events}_no_replace"))
            conn.execute(text(f"DROP TRIGGER IF EXISTS trg_{sessions}_no_delete"))
            conn.execute(text(f"DROP TRIGGER IF EXISTS trg_{sessions}_no_replace"))
        for statement in statements:
            conn.execute(text(in_namespace(store, statement)))

    await raw_sql(store, run)


async def raw_sql(at: SessionStore | str, fn: Callable[[Connection], T]) -> T:
    """Run ``fn(connection)`` in one transaction on the database of ``at`` (a store, or its URL)
    through an engine of the test's own, never a connection of the store's: raw access, as
    anyone holding the database's credentials has it, for what the store never does (tamper
    with rows, drop a trigger) or never shows (stored column values). An SQLite connection
    gets ``foreign_keys=ON``, as the store's own have. An in-memory SQLite database has no
    connection but its store's: the test is skipped there."""
    url = at if isinstance(at, str) else at.url
    parsed = make_url(url if "://" in url else f"sqlite:///{url}")  # or a plain path
    if parsed.get_backend_name() == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            pytest.skip("an in-memory SQLite database has no connection but its store's")
        engine = create_engine(f"sqlite:///{parsed.database}", poolclass=NullPool)
        event.listen(engine, "connect", lambda conn, _: conn.execute("PRAGMA foreign_keys = ON"))

        def run() -> T:
            try:
                with engine.begin() as conn:
                    return fn(conn)
            finally:
                engine.dispose()

        return await asyncio.to_thread(run)
    if parsed.password == "***":
        raise ValueError(f"{url}: the password is masked; give raw_sql the database's URL")
    server = create_async_engine(
        parsed.set(drivername="postgresql+asyncpg", query={}),
        poolclass=NullPool,
        connect_args={  # PgBouncer in transaction mode: no statement outlives its transaction
            "statement_cache_size": 0,
            "prepared_statement_name_func": lambda: f"__raw_{uuid.uuid4().hex}__",
        },
    )
    try:
        async with server.begin() as conn:
            return await conn.run_sync(fn)
    finally:
        await server.dispose()


async def recorder_of(store: SessionStore) -> Recorder:
    """The store's recorder (opened), for the named operations of the recorder contract that
    `SessionStore` has no public twin of (the index's rows, its pending mark)."""
    return await store._core.ready()
