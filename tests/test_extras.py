"""PostgreSQL and the ACP bridge are optional extras: without them, a clear one-line error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_sqlite_needs_neither_extra(tmp_path: Path) -> None:
    result = run(
        "import sys, asyncio\n"
        "sys.modules['asyncpg'] = None; sys.modules['acp'] = None  # not installed\n"
        "from todo_sessions import SessionStore, SessionHeader, SessionEvent\n"
        "async def main():\n"
        f"    async with SessionStore({str(tmp_path / 'x.db')!r}) as store:\n"
        "        await store.create(SessionHeader(id='s', created_at=1))\n"
        "        await store.append('s', [SessionEvent('request/context', 0, 1, {})])\n"
        "        print(len(await store.read_from('s')))\n"
        "asyncio.run(main())\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


def test_postgresql_without_asyncpg_says_which_extra() -> None:
    result = run(
        "import sys, asyncio\n"
        "sys.modules['asyncpg'] = None\n"
        "from todo_sessions import SessionStore, StoreError\n"
        "async def main():\n"
        "    try:\n"
        "        await SessionStore('postgresql://u@127.0.0.1:1/db').open()\n"
        "    except StoreError as exc:\n"
        "        print(exc)\n"
        "asyncio.run(main())\n"
    )
    assert result.returncode == 0, result.stderr
    assert "pip install 'todo-sessions[postgres]'" in result.stdout


def test_acp_without_the_sdk_is_one_line(tmp_path: Path) -> None:
    result = run(
        "import sys\n"
        "sys.modules['acp'] = None\n"
        f"sys.argv = ['todo-sessions', '--db', {str(tmp_path / 'a.db')!r}, 'acp']\n"
        "from todo_sessions._console import main\n"
        "main()\n"
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: the Agent Client Protocol bridge needs the agent-client-protocol package: "
        "pip install 'todo-sessions[acp]'"
    ]
