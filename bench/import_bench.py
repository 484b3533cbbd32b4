"""Import throughput of other agents' session files against reading and ``json.loads`` of the
same files alone, per agent, and the latency of ``import --follow``.

Run (from the repository root)::

    .venv/bin/python bench/import_bench.py                        # 2,000 sessions an agent
    .venv/bin/python bench/import_bench.py --sessions 10000       # the full run
    .venv/bin/python bench/import_bench.py --agents codex --rounds 1 --follow-lines 0

Corpus (generated once per agent, untimed): ``--sessions`` session files of mixed size, the
number of turns drawn from a long tail (most sessions short, as real ones are: 1 to 40 turns,
median 3), each turn a copy of the committed fixture's turn:

- codex: rollout files, a ``session_meta`` line then turns of 19 lines (a prompt, reasoning,
  an ``update_plan`` call, a shell call, their outputs, an answer, token counts);
- claude-code: transcripts, a ``file-history-snapshot`` line then turns of 11 lines (a prompt,
  ``TodoWrite`` calls, a ``Bash`` call, their results, an answer);
- opencode: one ``opencode.db`` (opencode's tables), each pair of sessions a copy of the
  committed fixture's main session (9 complete messages: prompts, ``todowrite`` calls, a
  ``bash`` call, a delegated ``task``, a compaction) and its sub-agent's session (2 messages);
  a "line" is a message (its row and its parts' rows).

Rows, in the same round, each round in another order (rotated, and reversed every other):

- read: every file read and each line parsed with ``json.loads`` (the floor any importer pays;
  opencode: each session's message and part rows selected and their JSON parsed);
- import: `import_paths` with the agent's importer into a new SQLite file store (the whole
  pipeline: discovery, reading, mapping, the appends, the search index);
- store floor: what the import writes, with no Python but ``sqlite3``'s own: the statements of
  every append the import ran (the session's state read, the ``sessions`` row of a new
  session, the ``session_events`` rows with their data text and chain values, the search
  index's pending mark as the store writes it, the session row's update, the projection's:
  whatever the store's append plan runs), captured with their
  parameters from an untimed import (`capture_appends`), replayed by plain ``sqlite3``
  (``executemany`` for the rows, one ``BEGIN IMMEDIATE``/``COMMIT`` an append, WAL,
  ``synchronous=FULL``, ``foreign_keys=ON`` as the store sets them) into a new database with
  the store's schema (made by `SessionStore`, untimed). The rows it leaves are the import's
  (checked untimed: the same ``session_events`` count). Not in it: the search index's
  catch-up (the ``search_text`` rows and FTS5 entries), which the store runs during an import
  once enough events wait or its writer is idle (by the end of a 2,000-session import, 95% of
  the Codex and Claude Code appends indexed, half of the opencode ones): the floor is below
  anything the store could reach.

Reported per agent: lines/s of each (median over rounds, p25-p75 spread), import / read and
store floor / read in wall time and in CPU time of the process (all threads: steadier on a busy
machine), the events stored a line read, and the load average before and after.

Follow latency (``--follow-lines``, codex): ``todo-sessions import --from codex --follow`` runs
as a real subprocess on a new rollout file (its default ``--interval`` unless given); one line
at a time is appended (each after a random pause of up to 0.5 s, so that lines land anywhere
in the follower's cycle), and this process polls the store every 2 ms until the line's event is
there: the time from the write to the event seen stored (median, p90, max).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import operator
import os
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from todo_sessions import SessionStore
from todo_sessions.errors import SessionNotFoundError
from todo_sessions.importers import get_importer, import_paths
from todo_sessions.store import plans
from todo_sessions.store.sqlite import transactions

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests/fixtures/importers"
CODEX_FIXTURE = next((FIXTURES / "codex/sessions").rglob("rollout-*0199d0a4*.jsonl"))
CLAUDE_FIXTURE = next((FIXTURES / "claude-code/projects").glob("*/*.jsonl"))
OPENCODE_FIXTURE = FIXTURES / "opencode"
OPENCODE_OPEN = "msg_fix0010asst000000000010"
"""The fixture's message still being written: left out of the corpus (every message counts)."""


def turns(rng: random.Random) -> int:
    """1 to 40, long-tailed (median 3)."""
    return max(1, min(40, round(rng.lognormvariate(1.1, 0.9))))


def codex_corpus(root: Path, sessions: int, seed: int = 7) -> int:
    lines = CODEX_FIXTURE.read_text(encoding="utf-8").splitlines()
    head, turn = lines[0], lines[3:22]
    rng = random.Random(seed)
    total = 0
    day = root / "sessions" / "2025" / "10" / "11"
    day.mkdir(parents=True)
    for n in range(sessions):
        thread = f"0199d0a4-0000-7000-8000-{n:012d}"
        meta = json.loads(head)
        meta["payload"]["id"] = thread
        out = [json.dumps(meta, separators=(",", ":"))]
        out += turn * turns(rng)
        (day / f"rollout-2025-10-11T09-00-00-{thread}.jsonl").write_text(
            "".join(line + "\n" for line in out), encoding="utf-8"
        )
        total += len(out)
    return total


def claude_corpus(root: Path, sessions: int, seed: int = 7) -> int:
    lines = CLAUDE_FIXTURE.read_text(encoding="utf-8").splitlines()
    head, turn = lines[0], lines[1:12]
    rng = random.Random(seed)
    total = 0
    project = root / "projects" / "-home-ada-proj"
    project.mkdir(parents=True)
    for n in range(sessions):
        out = [head, *(turn * turns(rng))]
        path = project / f"5f0c6d7e-0000-4000-8000-{n:012d}.jsonl"
        path.write_text("".join(line + "\n" for line in out), encoding="utf-8")
        total += len(out)
    return total


def opencode_corpus(root: Path, sessions: int, seed: int = 7) -> int:
    """``sessions`` (rounded up to even) sessions in ``root/opencode.db``: the fixture's two,
    copied with new ids."""
    rows = (OPENCODE_FIXTURE / "sessions.sql").read_text(encoding="utf-8").splitlines()
    rows = [r for r in rows if r.startswith("INSERT") and OPENCODE_OPEN not in r]
    project = [r for r in rows if r.startswith("INSERT INTO project")]
    copied = "\n".join(r for r in rows if r not in project)
    root.mkdir(parents=True)
    with sqlite3.connect(root / "opencode.db") as db:
        db.executescript((OPENCODE_FIXTURE / "schema.sql").read_text(encoding="utf-8"))
        db.executescript("\n".join(project))
        for n in range((sessions + 1) // 2):
            db.executescript(re.sub(r"_fix", f"_b{n:07d}", copied))
    return read_opencode(root)


CORPUS: dict[str, Callable[[Path, int], int]] = {
    "codex": codex_corpus,
    "claude-code": claude_corpus,
    "opencode": opencode_corpus,
}


def read_opencode(root: Path) -> int:
    """Every session's messages and parts, selected and parsed (``json.loads``) one session
    at a time: the messages counted."""
    count = 0
    with sqlite3.connect(f"{(root / 'opencode.db').as_uri()}?mode=ro", uri=True) as db:
        for (sid,) in db.execute("SELECT id FROM session ORDER BY time_created, id").fetchall():
            for (data,) in db.execute("SELECT data FROM message WHERE session_id = ?", (sid,)):
                json.loads(data)
                count += 1
            for (data,) in db.execute("SELECT data FROM part WHERE session_id = ?", (sid,)):
                json.loads(data)
    return count


def read_all(root: Path) -> int:
    if (root / "opencode.db").exists():
        return read_opencode(root)
    count = 0
    for path in sorted(root.rglob("*.jsonl")):
        with path.open("rb") as handle:
            for raw in handle:
                json.loads(raw)
                count += 1
    return count


async def import_all(agent: str, root: Path, db: Path) -> int:
    async with SessionStore(f"sqlite:///{db}") as store:
        results = await import_paths(store, get_importer(agent), [root])
    return sum(r.lines for r in results)


EVENTS_INSERT = re.compile(r"INSERT INTO \"?session_events\"? ", re.IGNORECASE)

Step = tuple[str, str, object]
"""One statement of an append as the store ran it: how (``one`` or ``many``), its SQL, its
parameters (a tuple, or a list of tuples for ``many``)."""


def capture_appends(agent: str, root: Path, db: Path) -> list[list[Step]]:
    """Import ``root`` into a new store at ``db`` (untimed), recording the statements of every
    append with their parameters as the SQLite driver runs them (`transactions.run_plan`)."""
    appends: list[list[Step]] = []
    run_plan = transactions.run_plan

    def recording(conn: sqlite3.Connection, plan: plans.Plan[object]) -> object:
        if plan.gi_code.co_name != "append":  # type: ignore[attr-defined]
            return run_plan(conn, plan)
        steps: list[Step] = []
        appends.append(steps)

        def traced() -> plans.Plan[object]:
            result: object = None
            while True:
                try:
                    kind, statement, args = plan.send(result)
                except StopIteration as done:
                    return done.value
                if kind == plans.EVENTS:
                    getter = operator.itemgetter(*statement.names)  # type: ignore[union-attr]
                    steps.append(("many", statement.sql, [getter(row) for row in args]))  # type: ignore[union-attr]
                elif kind == plans.MANY:
                    steps.append(("many", statement.sql, [tuple(a) for a in args]))  # type: ignore[union-attr]
                elif kind in (plans.ROW, plans.RUN):
                    steps.append(("one", statement.sql, tuple(args)))  # type: ignore[union-attr]
                result = yield kind, statement, args

        return run_plan(conn, traced())

    transactions.run_plan = recording  # type: ignore[assignment]
    try:
        run_import(agent, root, db)
    finally:
        transactions.run_plan = run_plan
    return appends


def new_store_file(db: Path) -> None:
    """A database with the store's schema and nothing in it (untimed)."""

    async def opened() -> None:
        async with SessionStore(f"sqlite:///{db}"):
            pass

    asyncio.run(opened())


def store_floor(appends: list[list[Step]], db: Path) -> int:
    """``appends`` replayed by plain ``sqlite3`` into ``db``, one transaction each; how many."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for pragma in ("journal_mode = WAL", "synchronous = FULL", "foreign_keys = ON"):
            conn.execute(f"PRAGMA {pragma}")
        execute, executemany = conn.execute, conn.executemany
        for steps in appends:
            execute("BEGIN IMMEDIATE")
            for how, sql, args in steps:
                if how == "one":
                    execute(sql, args).fetchall()  # type: ignore[arg-type]
                else:
                    executemany(sql, args)  # type: ignore[arg-type]
            execute("COMMIT")
    finally:
        conn.close()
    return len(appends)


def stored(db: Path) -> int:
    """The ``session_events`` rows in the database ``db``."""
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM session_events").fetchone()[0])
    finally:
        conn.close()


def events_in(appends: list[list[Step]]) -> int:
    """The ``session_events`` rows the appends insert."""
    inserts = [args for steps in appends for _, sql, args in steps if EVENTS_INSERT.match(sql)]
    return sum(len(rows) for rows in inserts if isinstance(rows, list))


def run_import(agent: str, root: Path, db: Path) -> int:
    return asyncio.run(import_all(agent, root, db))


def timed(fn: Callable[[], int]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds of this process (every thread: the store's writer too) and
    the lines ``fn`` counted. On a busy machine the CPU time is the steadier figure."""
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    lines = fn()
    return time.perf_counter() - start, time.process_time() - cpu, lines


def spread(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{statistics.median(values):,.0f} lines/s (p25-p75 {q[0]:,.0f}-{q[2]:,.0f})"


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def throughput(agent: str, sessions: int, rounds: int) -> None:
    started = time.perf_counter()
    get_importer(agent)  # loaded once, untimed (the Claude Code importer loads the SDK)
    loaded = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "files"
        total = CORPUS[agent](root, sessions)
        print(f"{agent}: importer loaded in {loaded:.2f} s (untimed below)")
        print(f"{agent}: {sessions:,} sessions, {total:,} lines; load {load()}", flush=True)
        appends = capture_appends(agent, root, Path(tmp) / "captured.db")
        events = events_in(appends)
        print(f"  stored: {events:,} events in {len(appends):,} appends, ", end="")
        print(f"{events / total:.2f} events a line", flush=True)
        rates: dict[str, list[float]] = {"read": [], "import": [], "floor": []}
        cpu: dict[str, list[float]] = {"read": [], "import": [], "floor": []}
        for r in range(rounds):
            order = ["read", "import", "floor"]
            order = order[r % 3 :] + order[: r % 3]
            if r % 2:
                order.reverse()
            for what in order:
                db = Path(tmp) / f"{what}-{r}.db"
                if what == "read":
                    seconds, used, lines = timed(lambda: read_all(root))
                elif what == "import":
                    seconds, used, lines = timed(partial(run_import, agent, root, db))
                else:
                    new_store_file(db)
                    seconds, used, count = timed(partial(store_floor, appends, db))
                    assert count == len(appends) and stored(db) == events, (count, events)
                    lines = total
                rates[what].append(lines / seconds)
                cpu[what].append(used)
                assert lines == total, (what, lines, total)
        print(f"  read + json.loads: {spread(rates['read'])}")
        print(f"  import:            {spread(rates['import'])}")
        print(f"  store floor:       {spread(rates['floor'])}")
        for what, label in (("import", "import / read:     "), ("floor", "store floor / read:")):
            wall = [r / w for r, w in zip(rates["read"], rates[what], strict=True)]
            cpus = [w / r for r, w in zip(cpu["read"], cpu[what], strict=True)]
            print(f"  {label} {statistics.median(wall):.1f}x wall, ", end="")
            print(f"{statistics.median(cpus):.1f}x CPU")
        print(f"  load {load()}", flush=True)


async def _stored(store: SessionStore, session_id: str) -> int:
    try:
        return await store.count(session_id, type="codex/entry")
    except SessionNotFoundError:
        return 0


async def _latencies(db: Path, path: Path, lines: list[str], session_id: str) -> list[float]:
    seen: list[float] = []
    async with SessionStore(f"sqlite:///{db}") as store:
        rng = random.Random(11)
        for n, line in enumerate(lines, start=1):
            # at a random moment of the follower's cycle, not just after its last pass
            await asyncio.sleep(rng.uniform(0, 0.5))
            with path.open("a", encoding="utf-8") as handle:
                handle.write(line + "\n")
            written = time.perf_counter()
            deadline = written + 30
            while await _stored(store, session_id) < n:
                if time.perf_counter() > deadline:
                    raise TimeoutError(f"line {n} never arrived")
                await asyncio.sleep(0.002)
            seen.append(time.perf_counter() - written)
    return seen


def follow_latency(count: int, interval: float | None) -> None:
    source = CODEX_FIXTURE.read_text(encoding="utf-8").splitlines()
    lines = (source * (count // len(source) + 1))[:count]
    session_id = "codex-" + json.loads(source[0])["payload"]["id"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "sessions"
        folder.mkdir()
        path, db = folder / CODEX_FIXTURE.name, Path(tmp) / "follow.db"
        command = [sys.executable, "-m", "todo_sessions", "--db", str(db), "import"]
        command += ["--from", "codex", str(folder), "--follow"]
        if interval is not None:
            command += ["--interval", str(interval)]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        follower = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            time.sleep(1.5)  # started and polling
            seen = asyncio.run(_latencies(db, path, lines, session_id))
        finally:
            follower.terminate()
            follower.wait(30)
    ms = sorted(s * 1000 for s in seen)
    p90 = ms[int(len(ms) * 0.9) - 1]
    every = f"--interval {interval}" if interval is not None else "default --interval"
    print(
        f"follow ({every}): {len(ms)} lines, write -> stored median {statistics.median(ms):.0f} "
        f"ms, p90 {p90:.0f} ms, max {ms[-1]:.0f} ms; load {load()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--agents", default="codex,claude-code,opencode")
    parser.add_argument("--follow-lines", type=int, default=100)
    parser.add_argument("--interval", type=float, default=None)
    args = parser.parse_args()
    for agent in args.agents.split(","):
        if agent:
            throughput(agent, args.sessions, args.rounds)
    if args.follow_lines:
        follow_latency(args.follow_lines, args.interval)


if __name__ == "__main__":
    main()
