"""What a lone durable append writes, page by page: WAL frames per append, a count that the
machine's load does not move.

Run (from the repository root)::

    .venv/bin/python bench/append_pages.py

1. Through `SessionStore` (WAL, ``synchronous=FULL``, the search index on): 100 single-event
   appends of `peers_bench.workload`'s events to one session, the WAL's growth divided by the
   frame size (100 appends stay below SQLite's 1,000-frame autocheckpoint, and a tight loop
   leaves the index's catch-up to after it: the frames are the appends' own).
2. The same rows inserted by plain ``sqlite3`` into the store's own schema with the store's
   append statements (the event row, the session row's update, which sets the search index's
   mark only when it finds it NULL: revision 0013), then with one index or statement left out
   or changed at a time: what each costs in frames. Among them the mark as revisions 0011-0012
   wrote it (a ``search_pending`` row an append) and as every update setting it (``COALESCE``:
   SQLite rewrites a partial index's entry whenever an update assigns its column, even to its
   own value).
3. The limit of `peers_bench.py` (its minimal table and one index).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers_bench import LimitSide, StoreSide, workload

APPENDS = 100
FRAME = 4096 + 24


def wal_frames(path: Path) -> float:
    wal = Path(f"{path}-wal")
    return max(0, wal.stat().st_size - 32) / FRAME if wal.exists() else 0.0


async def through_the_store(tmp: Path) -> tuple[float, Path]:
    path = tmp / "store.db"
    side = await StoreSide.open(path)
    handle = await side.session()
    chunks = [workload(1, seq) for seq in range(1, APPENDS + 1)]
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL starts empty
    conn.close()
    for chunk in chunks:
        await side.append(handle, chunk)
    frames = wal_frames(path)
    await side.close()
    return frames / APPENDS, path


def replayed(source: Path, tmp: Path, leave_out: tuple[str, ...], mark: str = "when_null") -> float:
    """The store's append statements by plain ``sqlite3`` on a copy of its database (its
    session caught up by the index first, as after an idle pause), without the indexes named
    in ``leave_out``; the search index's mark ``mark``: "when_null" (the store's, revision
    0013), "always" (``COALESCE`` in every update), "pending_row" (revisions 0011-0012: a
    ``search_pending`` row an append), "none"."""
    path = tmp / f"replay-{'-'.join(leave_out)}-{mark}.db"
    path.write_bytes(source.read_bytes())
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("UPDATE sessions SET index_from = NULL")
    session_id, next_seq = conn.execute("SELECT id, next_seq FROM sessions").fetchone()
    for name in leave_out:
        conn.execute(f"DROP INDEX {name}")
    if mark == "pending_row":
        conn.execute(
            "CREATE TABLE search_pending (id INTEGER NOT NULL PRIMARY KEY, session_id "
            "VARCHAR(200) NOT NULL, first_seq BIGINT NOT NULL, end_seq BIGINT NOT NULL)"
        )
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = json.dumps({"turn": 1, "step": 1, "message": {"text": "x" * 300}})
    for i in range(APPENDS):
        seq = next_seq + i
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO session_events (session_id, seq, type, time, data, surface_op, "
            "source_event_seqs, ignorable, chain) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (session_id, seq, "assistant/message", seq, data, '"append"', None, False, b"x" * 32),
        )
        if mark == "pending_row":
            conn.execute(
                "INSERT INTO search_pending (session_id, first_seq, end_seq) VALUES (?, ?, ?)",
                (session_id, seq, seq + 1),
            )
        now = 1_800_000_000_000 + i
        if mark == "always" or (mark == "when_null" and i == 0):
            conn.execute(
                "UPDATE sessions SET revision = ?, next_seq = ?, updated_at = ?, "
                "index_from = COALESCE(index_from, ?) WHERE id = ?",
                (seq + 1, seq + 1, now, seq, session_id),
            )
        else:
            conn.execute(
                "UPDATE sessions SET revision = ?, next_seq = ?, updated_at = ? WHERE id = ?",
                (seq + 1, seq + 1, now, session_id),
            )
        conn.execute("COMMIT")
    frames = wal_frames(path)
    conn.close()
    return frames / APPENDS


MARKS = {
    "when_null": "",
    "always": ", the mark set by every update (`COALESCE`)",
    "pending_row": ", a `search_pending` row instead of the mark (revisions 0011-0012)",
    "none": ", no mark at all",
}


async def the_limit(tmp: Path) -> float:
    path = tmp / "limit.db"
    side = LimitSide(path)
    handle = await side.session()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for seq in range(1, APPENDS + 1):
        await side.append(handle, workload(1, seq))
    frames = wal_frames(path)
    await side.close()
    return frames / APPENDS


async def main() -> None:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        store, source = await through_the_store(tmp)
        rows = [("SessionStore.append, one event each", store)]
        for leave_out, mark in (
            ((), "when_null"),
            ((), "pending_row"),
            ((), "always"),
            ((), "none"),
            (("ix_sessions_updated_at_id",), "when_null"),
            (("ix_session_events_surface",), "when_null"),
            (("ix_session_events_session_id_type_seq",), "when_null"),
            (("ix_sessions_updated_at_id", "ix_session_events_surface"), "none"),
        ):
            label = "its statements" + MARKS[mark]
            label += "".join(f", without {n}" for n in leave_out)
            rows.append((label, replayed(source, tmp, leave_out, mark)))
        rows.append(
            ("plain sqlite3, the minimal schema (peers_bench's limit)", await the_limit(tmp))
        )
    print("| writes | WAL frames per append |\n|---|---|")
    for label, frames in rows:
        print(f"| {label} | {frames:.2f} |")


if __name__ == "__main__":
    asyncio.run(main())
