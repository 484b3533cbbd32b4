"""Kill -9 a process in the middle of a turn; reopening through the service repairs the session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from factories import call_ids

from todo_sessions import SessionService, SessionStore
from todo_sessions.core.structure import check_structure

CHILD = Path(__file__).resolve().parent / "crash_child.py"

pytestmark = pytest.mark.slow


def run_until_killed(url: str, session_id: str, scenario: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), url, session_id, scenario],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != f"READY {scenario}":
            proc.kill()
            raise AssertionError(f"child said {line!r}; stderr:\n{proc.communicate()[1]}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


async def test_killed_while_a_tool_runs(shared_db_url: str) -> None:
    run_until_killed(shared_db_url, "crash-tool", "in-tool")
    async with SessionService(SessionStore(shared_db_url), strict=True) as service:
        stored_before = await service.store.read_from("crash-tool")
        assert stored_before[-1].type == "tool/call"  # flushed before the tool body ran
        session = await service.resume("crash-tool")
        assert list(session.events) == []  # the live session holds no stored events
        events = await service.store.read_from("crash-tool")
        check_structure(events)
        closers = events[len(stored_before) :]
        assert [e.type for e in closers] == ["tool/result", "tool/result", "step/end", "turn/end"]
        unknown, not_started = closers[0], closers[1]
        assert unknown.data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
        assert unknown.source_event_seqs == (stored_before[-1].seq,)
        assert "first verify external state or ask the user" in unknown.data_json
        assert not_started.data["error"]["code"] == "TOOL_NOT_STARTED"
        assert closers[-1].data["reason"] == {"kind": "interrupted"}
        calls, results = call_ids(session.derive_messages())
        assert calls == results and len(calls) == 3  # todo_write, deploy, notify
        assert [t.content for t in session.todos or []] == ["deploy", "verify"]
        assert session.next_seq == len(events)  # repaired durably, and the live state is past it


async def test_killed_mid_stream(shared_db_url: str) -> None:
    run_until_killed(shared_db_url, "crash-stream", "mid-stream")
    async with SessionService(SessionStore(shared_db_url), strict=True) as service:
        stored_before = await service.store.read_from("crash-stream")
        assert stored_before[-1].type == "step/start"  # flushed before the model call
        assert not any(e.type == "assistant/chunk" and e.data["step"] == 2 for e in stored_before)
        session = await service.resume("crash-stream")
        events = await service.store.read_from("crash-stream")
        check_structure(events)
        assert [e.type for e in events[len(stored_before) :]] == ["step/end", "turn/end"]
        calls, results = call_ids(session.derive_messages())
        assert calls == results == [calls[0]]
        assert session.todos is not None and session.todos[0].status == "in_progress"
        again = await service.store.load("crash-stream")
        assert again.closers == ()
