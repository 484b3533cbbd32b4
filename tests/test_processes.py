"""Several OS processes on one database: racing writers, many writers, concurrent first start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from todo_sessions import SessionStore

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
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
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
