"""Import reads a hostile file with bounded memory (issue 39, item 2): a gzip bomb, a packed
reference row that stands for millions of events and a truncated gzip are refused cleanly,
with a peak RSS (measured in a child process: `resource.getrusage`) far below what reading
them whole would take; a single 10 MB event still imports; the limits are configurable."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from todo_sessions import SessionStore, import_lines, parse_lines
from todo_sessions._jsonl import MAX_BYTES, MAX_EVENTS
from todo_sessions.cli import main
from todo_sessions.errors import ImportLimitError, InvalidEventError

RSS_BOUND_KB = 300 * 1024
"""The issue's bound on the peak RSS of an import refusing a bomb: 300 MB."""

HEADER = {
    "kind": "todo-sessions/session",
    "formatVersion": 0,
    "header": {"id": "b", "createdAt": 1},
}
REFERENCE_HEADER = {"type": "session", "version": 0, "id": "r", "createdAt": 1}
TURN = {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}


def line(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


def member(data: bytes) -> bytes:
    """One gzip member (a gzip file may hold several: they read as their concatenation)."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def message_parts(seq: int) -> tuple[bytes, bytes]:
    """A user/message line around its text: what comes before the text and after it."""
    before = (
        f'{{"type":"user/message","seq":{seq},"time":1,"data":{{"id":"u{seq}","role":"user",'
        '"content":[{"type":"text","text":"'
    )
    return before.encode(), b'"}],"source":{"kind":"user"}},"surfaceOp":"append"}\n'


def many_big_events(path: Path, events: int, size: int = 1 << 20) -> Path:
    """``events`` valid messages of ``size`` bytes of text each: every line is fine, the
    whole is not (expands to about ``events * size`` bytes; the text is compressed once)."""
    text = member(b"a" * size)
    with path.open("wb") as out:
        out.write(member(line(HEADER) + line(TURN)))
        for seq in range(1, events + 1):
            before, after = message_parts(seq)
            out.write(member(before) + text + member(after))
    return path


def one_endless_line(path: Path, size: int) -> Path:
    block = member(b"a" * (1 << 24))
    before, _ = message_parts(1)
    with path.open("wb") as out:
        out.write(member(line(HEADER) + line(TURN) + before))
        for _ in range(size >> 24):
            out.write(block)
    return path


def reference_rows(path: Path, chunks: int, rows: int = 1) -> Path:
    """A reference file whose ``rows`` packed text-chunks rows stand for ``chunks`` events
    each (all in one step)."""
    step = {"type": "step/start", "seq": 1, "time": 1, "data": {"turn": 1, "step": 1}}
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = compressor.compress(line(REFERENCE_HEADER) + line(TURN) + line(step))
    for k in range(rows):
        data = {"turn": 1, "step": 1, "index": k, "dt": [0] * (chunks - 1), "texts": ["a"] * chunks}
        row = {"type": "text-chunks", "seq0": 2 + k * chunks, "time0": 1, "data": data}
        body += compressor.compress(line(row))
    path.write_bytes(body + compressor.flush())
    return path


_CHILD = """
import resource, sys
from todo_sessions.cli import main
try:
    main(sys.argv[1:], prog_name="todo-sessions")
except SystemExit as exc:
    code = exc.code
try:  # this program's own peak (getrusage's also counts the parent's before the exec)
    with open("/proc/self/status") as status:
        rss = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
except OSError:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("RSS_KB", rss, "EXIT", code)
"""


def import_in_child(db: str, path: Path) -> tuple[int, int, str]:
    """``todo-sessions import PATH`` in a child process: (peak RSS in KB, exit code, stderr)."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, "--db", db, "import", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    words = done.stdout.split()
    rss = int(words[words.index("RSS_KB") + 1])
    code = int(words[words.index("EXIT") + 1])
    return rss, code, done.stderr


@pytest.mark.parametrize(
    ("make", "limit"),
    [
        (lambda p: many_big_events(p, 690), "max_bytes"),  # 0.7 MB of gzip -> 690 MB
        (lambda p: many_big_events(p, 2048), "max_bytes"),  # 2 MB of gzip -> 2 GiB
        (lambda p: one_endless_line(p, 2 << 30), "longer than"),  # one line of 2 GiB
        (lambda p: reference_rows(p, 1_000_000), "max_events"),  # 7 KB -> 1,000,004 events
        (lambda p: reference_rows(p, 3_000_000), "max_events"),  # 3 million events
        (lambda p: reference_rows(p, 50_000, 60), "max_events"),  # 3 million, in 60 rows
    ],
    ids=["690MB-of-events", "2GiB-of-events", "2GiB-line", "1M-chunks", "3M-chunks", "3M-rows"],
)
def test_a_bomb_is_refused_with_bounded_memory(tmp_path: Path, make: object, limit: str) -> None:
    path = make(tmp_path / "bomb.jsonl.gz")  # type: ignore[operator]
    assert path.stat().st_size < 3_000_000
    db = f"sqlite:///{tmp_path}/s.db"
    rss, code, err = import_in_child(db, path)
    assert code == 1 and err.startswith("error: ") and "unexpected" not in err, err
    assert limit in err
    assert rss < RSS_BOUND_KB, f"peak RSS {rss // 1024} MB"
    print(f"peak RSS {rss // 1024} MB")


def test_the_limits_are_typed_and_configurable(tmp_path: Path) -> None:
    path = reference_rows(tmp_path / "r.jsonl.gz", 50)
    with gzip.open(path, "rt") as lines, pytest.raises(ImportLimitError) as info:
        parse_lines(lines, max_events=40)
    assert (info.value.limit, info.value.value, info.value.field) == (
        "max_events",
        40,
        "max_events",
    )
    assert isinstance(info.value, InvalidEventError)
    with gzip.open(path, "rt") as lines:
        assert len(parse_lines(lines, max_events=52)[1]) == 52
    big = many_big_events(tmp_path / "b.jsonl.gz", 3, size=1000)
    with gzip.open(big, "rt") as lines, pytest.raises(ImportLimitError, match="max_bytes=2000"):
        parse_lines(lines, max_bytes=2000)
    with gzip.open(big, "rt") as lines:
        assert len(parse_lines(lines, max_bytes=None, max_events=None)[1]) == 4
    assert MAX_BYTES >= 64 << 20 and MAX_EVENTS >= 100_000


async def test_a_single_10mb_event_still_imports(tmp_path: Path) -> None:
    path = many_big_events(tmp_path / "one.jsonl.gz", 1, size=10 << 20)
    async with SessionStore(f"sqlite:///{tmp_path}/s.db") as store:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            result = await import_lines(store, lines)
        assert result.events == 2
        text = (await store.read_from("b"))[1].data["content"][0]["text"]
        assert len(text) == 10 << 20


def test_a_single_10mb_event_still_imports_on_the_command_line(tmp_path: Path) -> None:
    path = many_big_events(tmp_path / "one.jsonl.gz", 1, size=10 << 20)
    imported = CliRunner().invoke(main, ["--db", f"sqlite:///{tmp_path}/t.db", "import", str(path)])
    assert imported.exit_code == 0, imported.output
    assert "imported 2 events" in imported.output


def test_a_truncated_gzip_is_a_clean_error(tmp_path: Path) -> None:
    whole = many_big_events(tmp_path / "w.jsonl.gz", 3, size=1000).read_bytes()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) - 30])
    db = f"sqlite:///{tmp_path}/s.db"
    result = CliRunner().invoke(main, ["--db", db, "import", str(cut)])
    assert result.exit_code == 1
    assert "truncated or damaged" in result.output and "unexpected" not in result.output
    with gzip.open(cut, "rt") as lines, pytest.raises(InvalidEventError, match="truncated"):
        parse_lines(lines)
    listed = CliRunner().invoke(main, ["--db", db, "list", "--json"])
    assert json.loads(listed.stdout) == []


def test_the_command_line_sets_the_limits(tmp_path: Path) -> None:
    big = many_big_events(tmp_path / "b.jsonl.gz", 3, size=1000)
    db = f"sqlite:///{tmp_path}/cli.db"
    runner = CliRunner()
    refused = runner.invoke(main, ["--db", db, "import", str(big), "--max-bytes", "2000"])
    assert refused.exit_code == 1 and "max_bytes=2000" in refused.output, refused.output
    refused = runner.invoke(main, ["--db", db, "import", str(big), "--max-events", "2"])
    assert refused.exit_code == 1 and "max_events=2" in refused.output, refused.output
    done = runner.invoke(main, ["--db", db, "import", str(big), "--max-bytes", "100000"])
    assert done.exit_code == 0, done.output
    assert "imported 4 events" in done.output
