"""Every value a command line option or argument hands the library is checked at the boundary
(issue 39, item 7): an integer past a signed 64-bit one, a NUL, a lone surrogate (a byte of
``argv`` that is not UTF-8) or a float that is not finite is a one-line usage error naming
the option, exit status 2, before anything is opened. They printed "unexpected OverflowError"
(``--limit``, ``--before``, ``--max-line-bytes``) or the driver's encoding error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from factories import header, turn

from todo_sessions import SyncSessionStore
from todo_sessions.cli import main

BIG = str(2**63)
MAX = str(2**63 - 1)
NUL = "a\x00b"
BAD_UTF8 = "a\udcffb"  # what the byte 0xff of argv becomes

CASES: list[tuple[list[str], str]] = [
    (["list", "--limit", BIG], "--limit"),
    (["list", "--before", NUL], "--before"),
    (["list", "--cwd", NUL], "--cwd"),
    (["list", "--cwd", BAD_UTF8], "--cwd"),
    (["list", "--tag", BAD_UTF8], "--tag"),
    (["list", "--parent", NUL], "--parent"),
    (["list", "--text", BAD_UTF8], "--text"),
    (["search", "x", "--limit", BIG], "--limit"),
    (["search", "x", "--limit", "1001"], "--limit"),
    (["search", "x", "--before", BIG], "--before"),
    (["search", NUL], "QUERY"),
    (["search", "x", "--cwd", BAD_UTF8], "--cwd"),
    (["search", "x", "--tag", NUL], "--tag"),
    (["show", NUL], "SESSION_ID"),
    (["messages", "s1", "--at", BIG], "--at"),
    (["todos", "s1", "--at", BIG], "--at"),
    (["todos", BAD_UTF8], "SESSION_ID"),
    (["fork", "s1", "--at", BIG], "--at"),
    (["fork", "s1", "--as", NUL], "--as"),
    (["retitle", "s1", BAD_UTF8], "TITLE"),
    (["tag", "s1", "ok", NUL], "TAGS"),
    (["delete", NUL, "--yes"], "SESSION_ID"),
    (["export", NUL], "SESSION_ID"),
    (["export", "s1", "-o", "out\x00.jsonl"], "-o"),
    (["import", "in\x00.jsonl"], "FILE | [PATH...]"),
    (["import", "-", "--as", BAD_UTF8], "--as"),
    (["import", "-", "--max-line-bytes", MAX], "--max-line-bytes"),
    (["import", "-", "--max-bytes", BIG], "--max-bytes"),
    (["import", "-", "--max-events", BIG], "--max-events"),
    (["recover", "r\x00.jsonl"], "an argument"),
    (["prune", "--keep-last", BIG], "--keep-last"),
    (["prune", "--keep-checkpoints", BIG], "--keep-checkpoints"),
    (["prune", "--tag", NUL], "--tag"),
    (["prune", "--older-than", BAD_UTF8], "--older-than"),
    (["prune", "--archive", "dir\x00", "--older-than", "1d"], "--archive"),
    (["reindex", "--search-config", NUL], "--search-config"),
    (["verify", NUL], "SESSION_ID"),
    (["verify", "s1", "--key-env", NUL], "--key-env"),
    (["verify", "s1", "--key-env", BAD_UTF8], "--key-env"),
    (["serve", "--message-limit", BIG], "--message-limit"),
    (["serve", "--header-timeout", "inf"], "--header-timeout"),
    (["serve", "--header-timeout", "nan"], "--header-timeout"),
    (["serve", "--host", NUL], "--host"),
    (["serve", "--allow-host", BAD_UTF8], "--allow-host"),
    (["demo", "--id", NUL], "--id"),
    (["acp", "--model", NUL], "--model"),
    (["acp", "--base-url", BAD_UTF8], "--base-url"),
    (["acp", "--api-key-env", NUL], "--api-key-env"),
    (["acp", "--system", BAD_UTF8], "--system"),
]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('bounds')}/cli.db"
    with SyncSessionStore(url) as store:
        store.create(header("s1"))
        store.append("s1", turn(0, text="hello"))
    return url


def _refused(args: list[str], option: str, db: str) -> None:
    with SyncSessionStore(db) as before:
        sessions = [s.id for s in before.list()]
    result = CliRunner().invoke(main, ["--db", db, *args], input="")
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert line.startswith(f"error: {option} must ") and "\n" not in line, line
    assert "unexpected" not in line
    with SyncSessionStore(db) as after:
        assert [s.id for s in after.list()] == sessions  # nothing was written


@pytest.mark.parametrize(("args", "option"), CASES, ids=[" ".join(c[0][:2]) for c in CASES])
def test_an_out_of_range_or_unencodable_value_is_a_usage_error(
    db: str, args: list[str], option: str
) -> None:
    _refused(args, option, db)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--db", NUL, "list"], "--db"),
        (["--schema", BAD_UTF8, "list"], "--schema"),
        (["--table-prefix", NUL, "list"], "--table-prefix"),
    ],
)
def test_the_groups_options_are_checked_alike(args: list[str], option: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith(f"error: {option} must "), result.output


@pytest.mark.parametrize("timeout", ["nan", "inf", "1e400", "-5", "0", "x"])
def test_a_connect_timeout_in_the_url_is_checked(timeout: str) -> None:
    url = f"postgresql://nobody@127.0.0.1:1/db?connect_timeout={timeout}"
    result = CliRunner().invoke(main, ["--db", url, "list"])
    assert result.exit_code == 2, result.output
    assert "connect_timeout in the database URL must be seconds above 0" in result.output


def test_the_largest_values_still_run(db: str) -> None:
    for args in (
        ["list", "--limit", MAX],
        ["search", "hello", "--before", MAX, "--limit", "1000"],
        ["messages", "s1", "--at", MAX],
        ["prune", "--keep-last", MAX, "--archive", "unused", "--dry-run"],
    ):
        result = CliRunner().invoke(main, ["--db", db, *args])
        assert result.exit_code == 0, (args, result.output)


def test_a_byte_that_is_not_utf8_in_argv(db: str, tmp_path: Path) -> None:
    """From a real shell: the bytes of argv, decoded by Python with surrogateescape."""
    command = [sys.executable, "-m", "todo_sessions", "--db", db, "list", "--cwd", b"/\xff"]
    done = subprocess.run(command, capture_output=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode("utf-8", "replace").startswith("error: --cwd must be UTF-8 text")
