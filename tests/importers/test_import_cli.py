"""``todo-sessions import --from AGENT [PATH...]`` and ``export --format AGENT`` (issue #37):
re-import idempotence, a malformed line and a cut-short last line (one ``warning:`` line each,
exit status 0), a newer version's entry kinds (kept whole, ignorable, reported once), a PATH
in no agent's format (one ``error:`` line, exit status 1), the agents' default locations
(``HOME``, ``CODEX_HOME``, ``CLAUDE_CONFIG_DIR``), a Claude Code task notification (not a
prompt), and ``--follow`` against files an agent is still writing (a real subprocess, stopped
with SIGINT or SIGTERM)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from todo_sessions import SessionStore
from todo_sessions.errors import SessionNotFoundError
from todo_sessions.integrations._claude_mapping import TASK_NOTIFICATION

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"
CODEX_FILE = next((FIXTURES / "codex" / "sessions").rglob("rollout-*0199d0a4*.jsonl"))
CODEX_CHILD_FILE = next((FIXTURES / "codex" / "sessions").rglob("rollout-*0199d0a5*.jsonl"))
CLAUDE_DIR = FIXTURES / "claude-code" / "projects"
CLAUDE_FILE = next(CLAUDE_DIR.glob("*/*.jsonl"))
CODEX = "codex-0199d0a4-7b1e-7c30-9f2a-3c4d5e6f7a8b"
CODEX_CHILD = "codex-0199d0a5-1111-7222-8333-444455556666"
REPO = Path(__file__).resolve().parents[2]


def cli(db: Path, *args: str, code: int = 0, env: dict[str, str] | None = None) -> Result:
    from todo_sessions.cli import main

    result = CliRunner(env=env).invoke(main, ["--db", str(db), *args])
    assert result.exit_code == code, (args, result.output, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    return result


def export(db: Path, agent: str, session_id: str) -> bytes:
    from todo_sessions.cli import main

    result = CliRunner().invoke(main, ["--db", str(db), "export", "--format", agent, session_id])
    assert result.exit_code == 0, result.stderr
    return result.stdout_bytes


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


@pytest.fixture
def rollout(tmp_path: Path) -> Path:
    folder = tmp_path / "sessions"
    folder.mkdir()
    copy = folder / CODEX_FILE.name
    shutil.copy(CODEX_FILE, copy)
    return copy


def test_import_again_adds_nothing_and_exports_the_same_bytes(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    first = cli(db, "import", "--from", "codex", str(FIXTURES / "codex"))
    assert f"new session {CODEX}: {len(lines(CODEX_FILE))} lines" in first.stdout
    assert first.stdout.splitlines()[-1] == (
        f"imported {len(lines(CODEX_FILE)) + len(lines(CODEX_CHILD_FILE))} codex lines: "
        "2 new sessions, 0 grown"
    )
    assert first.stderr == ""
    listed = cli(db, "list", "--json").stdout
    again = cli(db, "import", "--from", "codex", str(FIXTURES / "codex"))
    assert again.stdout == "imported 0 codex lines: 0 new sessions, 0 grown\n"
    assert json.loads(cli(db, "list", "--json").stdout) == json.loads(listed)
    assert export(db, "codex", CODEX) == CODEX_FILE.read_bytes()
    assert export(db, "codex", CODEX_CHILD) == CODEX_CHILD_FILE.read_bytes()


def test_a_malformed_line_is_one_warning_and_skipped(tmp_path: Path, rollout: Path) -> None:
    whole = lines(rollout)
    rollout.write_bytes(b"".join([*whole[:4], b'{"timestamp": "2025-10-11T09:00:0\n', *whole[4:]]))
    db = tmp_path / "s.db"
    result = cli(db, "import", "--from", "codex", str(rollout))
    [warning] = result.stderr.splitlines()
    assert warning.startswith(f"warning: {rollout}:5: skipped: not JSON")
    assert export(db, "codex", CODEX) == b"".join(whole)


def test_a_cut_short_last_line_waits_for_its_newline(tmp_path: Path, rollout: Path) -> None:
    whole = lines(rollout)
    cut = len(whole[-1]) // 2
    rollout.write_bytes(b"".join(whole[:-1]) + whole[-1][:cut])
    db = tmp_path / "s.db"
    result = cli(db, "import", "--from", "codex", str(rollout))
    [warning] = result.stderr.splitlines()
    assert warning == (
        f"warning: {rollout}:{len(whole)}: skipped for now: the last line has no newline yet "
        "(still being written, or cut short)"
    )
    assert export(db, "codex", CODEX) == b"".join(whole[:-1])
    with rollout.open("ab") as handle:  # the agent finishes the line
        handle.write(whole[-1][cut:])
    grown = cli(db, "import", "--from", "codex", str(rollout))
    assert grown.stderr == ""
    assert f"appended to {CODEX}: 1 lines" in grown.stdout
    assert export(db, "codex", CODEX) == b"".join(whole)


@pytest.mark.parametrize("agent", ["codex", "claude-code"])
def test_a_newer_versions_entry_kinds_are_kept_and_reported_once(
    tmp_path: Path, agent: str
) -> None:
    source = CODEX_FILE if agent == "codex" else CLAUDE_FILE
    folder = tmp_path / "agent" / source.parent.name
    folder.mkdir(parents=True)
    path = folder / source.name
    future = {"type": "hologram", "payload": {"x": 1}, "timestamp": "2025-10-11T09:09:00Z"}
    new = [json.dumps(dict(future, n=n), separators=(",", ":")).encode() + b"\n" for n in (1, 2)]
    whole = lines(source)
    path.write_bytes(b"".join([*whole[:3], new[0], *whole[3:], new[1]]))
    db = tmp_path / "s.db"
    result = cli(db, "import", "--from", agent, str(path))
    [warning] = result.stderr.splitlines()
    assert warning == (
        f"warning: {path}:4: entry kind 'hologram' unknown to this version "
        "(kept whole, imported as ignorable)"
    )
    listed = json.loads(cli(db, "list", "--agent", agent, "--json").stdout)
    sid = listed[0]["id"]
    assert export(db, agent, sid) == path.read_bytes()

    async def kept() -> list[bool]:
        async with SessionStore(f"sqlite:///{db}") as store:
            return [
                e.ignorable
                for e in await store.read_from(sid)
                if e.type.endswith("/entry") and e.payload.get("type") == "hologram"
            ]

    assert asyncio.run(kept()) == [True, True]


@pytest.mark.parametrize("agent", ["codex", "claude-code"])
def test_a_path_in_no_agent_format_is_one_error(tmp_path: Path, agent: str) -> None:
    other = CLAUDE_FILE if agent == "codex" else CODEX_FILE
    path = tmp_path / ("rollout-x.jsonl" if agent == "codex" else "notes.jsonl")
    shutil.copy(other, path)
    db = tmp_path / "s.db"
    result = cli(db, "import", "--from", agent, str(path), code=1)
    assert result.stderr == f"error: {path}: no line in the {agent} format\n"
    assert cli(db, "list", "--json").stdout.strip() == "[]"
    missing = cli(db, "import", "--from", agent, str(tmp_path / "nope"), code=1)
    assert missing.stderr == f"error: {tmp_path / 'nope'}: no such file or directory\n"
    unknown = cli(db, "import", "--from", "vim", str(path), code=2)
    assert unknown.stderr.startswith("error: --from/--format: unknown agent 'vim'")
    stray = cli(db, "import", "--follow", str(path), code=2)
    assert stray.stderr.startswith("error: --follow goes with --from AGENT")


def test_the_agents_default_locations(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "codex", home / ".codex")
    shutil.copytree(FIXTURES / "claude-code", home / ".claude")
    db = tmp_path / "s.db"
    env = {"HOME": str(home), "CODEX_HOME": None, "CLAUDE_CONFIG_DIR": None}
    cli(db, "import", "--from", "codex", env=env)  # type: ignore[arg-type]
    cli(db, "import", "--from", "claude-code", env=env)  # type: ignore[arg-type]
    assert len(json.loads(cli(db, "list", "--json").stdout)) == 4
    moved = tmp_path / "elsewhere"
    shutil.copytree(FIXTURES / "codex", moved)
    db2 = tmp_path / "t.db"
    cli(db2, "import", "--from", "codex", env={"CODEX_HOME": str(moved)})
    assert len(json.loads(cli(db2, "list", "--agent", "codex", "--json").stdout)) == 2
    cli(db2, "import", "--from", "claude-code", env={"CLAUDE_CONFIG_DIR": str(home / ".claude")})
    assert len(json.loads(cli(db2, "list", "--agent", "claude-code", "--json").stdout)) == 2
    empty = cli(db2, "import", "--from", "codex", env={"CODEX_HOME": str(tmp_path / "x")}, code=1)
    assert (
        empty.stderr == f"error: no codex sessions: {tmp_path / 'x' / 'sessions'} does not exist\n"
    )


def _notification_lines(template: dict[str, object]) -> list[dict[str, object]]:
    text = (
        "<task-notification>\n<task-id>b7</task-id>\n<status>completed</status>\n"
        "<summary>Agent finished</summary>\n</task-notification>"
    )
    by_origin = dict(template, uuid="n-1", message={"role": "user", "content": "Done: 3 files"})
    by_origin["origin"] = {"kind": "task-notification", "producer": "session-task"}
    by_text = dict(template, uuid="n-2", message={"role": "user", "content": text})
    return [by_origin, by_text]


def test_a_claude_task_notification_is_not_a_prompt(tmp_path: Path) -> None:
    source = [json.loads(line) for line in lines(CLAUDE_FILE)]
    prompt = next(e for e in source if e["type"] == "user" and "toolUseResult" not in e)
    added = _notification_lines(prompt)
    folder = tmp_path / "projects" / CLAUDE_FILE.parent.name
    folder.mkdir(parents=True)
    path = folder / CLAUDE_FILE.name
    path.write_bytes(
        CLAUDE_FILE.read_bytes()
        + b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in added)
    )
    db = tmp_path / "s.db"
    cli(db, "import", "--from", "claude-code", str(path))
    sid = json.loads(cli(db, "list", "--agent", "claude-code", "--json").stdout)[0]["id"]

    async def tail() -> tuple[list[str], list[str]]:
        async with SessionStore(f"sqlite:///{db}") as store:
            events = await store.read_from(sid)
        start = next(
            e.seq for e in events if e.type == "claude/entry" and e.payload.get("uuid") == "n-1"
        )
        after = [e for e in events if e.seq >= start]
        sources = [e.payload["source"]["kind"] for e in after if e.type == "user/message"]
        return [e.type for e in after if e.type.startswith("turn/")], sources

    turns, sources = asyncio.run(tail())
    assert turns == []  # no turn opened (or closed) by a notification
    assert sources == [TASK_NOTIFICATION, TASK_NOTIFICATION]
    assert export(db, "claude-code", sid) == path.read_bytes()


# -- --follow, a real subprocess ---------------------------------------------------------------


def wait_until(check: Callable[[], bool], what: str) -> None:
    """Wait for ``check`` (the follower imports in the background); fail after a minute."""
    deadline = time.monotonic() + 60
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"--follow never got there: {what}")
        time.sleep(0.05)


def entries(db: Path, session_id: str) -> int:
    async def count() -> int:
        async with SessionStore(f"sqlite:///{db}") as store:
            try:
                return await store.count(session_id, type="codex/entry")
            except SessionNotFoundError:
                return -1

    return asyncio.run(count())


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_follow_imports_lines_as_the_agent_writes_them(tmp_path: Path, stop: int) -> None:
    folder = tmp_path / "sessions" / "2025" / "10" / "11"
    folder.mkdir(parents=True)
    path, child = folder / CODEX_FILE.name, folder / CODEX_CHILD_FILE.name
    whole = lines(CODEX_FILE)
    path.write_bytes(b"".join(whole[:3]))
    db = tmp_path / "s.db"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "todo_sessions", "--db", str(db), "import", "--from"]
    command += ["codex", str(tmp_path / "sessions"), "--follow", "--interval", "0.05"]
    follower = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_until(lambda: entries(db, CODEX) == 3, "the first 3 lines")
        with path.open("ab") as handle:  # the agent writes on, the last line only half
            handle.write(b"".join(whole[3:10]) + whole[10][:7])
        wait_until(lambda: entries(db, CODEX) == 10, "10 lines")
        with path.open("ab") as handle:
            handle.write(whole[10][7:] + b"".join(whole[11:]))
        shutil.copy(CODEX_CHILD_FILE, child)  # a sub-agent starts: a new file
        wait_until(lambda: entries(db, CODEX) == len(whole), "every line")
        wait_until(lambda: entries(db, CODEX_CHILD) == len(lines(child)), "the new file")
    finally:
        follower.send_signal(stop)
        out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert "Traceback" not in err and "warning" not in err
    assert out.splitlines()[-1] == (
        f"imported {len(whole) + len(lines(child))} codex lines: 2 new sessions, 0 grown"
    )
    assert export(db, "codex", CODEX) == CODEX_FILE.read_bytes()
    again = cli(db, "import", "--from", "codex", str(tmp_path / "sessions"))
    assert again.stdout == "imported 0 codex lines: 0 new sessions, 0 grown\n"


async def test_a_follower_pass_reads_only_the_files_that_changed(tmp_path: Path) -> None:
    from todo_sessions.importers import CodexImporter
    from todo_sessions.importers.follow import Follower

    shutil.copytree(FIXTURES / "codex", tmp_path / "codex")
    [path] = (tmp_path / "codex").rglob(CODEX_FILE.name)
    whole = lines(path)
    path.write_bytes(b"".join(whole[:-1]))
    async with SessionStore("sqlite://") as store:
        follower = Follower(store, CodexImporter(), [tmp_path / "codex"])
        first = await follower.poll()
        assert sorted(r.status for r in first) == ["created", "created"]
        assert await follower.poll() == []  # nothing changed: nothing read
        with path.open("ab") as handle:
            handle.write(whole[-1])
        [grown] = await follower.poll()
        assert (grown.session_id, grown.status, grown.lines) == (CODEX, "appended", 1)
        assert await store.count(CODEX, type="codex/entry") == len(whole)
