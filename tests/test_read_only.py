"""Reading a database this process may not write: reads work, writes are refused cleanly."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from factories import header, turn

from todo_sessions import SchemaError, SessionStore, StoreError, verify_all
from todo_sessions.store.migrate import downgrade


async def _seeded(path: Path) -> None:
    async with SessionStore(path) as store:
        await store.create(header("s"))
        await store.append("s", turn(0))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_a_read_only_store_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    await _seeded(path)
    before = _digest(path)
    async with SessionStore(path, read_only=True) as store:
        assert store.read_only
        assert [s.id for s in await store.list()] == ["s"]
        assert len(await store.read_from("s")) == 6
        assert await store.current_todos("s") is not None
        assert len(await store.derive_messages("s")) == 1
        assert (await verify_all(store)).ok
        with pytest.raises(StoreError, match="read-only"):
            await store.append("s", turn(6, 2))
        with pytest.raises(StoreError, match="read-only"):
            await store.delete("s")
    assert _digest(path) == before  # nothing was written


async def test_a_file_we_may_not_write_opens_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ro.db"
    await _seeded(path)
    real_access = os.access

    def access(target: object, mode: int, **kw: object) -> bool:
        if Path(str(target)) in (path, path.parent) and mode & os.W_OK:
            return False  # as if the file and its directory belonged to someone else
        return real_access(target, mode)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    async with SessionStore(path) as store:
        assert store.read_only
        assert len(await store.read_from("s")) == 6
    monkeypatch.setattr(os, "access", real_access)
    async with SessionStore(path) as store:
        assert not store.read_only


async def test_read_only_needs_an_existing_file(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such file"):
        async with SessionStore(tmp_path / "missing.db", read_only=True):
            pass
    assert not (tmp_path / "missing.db").exists()


async def test_a_read_only_store_never_migrates(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    await _seeded(path)
    await downgrade(f"sqlite:///{path}", revision="0002")
    with pytest.raises(SchemaError, match="read-only"):
        async with SessionStore(path, read_only=True):
            pass


_READER = """
import asyncio, sys
from todo_sessions import SessionStore, StoreError
async def main():
    async with SessionStore(sys.argv[1]) as store:
        print(store.read_only, len(await store.read_from("s")))
        try:
            await store.append("s", [])
        except StoreError as exc:
            print("refused:", exc)
asyncio.run(main())
"""


@pytest.mark.parametrize("directory_mode", [0o555, 0o755])
def test_a_file_0444_opens_read_only_without_dac_override(
    tmp_path: Path, directory_mode: int
) -> None:
    """As a user without CAP_DAC_OVERRIDE (root with it dropped, in a subprocess): a file
    0444, in a directory 0555 (no -shm can be made beside a WAL file) or 0755."""
    import asyncio
    import shutil
    import subprocess
    import sys

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop CAP_DAC_OVERRIDE")
    folder = tmp_path / "d"
    folder.mkdir()
    path = folder / "ro.db"
    asyncio.run(_seeded(path))
    before = _digest(path)
    path.chmod(0o444)
    folder.chmod(directory_mode)
    drop = "-dac_override,-dac_read_search"
    command = ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}", sys.executable]
    try:
        out = subprocess.run(
            [*command, "-c", _READER, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "True 6"
    assert lines[1].startswith("refused:") and "is open read-only" in lines[1]
    assert _digest(path) == before
