"""Import checks a file's chain value against its events, with the store's key (issue 39,
item 3), and ``verify --against`` reads what import reads: a gzipped archive, a header-only
file ("nothing compared", not ✓), a truncated gzip (a clean error)."""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path

import pytest
from click.testing import CliRunner
from factories import header, turn

from todo_sessions import SessionStore, import_lines
from todo_sessions.cli import main
from todo_sessions.errors import InvalidEventError


@pytest.fixture(params=["sqlite-file", "postgres"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite-file":
        return f"sqlite:///{tmp_path}/s.db"
    return str(request.getfixturevalue("fresh_pg_url"))


async def pruned(url: str, directory: Path, *, key: str | None = None) -> Path:
    """Session ``s1`` (one turn, "prompt one") archived by prune; its archive."""
    async with SessionStore(url, chain_key=key) as store:
        await store.create(header("s1"))
        await store.append("s1", turn(0, text="prompt one"))
        report = await store.prune(keep_last=0, archive=directory)
    return Path(report.archived["s1"])


def edited(path: Path, old: str, new: str) -> Path:
    """The archive with ``old`` replaced by ``new`` in its event lines (still valid JSON)."""
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        first, rest = f.readline(), f.read()
    assert old in rest
    with gzip.open(path, "wt", encoding="utf-8", newline="") as f:
        f.write(first + rest.replace(old, new))
    return path


def lines_of(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        return f.read().splitlines()


async def test_an_edited_archive_is_refused_by_import(backend_url: str, tmp_path: Path) -> None:
    path = edited(await pruned(backend_url, tmp_path / "a"), "prompt one", "prompt two")
    async with SessionStore(backend_url) as store:
        with pytest.raises(InvalidEventError, match="edited after the export") as info:
            await import_lines(store, lines_of(path))
        assert info.value.field == "chain"
        assert await store.list() == []  # nothing written


def test_the_command_line_refuses_an_edited_archive(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/s.db"
    path = asyncio.run(pruned(db, tmp_path / "a"))
    runner = CliRunner()
    before = path.read_bytes()
    edited(path, "prompt one", "prompt two")
    refused = runner.invoke(main, ["--db", db, "import", str(path)])
    assert refused.exit_code == 1 and "edited after the export" in refused.output
    assert runner.invoke(main, ["--db", db, "list", "--json"]).stdout.strip() == "[]"
    path.write_bytes(before)
    assert runner.invoke(main, ["--db", db, "import", str(path)]).exit_code == 0


async def test_a_keyed_archive_imports_with_its_key_only(backend_url: str, tmp_path: Path) -> None:
    path = await pruned(backend_url, tmp_path / "a", key="k1")
    for other in (None, "k2"):
        async with SessionStore(backend_url, chain_key=other) as store:
            with pytest.raises(InvalidEventError, match="TODO_SESSIONS_CHAIN_KEY"):
                await import_lines(store, lines_of(path))
            assert await store.list() == []
    async with SessionStore(backend_url, chain_key="k1") as store:
        assert (await import_lines(store, lines_of(path))).events == 6
        assert await store.chain_break("s1") is None


def test_verify_against_reads_a_gzipped_archive(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/s.db"
    path = asyncio.run(pruned(db, tmp_path / "a"))
    runner = CliRunner()
    assert runner.invoke(main, ["--db", db, "import", str(path)]).exit_code == 0
    same = runner.invoke(main, ["--db", db, "verify", "s1", "--against", str(path)])
    assert same.exit_code == 0 and "✓ s1" in same.output, same.output
    edited(path, "prompt one", "prompt two")
    caught = runner.invoke(main, ["--db", db, "verify", "s1", "--against", str(path)])
    assert caught.exit_code == 1 and "edited after the export" in caught.output


def test_verify_against_a_file_without_events_compares_nothing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/s.db"
    path = asyncio.run(pruned(db, tmp_path / "a"))
    runner = CliRunner()
    assert runner.invoke(main, ["--db", db, "import", str(path)]).exit_code == 0
    header_only = tmp_path / "header.jsonl"
    header_only.write_text(lines_of(path)[0] + "\n", encoding="utf-8")
    result = runner.invoke(main, ["--db", db, "verify", "s1", "--against", str(header_only)])
    assert "nothing compared" in result.output and "✓" not in result.output
    assert result.exit_code == 1


def test_verify_against_a_truncated_gzip_is_a_clean_error(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/s.db"
    path = asyncio.run(pruned(db, tmp_path / "a"))
    runner = CliRunner()
    assert runner.invoke(main, ["--db", db, "import", str(path)]).exit_code == 0
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(path.read_bytes()[:-12])
    result = runner.invoke(main, ["--db", db, "verify", "s1", "--against", str(cut)])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("error: --against: line ")
    assert "truncated or damaged" in result.output and "unexpected" not in result.output
