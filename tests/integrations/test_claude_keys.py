"""The Claude Agent SDK store maps keys to sessions one to one (issue 39, item 5): a main key
whose ``session_id`` is ``S~<sha256(subpath)[:16]>`` addressed S's sub-agent transcript (read,
append and delete). Keys stored before keep working where they are, and a key whose id holds
another key's transcript is refused, never served it."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

pytest.importorskip("claude_agent_sdk")

from todo_sessions import InvalidEventError, SessionNotFoundError, SessionStore
from todo_sessions.integrations import claude_agent_sdk as sdk
from todo_sessions.integrations.claude_agent_sdk import TodoSessionsStore, session_id_for

PROJECT = "/home/me/project"
SUBPATH = "subagents/agent-1"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


async def _exists(store: SessionStore, session_id: str) -> bool:
    try:
        await store.summary(session_id)
    except SessionNotFoundError:
        return False
    return True


def _key(session: str, subpath: str | None = None) -> dict[str, Any]:
    key = {"project_key": PROJECT, "session_id": session}
    return key if subpath is None else {**key, "subpath": subpath}


def _entry(n: int, text: str) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": f"00000000-0000-4000-8000-{n:012d}",
        "timestamp": f"2026-01-01T00:00:{n:02d}.000Z",
        "message": {"role": "user", "content": text},
    }


SUB = _key("S", SUBPATH)
FORGED = _key(f"S~{_digest(SUBPATH)}")
"""A main key spelling the sub-agent key's id."""


def test_every_key_has_an_id_of_its_own() -> None:
    h = _digest(SUBPATH)
    sessions = [
        "S",
        "S~",
        "S~~",
        f"S~{h}",
        f"S~{h}~",
        f"S~{h}~~",
        f"S~{h}~{h}",
        "S~x",
        "~",
        f"~{h}",
    ]
    keys = [_key(s) for s in sessions] + [_key(s, p) for s in sessions for p in (SUBPATH, "p2")]
    ids = [session_id_for(k) for k in keys]
    assert len(set(ids)) == len(keys)
    # keys as the SDK makes them (uuids) keep the ids they were stored under
    uuid = "3f2a9c1e-0b7d-4e58-9a61-2c4d8e0f1a7b"
    project = hashlib.sha256(PROJECT.encode()).hexdigest()[:16]
    assert session_id_for(_key(uuid)) == f"claude-{project}-{uuid}"
    assert session_id_for(_key(uuid, SUBPATH)) == f"claude-{project}-{uuid}~{h}"


async def test_a_main_key_never_reaches_a_sub_agent_transcript(store: SessionStore) -> None:
    adapter = TodoSessionsStore(store)
    await adapter.append(SUB, [_entry(1, "the sub-agent's secret")])
    assert await adapter.load(FORGED) is None  # read: not the sub-agent's lines
    await adapter.append(FORGED, [_entry(2, "main")])  # append: a session of its own
    assert [e["message"]["content"] for e in await adapter.load(FORGED) or []] == ["main"]
    assert [e["message"]["content"] for e in await adapter.load(SUB) or []] == [
        "the sub-agent's secret"
    ]
    await adapter.delete(FORGED)  # delete: its own session only
    assert await adapter.load(FORGED) is None
    assert await adapter.load(SUB) is not None
    assert await adapter.list_subkeys(_key("S")) == [SUBPATH]
    assert await adapter.list_subkeys(FORGED) == []


def _stored_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter as it was: every key at ``claude-<project>-<session_id>[~<subpath>]``."""
    before = sdk._id_of
    monkeypatch.setattr(sdk, "session_id_for", lambda key: before(*sdk._check_key(key)))
    monkeypatch.setattr(sdk, "_earlier_id", lambda key: None)


async def test_keys_stored_before_keep_working(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = TodoSessionsStore(store)
    with monkeypatch.context() as before:
        _stored_as_before(before)
        await adapter.append(FORGED, [_entry(1, "stored before")])
        await adapter.append(_key(FORGED["session_id"], "p2"), [_entry(2, "its sub-agent")])
        await adapter.append(_key("plain"), [_entry(3, "plain")])
    old_id = f"claude-{_digest(PROJECT)}-{FORGED['session_id']}"
    assert session_id_for(FORGED) != old_id and await _exists(store, old_id)
    adapter = TodoSessionsStore(store)  # a new process
    assert [e["message"]["content"] for e in await adapter.load(FORGED) or []] == ["stored before"]
    assert [e["message"]["content"] for e in await adapter.load(_key("plain")) or []] == ["plain"]
    await adapter.append(FORGED, [_entry(4, "appended after")])
    assert len(await adapter.load(FORGED) or []) == 2
    assert not await _exists(store, session_id_for(FORGED))  # still in its old session
    assert await adapter.list_subkeys(FORGED) == ["p2"]
    assert await adapter.load(_key(FORGED["session_id"], "p2")) is not None
    # S's sub-agent key now names the old session of FORGED: refused, never served it
    assert session_id_for(SUB) == old_id
    assert await adapter.load(SUB) is None
    with pytest.raises(InvalidEventError, match="another key"):
        await adapter.append(SUB, [_entry(5, "sub")])
    await adapter.delete(SUB)
    assert len(await adapter.load(FORGED) or []) == 2
    await adapter.delete(FORGED)  # the old session, with its sub-agent's
    assert await adapter.load(FORGED) is None and not await _exists(store, old_id)
    assert await adapter.load(_key(FORGED["session_id"], "p2")) is None
