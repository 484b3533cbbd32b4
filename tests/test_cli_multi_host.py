"""``todo-sessions --db <multi-host URL>`` as a user types it: libpq's ``h1:p1,h2:p2`` list with
``target_session_attrs=read-write``, the standby named first, against a primary and a standby
of our own (`pg_cluster.Pair`, Debian's binaries, free ports). The command line reads ``--db``
with the store's own parser, so it accepts every URL the library connects to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pg_cluster
import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("cli_multi_host"),  # one pair of servers for the module
    pytest.mark.skipif(
        not pg_cluster.available(),
        reason="needs Debian's PostgreSQL 15 binaries (and a postgres user)",
    ),
]

SCRIPT = Path(sys.executable).parent / "todo-sessions"
PROGRAM = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "todo_sessions"]


@pytest.fixture(scope="module")
def pair() -> Iterator[pg_cluster.Pair]:
    with pg_cluster.template() as template:
        made = template.pair(synchronous=False)
        try:
            yield made
        finally:
            made.stop()


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TODO_SESSIONS_URL"}
    return subprocess.run(
        [*PROGRAM, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180
    )


def ok(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = run(*args, cwd=cwd)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


def test_every_command_takes_a_multi_host_url(pair: pg_cluster.Pair, tmp_path: Path) -> None:
    url = pair.multi_host_url(standby_first=True)  # the standby first: it must be passed over
    assert url.startswith(f"postgresql://postgres@127.0.0.1:{pair.standby.port},127.0.0.1:")
    assert url.endswith("/postgres?target_session_attrs=read-write")
    ok("--db", url, "migrate", cwd=tmp_path)
    ok("--db", url, "demo", "--id", "multi", cwd=tmp_path)

    listed = json.loads(ok("--db", url, "list", "--json", cwd=tmp_path).stdout)
    assert [s["id"] for s in listed] == ["multi"]
    shown = json.loads(ok("--db", url, "show", "multi", "--json", cwd=tmp_path).stdout)
    assert shown["header"]["id"] == "multi"
    assert len(shown["events"]) == listed[0]["events"] > 0
    assert "multi" in ok("--db", url, "show", "multi", cwd=tmp_path).stdout
    verified = ok("--db", url, "verify", "multi", cwd=tmp_path)
    assert "✓ multi" in verified.stdout
    everything = json.loads(ok("--db", url, "verify", "--json", cwd=tmp_path).stdout)
    assert everything == {"multi": []}

    # what was written went to the primary, and streamed to the standby
    on_primary = pg_cluster.psql(pair.primary, "SELECT count(*) FROM sessions")
    assert on_primary.strip() == "1"


def test_a_url_the_store_refuses_is_a_usage_error_with_its_reason(tmp_path: Path) -> None:
    done = run("--db", "postgresql://u:pw@h1:x,h2:5433/db", "list", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: --db 'postgresql://u:***@h1:x,h2:5433/db': ")
    assert "the port of host 'h1' in the database URL is not a number" in done.stderr
    assert "pw" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
