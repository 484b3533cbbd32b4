"""Two processes appending Claude batches at once, to a key each and to one shared key: nothing
lost, nothing duplicated, no batch interleaved with another."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import _empty_pg

from todo_sessions.integrations.claude_agent_sdk import TodoSessionsStore

HERE = Path(__file__).parent
BATCHES = 15


@pytest.fixture(params=["sqlite-file", "postgres"])
async def two_process_url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Two backends only: each child costs seconds of SDK import."""
    if request.param == "sqlite-file":
        return f"sqlite:///{tmp_path}/procs.db"
    url = request.getfixturevalue("pg_database_url")
    await _empty_pg(url)
    return url


async def test_two_processes_lose_and_duplicate_nothing(
    two_process_url: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(HERE / "claude_worker.py"),
            two_process_url,
            name,
            str(go),
            str(BATCHES),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ},
        )
        for name in ("w1", "w2")
    ]
    await asyncio.sleep(0.5)
    go.touch()
    for child in children:
        out, err = await asyncio.wait_for(child.communicate(), 180)
        assert child.returncode == 0 and out.strip() == b"ok", err.decode()
    async with TodoSessionsStore(two_process_url) as store:
        for name in ("w1", "w2"):
            own = await store.load({"project_key": "p", "session_id": name})
            expected = [f"{name}-{i}-{j}" for i in range(BATCHES) for j in range(5)]
            assert [e["uuid"] for e in own or []] == expected
        shared = [
            e["uuid"] for e in await store.load({"project_key": "p", "session_id": "shared"}) or []
        ]
        assert len(shared) == len(set(shared)) == 2 * BATCHES * 5
        # each batch's five lines are together, in order; each writer's batches in its order
        batches = [shared[k : k + 5] for k in range(0, len(shared), 5)]
        assert all(len({u.rsplit("-", 1)[0] for u in b}) == 1 for b in batches)
        for name in ("w1", "w2"):
            mine = [b[0].rsplit("-", 1)[0] for b in batches if b[0].startswith(name)]
            assert mine == [f"{name}-{i}" for i in range(BATCHES)]
        assert sorted(s["session_id"] for s in await store.list_sessions("p")) == [
            "shared",
            "w1",
            "w2",
        ]
