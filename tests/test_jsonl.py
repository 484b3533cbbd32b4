"""JSONL export and import (issue #6): byte-identical round trips, validation before writing.

An export is a header line then one event per line. Import validates every line first and
stores the session in one transaction: a bad line is reported with its line number and nothing
is stored; an existing id is refused unless ``--as`` gives a new one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from factories import header
from logs import LogBuilder

from todo_sessions import SessionEvent, SessionHeader, SessionStore, export_lines, import_lines
from todo_sessions._jsonl import header_line
from todo_sessions.cli import main
from todo_sessions.errors import InvalidEventError, SessionExistsError, SessionNotFoundError
from todo_sessions.harness.demo import run_demo

T0 = 1_764_000_000_000


def varied_log() -> LogBuilder:
    """Everything an export must carry verbatim: unicode and escapes, an ignorable unknown type,
    undeclared payload keys, floats, a surface replace, tool calls, todo writes."""
    b = LogBuilder()
    b.turn_start()
    b.user('naïve ✓ 日本語 "quoted" back\\slash\nnew line\ttab \u2028 \x7f')
    b.todo(("plan ✓", "in_progress"), ("ship", "pending"))
    telemetry = {"tokens": 3, "ratio": 0.1, "big": 2**53, "z": {"b": 1, "a": []}}
    b.add("vendor/telemetry", telemetry, ignorable=True)
    b.tool_step("c1", "c2", text="calling")
    b.add("todo/write", {"todos": [{"content": "plan ✓", "status": "completed"}], "x-note": "kept"})
    b.compact(b.surface[0], b.surface[2], "summary of the start")
    b.text_step("done")
    b.turn_end()
    b.exchange("again", "c3", answer="bye")
    return b


async def store_varied(store: SessionStore, session_id: str = "orig") -> list[SessionEvent]:
    events = varied_log().events
    await store.create(header(session_id, title="Round ✓ trip", cwd="/work", origin="test"))
    await store.append(session_id, events)
    return events


async def store_demo(store: SessionStore, session_id: str = "orig") -> list[SessionEvent]:
    await run_demo(store, session_id=session_id)
    return await store.read_from(session_id)


SESSIONS = {"varied": store_varied, "demo": store_demo}


async def export(store: SessionStore, session_id: str) -> list[str]:
    return [line async for line in export_lines(store, session_id)]


def file_lines(lines: list[str]) -> list[str]:
    """As read from a file: each line with its newline."""
    return [line + "\n" for line in lines]


# -- round trips ----------------------------------------------------------------------------------


@pytest.mark.parametrize("make", SESSIONS.values(), ids=SESSIONS.keys())
async def test_export_import_as_export_is_byte_identical(
    store: SessionStore, make: Callable[..., object]
) -> None:
    events = await make(store)  # type: ignore[misc]
    first = await export(store, "orig")
    assert [SessionEvent.from_json(line) for line in first[1:]] == events

    result = await import_lines(store, file_lines(first), as_id="copy")
    assert (result.session_id, result.events) == ("copy", len(events))
    assert result.revision == await store.revision("copy")
    second = await export(store, "copy")

    assert second[1:] == first[1:]  # every event line, byte for byte
    # the header line too, but for the id and the chain (the session id is bound into it)
    head_1, head_2 = json.loads(first[0]), json.loads(second[0])
    chain_1, chain_2 = head_1.pop("chain"), head_2.pop("chain")
    assert chain_1["seq"] == chain_2["seq"] == len(events) - 1
    assert chain_1["head"] != chain_2["head"]
    assert chain_2["head"] == await store.head("copy")
    head_1["header"]["id"] = "copy"
    assert head_2 == head_1
    assert json.loads(second[0])["header"]["id"] == "copy"


@pytest.mark.parametrize("make", SESSIONS.values(), ids=SESSIONS.keys())
async def test_whole_file_identical_across_databases(
    store: SessionStore, make: Callable[..., object], tmp_path: Path
) -> None:
    """Export from every backend, import under the same id into a fresh SQLite file: the
    second export is the same bytes, header line included."""
    await make(store)  # type: ignore[misc]
    first = await export(store, "orig")
    async with SessionStore(f"sqlite:///{tmp_path}/other.db") as other:
        await import_lines(other, file_lines(first))
        assert await export(other, "orig") == first


def test_cli_round_trip_files_are_byte_identical(tmp_path: Path) -> None:
    async def build() -> None:
        async with SessionStore(f"sqlite:///{tmp_path}/a.db") as store:
            await store_varied(store)

    asyncio.run(build())
    a, b = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    runner = CliRunner()
    for args in (
        ["--db", a, "export", "orig", "-o", str(tmp_path / "one.jsonl")],
        ["--db", b, "import", str(tmp_path / "one.jsonl")],
        ["--db", b, "export", "orig", "-o", str(tmp_path / "two.jsonl")],
        ["--db", b, "import", str(tmp_path / "two.jsonl"), "--as", "three"],
        ["--db", b, "export", "three", "-o", str(tmp_path / "three.jsonl")],
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == 0, result.stderr
    one = (tmp_path / "one.jsonl").read_bytes()
    assert (tmp_path / "two.jsonl").read_bytes() == one
    three = (tmp_path / "three.jsonl").read_bytes().split(b"\n", 1)
    assert three[1] == one.split(b"\n", 1)[1]


# -- 100k events ----------------------------------------------------------------------------------

BIG = 100_000


def big_batch(start: int, count: int) -> list[SessionEvent]:
    """A turn with one step of streamed chunks; ``start`` 0 opens it, the end closes it."""
    out: list[SessionEvent] = []
    for seq in range(start, start + count):
        if seq == 0:
            out.append(SessionEvent("turn/start", 0, T0, {"turn": 1}))
        elif seq == 1:
            out.append(SessionEvent("step/start", 1, T0 + 1, {"turn": 1, "step": 1}))
        elif seq == BIG - 2:
            out.append(SessionEvent("step/end", seq, T0 + seq, {"turn": 1, "step": 1}))
        elif seq == BIG - 1:
            data = {"turn": 1, "reason": {"kind": "completed"}}
            out.append(SessionEvent("turn/end", seq, T0 + seq, data))
        else:
            chunk = {"type": "text-delta", "index": 0, "text": f"token {seq} of a long answer"}
            data = {"turn": 1, "step": 1, "chunk": chunk}
            out.append(SessionEvent("assistant/chunk", seq, T0 + seq, data))
    return out


@pytest.mark.slow  # 100,000 events twice through the store: started first under xdist
async def test_100k_event_round_trip(tmp_path: Path) -> None:
    async with SessionStore(f"sqlite:///{tmp_path}/big.db", synchronous="NORMAL") as store:
        await store.create(header("big"))
        for start in range(0, BIG, 1000):
            await store.append("big", big_batch(start, 1000))
        path = tmp_path / "big.jsonl"
        with path.open("w", encoding="utf-8") as out:
            async for line in export_lines(store, "big"):
                out.write(line + "\n")
        with path.open(encoding="utf-8") as lines:
            result = await import_lines(store, lines, as_id="big-copy")
        assert result.events == BIG
        again = [line async for line in export_lines(store, "big-copy")]
        assert (await store.summary("big-copy")).next_seq == BIG

    exported = path.read_text(encoding="utf-8").splitlines()
    assert len(exported) == BIG + 1
    assert again[1:] == exported[1:]
    head, head_again = json.loads(exported[0]), json.loads(again[0])
    assert head.pop("chain")["seq"] == head_again.pop("chain")["seq"] == BIG - 1  # id bound in
    head["header"]["id"] = "big-copy"
    assert head_again == head


# -- refusals: nothing is stored ------------------------------------------------------------------

Lines = list[str]


def replace_line(number: int, text: str) -> Callable[[Lines], Lines]:
    return lambda lines: [text if i == number else line for i, line in enumerate(lines, 1)]


def edit_line(number: int, **changes: object) -> Callable[[Lines], Lines]:
    def edit(lines: Lines) -> Lines:
        record = json.loads(lines[number - 1])
        record.update(changes)
        return replace_line(number, json.dumps(record))(lines)

    return edit


def edit_header(**changes: object) -> Callable[[Lines], Lines]:
    def edit(lines: Lines) -> Lines:
        record = json.loads(lines[0])
        record["header"].update(changes)
        return [json.dumps(record), *lines[1:]]

    return edit


def todo_line(lines: Lines) -> int:
    return next(i for i, line in enumerate(lines, 1) if '"type":"todo/write"' in line)


def empty_todo(lines: Lines) -> Lines:
    number = todo_line(lines)
    bad = {"todos": [{"content": "  ", "status": "pending"}]}
    return edit_line(number, data=bad)(lines)


DAMAGE: list[tuple[str, Callable[[Lines], Lines], str]] = [
    ("not JSON", replace_line(4, "{oops"), "line 4:"),
    ("truncated last line", lambda ls: [*ls[:-1], ls[-1][:20]], "line {last}:"),
    ("seq gap", lambda ls: ls[:3] + ls[4:], "line 4: event has seq 3, expected 2"),
    ("seq repeated", lambda ls: ls[:4] + ls[3:], "line 5: event has seq 2, expected 3"),
    ("empty todo content", empty_todo, "line {todo}:"),
    ("unknown type", edit_line(3, type="vendor/strict"), "line 3:"),
    ("extra top-level key", edit_line(3, extra=1), "line 3:"),
    ("float time", edit_line(3, time=1.5), "line 3:"),
    (
        "NaN in data",
        replace_line(3, '{"type":"turn/start","seq":1,"time":1,"data":NaN}'),
        "line 3:",
    ),
    ("surfaceOp on a boundary", edit_line(2, surfaceOp="append"), "line 2:"),
    ("not an export", replace_line(1, '{"kind": "something else"}'), "line 1:"),
    ("header not JSON", replace_line(1, "kind: todo-sessions"), "line 1:"),
    ("newer format", edit_line(1, formatVersion=99), "line 1: formatVersion 99"),
    ("empty header id", edit_header(id=""), "line 1: invalid header"),
    ("relative cwd", edit_header(cwd="relative/dir"), "line 1: invalid header"),
    ("header only", lambda ls: ls[:1], "nothing to import"),
    ("empty file", lambda ls: [], "line 1: empty file"),
]


@pytest.mark.parametrize(
    ("damage", "expected"), [d[1:] for d in DAMAGE], ids=[d[0] for d in DAMAGE]
)
async def test_bad_line_is_reported_and_nothing_stored(
    store: SessionStore, damage: Callable[[Lines], Lines], expected: str
) -> None:
    await store_varied(store)
    good = await export(store, "orig")
    before = await store.list()
    bad = damage(list(good))
    expected = expected.format(last=len(good), todo=todo_line(good))
    with pytest.raises(InvalidEventError) as info:
        await import_lines(store, file_lines(bad), as_id="victim")
    assert expected in str(info.value)
    assert await store.list() == before
    with pytest.raises(SessionNotFoundError):
        await store.read_from("victim")


def test_cli_reports_the_bad_line_and_stores_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    runner = CliRunner()
    assert runner.invoke(main, ["--db", url, "demo", "--id", "d"]).exit_code == 0
    exported = runner.invoke(main, ["--db", url, "export", "d"]).stdout.splitlines()
    exported[6] = exported[6][:-1]  # line 7 loses its closing brace
    (tmp_path / "bad.jsonl").write_text("\n".join(exported) + "\n", encoding="utf-8")
    listed = runner.invoke(main, ["--db", url, "list", "--json"]).stdout

    result = runner.invoke(main, ["--db", url, "import", str(tmp_path / "bad.jsonl"), "--as", "x"])
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: line 7: ")
    assert runner.invoke(main, ["--db", url, "list", "--json"]).stdout == listed


async def test_existing_id_is_refused_unless_as(store: SessionStore) -> None:
    await store_varied(store)
    lines = file_lines(await export(store, "orig"))
    revision = await store.revision("orig")
    with pytest.raises(SessionExistsError, match="'orig' already exists"):
        await import_lines(store, lines)
    assert await store.revision("orig") == revision

    await import_lines(store, lines, as_id="second")
    with pytest.raises(SessionExistsError, match="'second' already exists"):
        await import_lines(store, lines, as_id="second")
    assert [s.id for s in await store.list()].count("second") == 1


async def test_import_as_keeps_the_header_but_the_id(store: SessionStore) -> None:
    events = await store_varied(store)
    await import_lines(store, file_lines(await export(store, "orig")), as_id="renamed ✓")
    original, renamed = await store.read("orig"), await store.read("renamed ✓")
    assert renamed.header.model_copy(update={"id": "orig"}) == original.header
    assert list(renamed.events) == events == list(original.events)
    assert await store.current_todos("renamed ✓") == await store.current_todos("orig")
    assert await store.derive_messages("renamed ✓") == await store.derive_messages("orig")

    for bad_id in ("", "tab\there", "x" * 201):
        with pytest.raises(InvalidEventError):
            await import_lines(store, file_lines(await export(store, "orig")), as_id=bad_id)
    assert sorted(s.id for s in await store.list()) == ["orig", "renamed ✓"]


async def test_blank_lines_and_crlf_are_tolerated(store: SessionStore) -> None:
    events = await store_varied(store)
    lines = await export(store, "orig")
    crlf = [line + "\r\n" for line in lines[:3]] + ["\n"] + file_lines(lines[3:]) + ["\n"]
    await import_lines(store, crlf, as_id="crlf")
    assert await store.read_from("crlf") == events


def test_import_refuses_a_broken_surface_and_a_newer_header_format(tmp_path: Path) -> None:
    from todo_sessions import parse_lines

    b = LogBuilder()
    b.exchange("hi")
    lines = [header_line(SessionHeader(id="s", created_at=0)), *(e.to_json() for e in b.events)]
    bad_replace = SessionEvent(
        "user/message",
        len(b.events),
        0,
        b.events[1].data_copy(),
        surface_op={"op": "replace", "start": 999, "end": 999},
        source_event_seqs=[0],
    )
    with pytest.raises(InvalidEventError, match=rf"line {len(lines) + 1}: .*start seq 999"):
        parse_lines([*lines, bad_replace.to_json()])
    newer = json.loads(lines[0])
    newer["header"]["formatVersion"] = 7
    with pytest.raises(InvalidEventError, match="format_version 7 is newer"):
        asyncio.run(_import_into(tmp_path, [json.dumps(newer), *lines[1:]]))


async def _import_into(tmp_path: Path, lines: list[str]) -> None:
    async with SessionStore(f"sqlite:///{tmp_path}/n.db") as store:
        await import_lines(store, lines)
