"""The same lifecycle as test_lifecycle.py, from the official TypeScript SDK.

``tests/acp_ts/lifecycle.mjs`` drives ``todo-sessions acp`` with ``@agentclientprotocol/sdk``
(its ``/unstable`` entrypoint, for ``session/fork``), whose client validates every message it
receives against the schema; it prints a report that is checked here against the store, so
both SDKs agree on the wire. ``.ci/run`` installs the SDK (2.4.0, pinned) from the npm registry
(``npm install --prefix tests/acp_ts``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from test_lifecycle import seed

from todo_sessions import SessionStore
from todo_sessions.acp.agent import LIST_PAGE_SIZE

CLIENT = Path(__file__).parents[1] / "acp_ts"
SDK = CLIENT / "node_modules" / "@agentclientprotocol" / "sdk"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("node") is None or not SDK.exists(),
        reason="needs node and the TypeScript SDK: npm install --prefix tests/acp_ts "
        "(.ci/run does)",
    ),
]


async def test_the_typescript_sdk_drives_the_whole_lifecycle(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/ts.db"
    project, other = str(tmp_path / "project"), str(tmp_path / "other")
    async with SessionStore(url) as store:
        for n in range(LIST_PAGE_SIZE + 3):
            await seed(store, f"p{n:03d}", project, text=f"task {n}\nmore")
        await seed(store, "o0", other, text="elsewhere", title="over there")

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    node = await asyncio.create_subprocess_exec(
        "node", str(CLIENT / "lifecycle.mjs"), sys.executable, url, project, other,
        stdout=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(node.communicate(), 120)
    assert node.returncode == 0, out.decode(errors="replace")
    report = json.loads(out.decode().strip().splitlines()[-1])

    assert report["agentExit"] == 0
    assert report["loadSession"] is True
    assert report["sessionCapabilities"] == ["close", "delete", "fork", "list", "resume"]
    sid = report["sessionId"]
    assert report["stopReasons"] == ["end_turn", "end_turn"]
    kinds = report["promptKinds"]
    assert kinds.count("plan") == 0 and kinds.count("plan_update") > 0  # never both
    assert kinds[-1] == "usage_update"

    async with SessionStore(url) as store:
        expected = await store.list(limit=1000)
        fork_gone = [s.id for s in expected]
    total = LIST_PAGE_SIZE + 5
    assert report["pageSizes"] == [LIST_PAGE_SIZE, total - LIST_PAGE_SIZE]
    listed = report["listed"]
    assert listed[0]["sessionId"] == sid and listed[0]["title"] == "write the tests"
    by_id = {s["sessionId"]: s for s in listed}
    assert by_id["p007"]["title"] == "task 7" and by_id["o0"]["title"] == "over there"
    assert by_id["p007"]["meta"] == {"tags": [], "eventCount": 7, "openTodos": False}
    assert by_id["p007"]["cwd"] == project and by_id["p007"]["updatedAt"].endswith("Z")
    assert report["others"] == ["o0"]
    assert report["badCursor"] == -32602
    assert report["resumeKinds"] == ["session_info_update"]
    assert report["forkParent"] == sid and report["forkId"] != sid
    assert report["loadDeleted"] == -32002 and report["resumeUnknown"] == -32002
    assert report["after"] == fork_gone and report["forkId"] not in fork_gone
    assert sid in fork_gone and len(fork_gone) == total
