"""Retention (`SessionStore.prune`, ``todo-sessions prune``): archive, verify, then delete.

The crash test kills a pruning child (tests/prune_child.py) with SIGKILL at random moments of
a prune of 200 sessions, then lets a last run finish: every session is still in the database
(whole) or in an archive that reads back as its export, never neither. Archives import back
byte-identical; a session under a live lease is never pruned; checkpoints thin out."""

from __future__ import annotations

import asyncio
import datetime
import gzip
import json
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import prune_child
import pytest
from click.testing import CliRunner
from factories import T0, header, turn

from todo_sessions import PruneReport, SessionStore, export_lines
from todo_sessions._jsonout import escape_controls
from todo_sessions.cli import main
from todo_sessions.core.checkpoint import LiveState
from todo_sessions.store.retention import PRUNE_OWNER, archive_path


async def export_text(store: SessionStore, session_id: str) -> str:
    return "".join([escape_controls(line) + "\n" async for line in export_lines(store, session_id)])


async def seed(url: str, count: int, *, clock_start: int = T0) -> dict[str, str]:
    """``count`` small sessions (one turn each), oldest first; their exports by id."""
    ticks = iter(range(clock_start, clock_start + 10 * count))
    async with SessionStore(url, clock=lambda: next(ticks), synchronous="NORMAL") as store:
        for n in range(count):
            sid = f"p{n:03d}"
            await store.create(header(sid, title=f"session {n}"))
        await asyncio.gather(
            *(store.append(f"p{n:03d}", turn(0, text=f"prompt {n} ü\u2028")) for n in range(count))
        )  # one group commit
        return {s.id: await export_text(store, s.id) for s in await store.list(limit=count)}


def archived_text(path: Path) -> str:
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        return f.read()


def test_a_prune_killed_at_random_points_loses_nothing(tmp_path: Path) -> None:
    """A few seconds: 200 durable archive-and-delete rounds (the issue's size) in forked
    children (no interpreter start-up), three of them killed, the state checked after each."""
    url = f"sqlite:///{tmp_path}/s.db"
    archive = tmp_path / "archive"
    originals = asyncio.run(seed(url, 200))
    rng = random.Random(29)
    forked = multiprocessing.get_context("fork")
    kills = 0
    for _ in range(3):
        ready = forked.Event()
        child = forked.Process(target=prune_child.run, args=(url, str(archive), ready))
        child.start()
        assert ready.wait(60)
        time.sleep(rng.uniform(0.05, 0.8))
        if child.is_alive():
            os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
            kills += 1
        child.join()
        assert asyncio.run(state_is_whole(url, archive, originals))
    assert kills >= 1
    last = forked.Process(target=prune_child.run, args=(url, str(archive)))
    last.start()
    last.join()
    assert last.exitcode == 0
    assert asyncio.run(state_is_whole(url, archive, originals))
    assert asyncio.run(listed(url)) == []
    assert not list(archive.glob("*.tmp"))
    assert len(list(archive.glob("*.jsonl.gz"))) == 200


async def listed(url: str) -> list[str]:
    async with SessionStore(url) as store:
        return [s.id for s in await store.list()]


async def state_is_whole(url: str, archive: Path, originals: dict[str, str]) -> bool:
    """Every session in the database as it was, or (not in it) in an archive that reads back
    as its export; none in neither."""
    async with SessionStore(url) as store:
        present = {s.id for s in await store.list(limit=1000)}
        for sid, text in originals.items():
            if sid in present:
                assert await export_text(store, sid) == text, f"{sid} changed in the database"
            else:
                path = archive_path(archive, sid)
                assert path.is_file(), f"{sid} is in neither the database nor an archive"
                assert archived_text(path) == text, f"{sid}'s archive is not its export"
    return True


def test_archives_import_back_byte_identical(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/s.db"
    originals = asyncio.run(seed(db, 3))
    archive = tmp_path / "a"

    async def prune(dry_run: bool) -> PruneReport:
        async with SessionStore(db) as store:
            return await store.prune(keep_last=1, archive=archive, dry_run=dry_run)

    dry = asyncio.run(prune(True))
    assert dry.selected == ("p001", "p000") and not archive.exists()
    assert asyncio.run(prune(False)).deleted == ("p001", "p000")
    runner = CliRunner()
    listed = runner.invoke(main, ["--db", db, "list", "--json"])
    assert [s["id"] for s in json.loads(listed.stdout)] == ["p002"]
    for sid in ("p000", "p001"):
        path = archive_path(archive, sid)
        assert archived_text(path) == originals[sid]
        imported = runner.invoke(main, ["--db", db, "import", str(path)])
        assert imported.exit_code == 0, imported.output
        exported = runner.invoke(main, ["--db", db, "export", sid])
        assert exported.exit_code == 0
        assert exported.stdout == originals[sid] == archived_text(path)
    # pruned again (the imports are the newest now: p002 and p000 go): p000's archive, already
    # there, is verified and reused byte for byte
    before = {p.name: p.read_bytes() for p in archive.iterdir()}
    assert asyncio.run(prune(False)).deleted == ("p000", "p002")
    after = {p.name: p.read_bytes() for p in archive.iterdir()}
    assert after["p000.jsonl.gz"] == before["p000.jsonl.gz"] and "p002.jsonl.gz" in after


@pytest.fixture(params=["sqlite-file", "postgres"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite-file":
        return f"sqlite:///{tmp_path}/s.db"
    return str(request.getfixturevalue("fresh_pg_url"))


async def test_a_session_under_a_live_lease_is_never_pruned(
    backend_url: str, tmp_path: Path
) -> None:
    await seed(backend_url, 4)
    async with SessionStore(backend_url) as store:
        await store.acquire_lease("p000", "a-service", ttl=60)
        expired = await store.acquire_lease("p001", "gone-service", ttl=0.001)
        await asyncio.sleep(0.01)
        crashed = await store.acquire_lease("p002", PRUNE_OWNER, ttl=60)  # a killed prune's
        report = await store.prune(older_than=0, archive=tmp_path / "a")
        assert report.leased == ("p000",)
        assert set(report.deleted) == {"p001", "p002", "p003"}
        assert [s.id for s in await store.list()] == ["p000"]
        assert expired.owner and crashed.owner
        refused = await store.prune(keep_last=0, archive=tmp_path / "a", tag="none")
        assert refused.selected == ()


async def test_older_than_keep_last_and_tag_select_by_last_activity(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    await seed(url, 5)
    now = T0 + 10_000
    async with SessionStore(url, clock=lambda: now) as store:
        await store.update_meta("p001", tags=["keep-me"])  # its last activity is now
        ids = [s.id for s in await store.list()]
        assert ids[0] == "p001"
        cut = (await store.list())[2].updated_at

        async def selected(**options: Any) -> tuple[str, ...]:
            report = await store.prune(archive=tmp_path, dry_run=True, **options)
            return report.selected

        assert await selected(older_than=now - cut) == tuple(ids[3:])
        assert await selected(older_than=datetime.timedelta(0), keep_last=2) == tuple(ids[2:])
        assert await selected(keep_last=4) == tuple(ids[4:])
        assert await selected(keep_last=0, tag="keep-me") == ("p001",)
        assert await selected(older_than=0, tag="keep-me") == ()  # active right now
        with pytest.raises(ValueError, match="archive"):
            await store.prune(older_than=0)
        with pytest.raises(ValueError, match="needs"):
            await store.prune()
        with pytest.raises(TypeError, match="older_than"):
            await store.prune(older_than="90d", archive=tmp_path)  # type: ignore[arg-type]
        assert len(await store.list()) == 5  # dry runs changed nothing


async def test_checkpoints_beyond_the_newest_few_are_pruned_without_archive(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    async with SessionStore(url) as store:
        await store.create(header("c"))
        events = []
        for k in range(4):
            batch = turn(6 * k, k + 1)
            await store.append("c", batch)
            events += batch
            state = LiveState.empty()
            state.apply_all(events)
            await store.write_checkpoint("c", state)
        assert len(await store.checkpoints("c")) == 4
        dry = await store.prune(keep_checkpoints=1, dry_run=True)
        assert dry.checkpoints_deleted == 3 and len(await store.checkpoints("c")) == 4
        done = await store.prune(keep_checkpoints=1)
        assert done.checkpoints_deleted == 3 and done.deleted == ()
        assert [c.seq for c in await store.checkpoints("c")] == [24]
        assert len(await store.read_from("c")) == 24


def test_the_cli_prunes_and_refuses_to_delete_without_an_archive(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/s.db"
    asyncio.run(seed(db, 2))
    runner = CliRunner()
    refused = runner.invoke(main, ["--db", db, "prune", "--keep-last", "0"])
    assert refused.exit_code == 2 and "--archive" in refused.output
    dry = runner.invoke(
        main, ["--db", db, "prune", "--keep-last", "1", "--archive", "a", "--dry-run"]
    )
    assert dry.exit_code == 0 and "would archive and delete p000" in dry.output
    done = runner.invoke(
        main,
        ["--db", db, "prune", "--older-than", "1d", "--archive", str(tmp_path / "a"), "--json"],
    )
    assert done.exit_code == 0, done.output
    assert '"deleted": [' in done.output or '"deleted":[' in done.output
