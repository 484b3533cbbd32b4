"""Malformed stdin lines get their JSON-RPC error and the agent keeps running.

`check_line` in process for every case, then the real ``todo-sessions acp`` subprocess over
stdio: every bad line answered, then a normal ``initialize`` still works.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from todo_sessions.acp.jsonrpc import check_line

PARSE, INVALID = -32700, -32600

CASES: list[tuple[bytes, int, Any]] = [
    (b"this is not json", PARSE, None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"', PARSE, None),  # cut short
    (b"\xff\xfe{}", PARSE, None),  # not UTF-8
    (b"42", INVALID, None),
    (b'"x"', INVALID, None),
    (b"null", INVALID, None),
    (b"true", INVALID, None),
    (b"[]", INVALID, None),
    (b'[{"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {}}]', INVALID, None),
    (b"{}", INVALID, None),
    (b'{"jsonrpc": "2.0", "id": 7}', INVALID, 7),  # a request without method
    (b'{"jsonrpc": "2.0", "id": "a", "method": 3}', INVALID, "a"),
    (b'{"jsonrpc": "1.0", "id": 8, "method": "initialize"}', INVALID, 8),
    (b'{"jsonrpc": "2.0", "id": [1], "method": "initialize"}', INVALID, None),
    (b'{"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": 3}', INVALID, 9),
]


@pytest.mark.parametrize(("line", "code", "request_id"), CASES)
def test_each_malformed_line_gets_its_error(line: bytes, code: int, request_id: Any) -> None:
    message, error = check_line(line)
    assert message is None
    assert error is not None
    assert error["jsonrpc"] == "2.0" and error["id"] == request_id
    assert error["error"]["code"] == code
    assert error["error"]["message"] == ("Parse error" if code == PARSE else "Invalid Request")


def test_well_formed_messages_pass_and_blank_lines_are_skipped() -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    assert check_line(json.dumps(request).encode()) == (request, None)
    note = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}
    assert check_line(json.dumps(note).encode() + b"\r\n") == (note, None)
    response = {"jsonrpc": "2.0", "id": 0, "result": {}}
    assert check_line(json.dumps(response).encode()) == (response, None)
    assert check_line(b"   \n") == (None, None)
    # A response the SDK could not use is dropped (unhashable id) or made well-formed.
    assert check_line(b'{"id": [0], "result": 1}') == (None, None)
    fixed, _ = check_line(b'{"id": 0, "error": "boom"}')
    assert fixed is not None and fixed["error"]["code"] == -32603


async def _read_json(stream: asyncio.StreamReader) -> dict[str, Any]:
    line = await asyncio.wait_for(stream.readline(), 30)
    assert line, "the agent exited"
    value = json.loads(line)
    assert isinstance(value, dict)
    return value


@pytest.mark.slow
async def test_the_agent_answers_every_bad_line_and_keeps_running(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "TODO_SESSIONS_URL": f"sqlite:///{tmp_path}/acp.db",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "todo_sessions",
        "acp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for line, code, request_id in CASES:
            proc.stdin.write(line + b"\n")
            await proc.stdin.drain()
            answer = await _read_json(proc.stdout)
            assert answer["id"] == request_id, line
            assert answer["error"]["code"] == code, line
        init = {
            "jsonrpc": "2.0",
            "id": 100,
            "method": "initialize",
            "params": {"protocolVersion": 1},
        }
        proc.stdin.write(json.dumps(init).encode() + b"\n")
        await proc.stdin.drain()
        answer = await _read_json(proc.stdout)
        assert answer["id"] == 100 and answer["result"]["agentCapabilities"]["loadSession"]
        assert proc.returncode is None
    finally:
        proc.stdin.close()
        assert await asyncio.wait_for(proc.wait(), 30) == 0  # end of input: a clean exit
