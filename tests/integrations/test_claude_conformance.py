"""The Claude Agent SDK's own `SessionStore` conformance suite on every backend, nothing
skipped, plus the adapter's own contract: uuid idempotency, keys, bad input."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from claude_agent_sdk.testing import run_session_store_conformance
from conftest import _empty_pg

from todo_sessions import InvalidEventError, SessionStore
from todo_sessions.integrations.claude_agent_sdk import TodoSessionsStore, session_id_for

OPTIONAL = ("list_sessions", "list_session_summaries", "delete", "list_subkeys")


@pytest.fixture
async def fresh_stores(db_url: str, tmp_path: os.PathLike[str]) -> AsyncIterator[Any]:
    """``make_store`` for the suite: each call gets an empty database of the test's backend."""
    opened: list[SessionStore] = []
    count = 0

    async def make() -> TodoSessionsStore:
        nonlocal count
        count += 1
        url = db_url
        if db_url.startswith("sqlite:///"):
            url = f"sqlite:///{tmp_path}/conformance-{count}.db"
        elif db_url.startswith("postgresql"):
            await _empty_pg(db_url)
        store = SessionStore(url)
        opened.append(store)
        return TodoSessionsStore(store)

    yield make
    for store in opened:
        await store.aclose()


async def test_sdk_conformance_suite(fresh_stores: Any) -> None:
    probe = await fresh_stores()
    for method in OPTIONAL:  # the suite skips what a store does not override: we override all
        assert getattr(type(probe), method, None) is not None, method
    await run_session_store_conformance(fresh_stores, skip_optional=frozenset())


KEY = {"project_key": "proj", "session_id": "s1"}


def _entries(n: int, prefix: str = "u") -> list[dict[str, Any]]:
    return [
        {
            "type": "user",
            "uuid": f"{prefix}{i}",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": f"prompt {i}"},
        }
        for i in range(n)
    ]


async def test_same_batch_three_times_is_stored_once(store: SessionStore) -> None:
    adapter = TodoSessionsStore(store)
    batch = _entries(3)
    for _ in range(3):
        await adapter.append(KEY, batch)
    assert await adapter.load(KEY) == batch
    # a retried batch that overlaps the stored one adds only the new line
    await adapter.append(KEY, [*batch[1:], *_entries(1, "v")])
    assert [e["uuid"] for e in await adapter.load(KEY)] == ["u0", "u1", "u2", "v0"]
    # and so does a second adapter (a new process) on the same store
    again = TodoSessionsStore(store)
    await again.append(KEY, batch)
    assert len(await again.load(KEY)) == 4
    # lines without a uuid are appended every time
    await again.append(KEY, [{"type": "custom-title", "customTitle": "t"}] * 2)
    assert len(await again.load(KEY)) == 6


@pytest.mark.parametrize(
    ("key", "entries", "field"),
    [
        ({**KEY, "subpath": ""}, _entries(1), "key.subpath"),
        ({"project_key": "p", "session_id": "x" * 151}, _entries(1), "key.session_id"),
        ({"project_key": "p", "session_id": ""}, _entries(1), "key.session_id"),
        (KEY, [*_entries(1), "not an object"], "entries[1]"),
        (KEY, [{"uuid": "no type"}], "type"),
        (KEY, [{"type": "x", "value": float("nan")}], None),
        (KEY, [{"type": "x", "value": b"bytes"}], None),
    ],
)
async def test_bad_input_is_a_typed_error_and_writes_nothing(
    store: SessionStore, key: dict[str, Any], entries: list[Any], field: str | None
) -> None:
    adapter = TodoSessionsStore(store)
    with pytest.raises(InvalidEventError) as caught:
        await adapter.append(key, entries)
    if field is not None:
        assert caught.value.field == field
    assert await store.list() == []


async def test_keys_map_to_sessions_and_children(store: SessionStore) -> None:
    adapter = TodoSessionsStore(store, cwd="/work/project")
    sub = {**KEY, "subpath": "subagents/agent-1"}
    await adapter.append(KEY, _entries(1))
    await adapter.append(sub, _entries(1, "s"))
    main = await store.summary(session_id_for(KEY))
    child = await store.summary(session_id_for(sub))
    assert child.parent == main.id and main.parent is None
    assert main.cwd == "/work/project"
    assert [s.id for s in await store.list(parent=main.id)] == [child.id]
    # a long project key is digested, and two projects never share a session
    long = {"project_key": "p" * 5000, "session_id": "s1"}
    await adapter.append(long, _entries(1))
    assert [s["session_id"] for s in await adapter.list_sessions("p" * 5000)] == ["s1"]
    assert len(await adapter.list_sessions("proj")) == 1
