"""Prune's archive files do not trust the archive directory (issue 39, item 2).

Archives and their temporary files are 0600 in a 0700 directory; a symlink, FIFO or
directory planted there is never followed and never blocks (a clean error or the entry
replaced); ids that differ only in case, or too long for a file name when percent-encoded,
get distinct archives that import back; an archive named as before is still reused; a file
at a session's name that holds another session is never overwritten."""

from __future__ import annotations

import asyncio
import gzip
import os
import stat
import threading
from pathlib import Path

import pytest
from factories import header, turn

from todo_sessions import SessionStore, export_lines, import_lines
from todo_sessions._jsonout import escape_controls
from todo_sessions.errors import StoreError
from todo_sessions.store.archives import archive_path, legacy_archive_path

COLLIDING = ["Mixed", "mixed", "MIXED", "é" * 43, "É" * 43, "a/b", "A/B", ".hidden", "con"]


@pytest.fixture(params=["sqlite-file", "postgres"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite-file":
        return f"sqlite:///{tmp_path}/s.db"
    return str(request.getfixturevalue("fresh_pg_url"))


async def export_text(store: SessionStore, session_id: str) -> str:
    return "".join([escape_controls(line) + "\n" async for line in export_lines(store, session_id)])


async def seed(store: SessionStore, *ids: str) -> dict[str, str]:
    for n, sid in enumerate(ids):
        await store.create(header(sid, title=f"session {n}"))
        await store.append(sid, turn(0, text=f"prompt {n}"))
    return {sid: await export_text(store, sid) for sid in ids}


def unpacked(path: Path) -> str:
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        return f.read()


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


async def test_archives_are_0600_in_a_0700_directory(backend_url: str, tmp_path: Path) -> None:
    directory = tmp_path / "new" / "archive"
    async with SessionStore(backend_url) as store:
        await seed(store, "m1", "m2")
        report = await store.prune(keep_last=0, archive=directory)
    assert set(report.deleted) == {"m1", "m2"}
    assert mode(directory) == 0o700
    names = sorted(p.name for p in directory.iterdir())
    assert names == ["m1.jsonl.gz", "m2.jsonl.gz"]  # no temporary file left
    assert all(mode(directory / name) == 0o600 for name in names)


async def test_ids_that_collide_without_case_or_are_too_long_get_distinct_archives(
    backend_url: str, tmp_path: Path
) -> None:
    """On a file system that ignores case two names that differ only in case are one file;
    names are limited to 255 bytes. Every archive name must stay distinct lowercased, fit,
    and import back as its session."""
    directory = tmp_path / "a"
    async with SessionStore(backend_url) as store:
        originals = await seed(store, *COLLIDING)
        report = await store.prune(keep_last=0, archive=directory)
        assert set(report.deleted) == set(COLLIDING)
        paths = {sid: Path(report.archived[sid]) for sid in COLLIDING}
        assert len({p.name.lower() for p in paths.values()}) == len(COLLIDING)
        assert all(len(p.name.encode()) <= 255 for p in paths.values())
        assert {p.name for p in directory.iterdir()} == {p.name for p in paths.values()}
        for sid, path in paths.items():
            assert path == archive_path(directory, sid)
            assert unpacked(path) == originals[sid]
            with gzip.open(path, "rt", encoding="utf-8") as lines:
                imported = await import_lines(store, lines)
            assert imported.session_id == sid
            assert await export_text(store, sid) == originals[sid]


async def test_an_archive_under_the_earlier_name_is_reused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    directory = tmp_path / "a"
    directory.mkdir()
    async with SessionStore(url) as store:
        originals = await seed(store, "Old-Name")
        old = legacy_archive_path(directory, "Old-Name")
        assert old != archive_path(directory, "Old-Name")
        with gzip.open(old, "wt", encoding="utf-8", newline="") as f:
            f.write(originals["Old-Name"])
        report = await store.prune(keep_last=0, archive=directory)
    assert report.archived == {"Old-Name": str(old)}
    assert [p.name for p in directory.iterdir()] == [old.name]
    assert mode(old) == 0o600  # made private when it was reused


async def test_a_file_holding_another_session_is_never_overwritten(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    directory = tmp_path / "a"
    directory.mkdir()
    async with SessionStore(url) as store:
        originals = await seed(store, "victim", "other")
        target = archive_path(directory, "victim")
        with gzip.open(target, "wt", encoding="utf-8", newline="") as f:
            f.write(originals["other"])
        with pytest.raises(StoreError, match="holds session 'other'"):
            await store.prune(keep_last=0, tag=None, archive=directory)
        assert unpacked(target) == originals["other"]
        assert "victim" in {s.id for s in await store.list()}


async def test_planted_symlinks_are_replaced_never_followed(
    backend_url: str, tmp_path: Path
) -> None:
    directory = tmp_path / "a"
    directory.mkdir(mode=0o700)
    victims = {name: tmp_path / f"{name}.txt" for name in ("tmp", "final")}
    for victim in victims.values():
        victim.write_text("precious")
    path = archive_path(directory, "s1")
    os.symlink(victims["tmp"], path.with_name(path.name + ".tmp"))
    os.symlink(victims["final"], path)
    async with SessionStore(backend_url) as store:
        originals = await seed(store, "s1")
        report = await store.prune(keep_last=0, archive=directory)
    assert report.deleted == ("s1",)
    assert all(v.read_text() == "precious" for v in victims.values())
    assert not path.is_symlink() and unpacked(path) == originals["s1"]
    assert mode(path) == 0o600 and [p.name for p in directory.iterdir()] == [path.name]


def test_planted_fifos_never_block(tmp_path: Path) -> None:
    """A FIFO at the archive's name and at its temporary name: prune finishes (bounded by a
    join, far above its run time) and replaces both."""
    url = f"sqlite:///{tmp_path}/s.db"
    directory = tmp_path / "a"
    directory.mkdir(mode=0o700)
    path = archive_path(directory, "s1")
    temporary = path.with_name(path.name + ".tmp")
    os.mkfifo(path)
    os.mkfifo(temporary)

    async def run() -> tuple[str, ...]:
        async with SessionStore(url) as store:
            await seed(store, "s1")
            return (await store.prune(keep_last=0, archive=directory)).deleted

    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(asyncio.run(run())), daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():  # unblock it (open the FIFOs' other ends) before failing
        for fifo in (path, temporary):
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        worker.join(10)
        pytest.fail("prune blocked on a FIFO in the archive directory")
    assert outcome == [("s1",)]
    assert stat.S_ISREG(os.lstat(path).st_mode) and not temporary.exists()


@pytest.mark.parametrize("where", ["final", "tmp"])
async def test_a_planted_directory_is_a_clean_error(tmp_path: Path, where: str) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    directory = tmp_path / "a"
    path = archive_path(directory, "s1")
    (path if where == "final" else path.with_name(path.name + ".tmp")).mkdir(parents=True)
    async with SessionStore(url) as store:
        await seed(store, "s1")
        with pytest.raises(StoreError, match="is a directory"):
            await store.prune(keep_last=0, archive=directory)
        assert [s.id for s in await store.list()] == ["s1"]  # nothing deleted
