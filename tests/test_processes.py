"""Several OS processes on one database: racing writers, many writers, concurrent first start."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from factories import T0, header

from todo_sessions import SessionEvent, SessionStore

WORKER = Path(__file__).resolve().parent / "workers.py"

pytestmark = pytest.mark.slow


def run_children(tmp_path: Path, argv_list: list[list[str]], timeout: float = 120) -> list[dict]:
    """Start every child, release them together, and return their JSON results."""
    go = tmp_path / f"go-{len(list(tmp_path.iterdir()))}"
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), argv[0], argv[1], argv[2], str(go), *argv[3:]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argv_list
    ]
    go.touch()
    outputs = []
    try:
        for proc in procs:
            outputs.append((proc, *proc.communicate(timeout=timeout)))
    finally:
        for proc in procs:  # on a timeout, leave no child and no open pipe behind
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    results = []
    for proc, out, err in outputs:
        assert proc.returncode == 0, f"child failed:\n{err}"
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


@pytest.fixture(params=["sqlite-file", "postgres"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database nobody has migrated yet."""
    if request.param == "sqlite-file":
        return f"sqlite:///{tmp_path}/fresh.db"
    return request.getfixturevalue("fresh_pg_url")


def test_four_processes_opening_a_fresh_database_all_succeed(
    fresh_url: str, tmp_path: Path
) -> None:
    results = run_children(tmp_path, [["open", fresh_url, f"p{i}"] for i in range(4)])
    assert sorted(r["name"] for r in results) == ["p0", "p1", "p2", "p3"]


async def test_two_processes_racing_on_one_session(shared_db_url: str, tmp_path: Path) -> None:
    results = run_children(
        tmp_path, [["race", shared_db_url, name, "shared", "60"] for name in ("a", "b")]
    )
    won = {r["name"]: r["won"] for r in results}
    assert not set(won["a"]) & set(won["b"]), "two writers acknowledged the same seq"
    async with SessionStore(shared_db_url) as store:
        events = await store.read_from("shared")
    assert [e.seq for e in events] == list(range(len(events)))
    assert len(events) == len(won["a"]) + len(won["b"])
    for event in events:
        assert event.seq in won[event.data["by"]]
        assert event.data["seq"] == event.seq


async def test_two_processes_by_four_tasks_lose_nothing(shared_db_url: str, tmp_path: Path) -> None:
    results = run_children(
        tmp_path, [["many", shared_db_url, name, "4", "2.0"] for name in ("p0", "p1")]
    )
    acked: dict[str, int] = {}
    for r in results:
        acked.update(r["acked"])
    assert len(acked) == 8
    async with SessionStore(shared_db_url) as store:
        for session, count in acked.items():
            events = await store.read_from(session)
            assert len(events) == count, session
            assert [e.seq for e in events] == list(range(count))
        assert len(await store.list(limit=100)) == 8


async def test_four_processes_by_four_tasks_shared_and_separate(
    shared_db_url: str, tmp_path: Path
) -> None:
    async with SessionStore(shared_db_url) as store:
        await store.create(header("shared"))
        await store.append("shared", [SessionEvent("request/context", 0, T0, {"by": "setup"})])
    results = run_children(
        tmp_path, [["mixed", shared_db_url, f"p{i}", "4", "2.0"] for i in range(4)]
    )
    won: list[int] = [seq for r in results for seq in r["won"]]
    assert len(won) == len(set(won)), "a seq was acknowledged twice"
    async with SessionStore(shared_db_url) as store:
        shared = await store.read_from("shared")
        assert [e.seq for e in shared] == list(range(len(shared)))
        assert sorted(won) == list(range(1, len(shared)))  # every stored event was acknowledged
        for event in shared[1:]:
            assert event.data["seq"] == event.seq
        for r in results:
            for session, count in r["own"].items():
                assert await store.count(session) == count
    assert sum(r["conflicts"] for r in results) > 0  # they really raced


async def test_follow_sees_another_process_appending(shared_db_url: str, tmp_path: Path) -> None:
    async with SessionStore(shared_db_url) as store:
        await store.create(header("tail"))
        await store.append("tail", [SessionEvent("request/context", 0, T0, {"by": "setup"})])
        seen: list[int] = []

        async def follow() -> None:
            async for event in store.follow("tail", poll_interval=0.01):
                seen.append(event.seq)
                if event.seq == 60:
                    return

        reader = asyncio.create_task(follow())
        child = await asyncio.to_thread(
            run_children, tmp_path, [["append", shared_db_url, "writer", "tail", "60"]]
        )
        assert child[0]["appended"] == 60
        await asyncio.wait_for(reader, 30)
        assert seen == list(range(61))
