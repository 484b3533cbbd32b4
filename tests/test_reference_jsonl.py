"""JSONL files exchanged with the reference harness both ways (issue 25, item 6), and the
request/header upcaster on a frozen export of the earlier shape (item 5).

The fixtures under tests/fixtures/reference/ are written by hand from the reference's format
(docs/format.md, "Exchanging files with the reference"): its header line, and chunk runs
packed into text-chunks, reasoning-chunks and tool-call-chunks rows. The reference's loader
reads format version 0 only, so there is one version, packed and not.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests import conformance as corpus
from todo_sessions import SessionStore
from todo_sessions._jsonl import (
    export_lines,
    import_lines,
    parse_header_line,
    parse_lines,
    reference_lines,
)
from todo_sessions.cli import main
from todo_sessions.core.catalog import validate_event
from todo_sessions.errors import InvalidEventError
from todo_sessions.harness.requests import derive_request

FIXTURES = Path(__file__).parent / "fixtures"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _chunk(seq: int, time: int, index: int, **chunk: Any) -> dict[str, Any]:
    return {
        "type": "assistant/chunk",
        "seq": seq,
        "time": time,
        "data": {"turn": 1, "step": 1, "chunk": {"index": index, **chunk}},
    }


def test_a_packed_reference_file_imports_to_the_chunk_events_it_stands_for() -> None:
    header, events = parse_lines(_lines(FIXTURES / "reference" / "v0-packed.jsonl"))
    assert (header.id, header.created_at, header.delegation_depth) == (
        "ref-packed",
        1764000000000,
        1,
    )
    assert (header.origin, header.parent_session, header.seed_length) == (
        "subagent",
        "ref-plain",
        0,
    )
    assert [e.seq for e in events] == list(range(19))
    t = 1764000000000
    chunks = [e.to_dict() for e in events if e.type == "assistant/chunk"]
    assert chunks == [
        _chunk(3, t + 10, 0, type="reasoning-delta", text="th"),
        _chunk(4, t + 12, 0, type="reasoning-delta", text="in"),
        _chunk(5, t + 12, 0, type="reasoning-delta", text="k"),
        _chunk(6, t + 20, 1, type="text-delta", text="O"),
        _chunk(7, t + 21, 1, type="text-delta", text="k"),
        _chunk(8, t + 20, 1, type="text-delta", text=" "),
        _chunk(9, t + 23, 1, type="text-delta", text="."),
        _chunk(10, t + 30, 2, type="tool-call-delta", id="c1", name="read", argumentsDelta='{"pa'),
        _chunk(11, t + 31, 2, type="tool-call-delta", id="c1", name="read", argumentsDelta='th":'),
        _chunk(12, t + 32, 2, type="tool-call-delta", id="c1", name="read", argumentsDelta='"a"}'),
        _chunk(13, t + 33, 3, type="text-delta", text="!"),
    ]
    for event in events:
        validate_event(event)


def test_a_plain_reference_file_imports_with_its_vocabulary() -> None:
    header, events = parse_lines(_lines(FIXTURES / "reference" / "v0-plain.jsonl"))
    assert (header.id, header.cwd) == ("ref-plain", "/work/project")
    assert [e.type for e in events][7] == "session/title"  # known here too (item 7)
    assert derive_request(events).config.provider == "deepseek"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("head", "text"),
    [
        ({"type": "session", "version": 1, "id": "s", "createdAt": 0}, "version 1 is not"),
        (
            {"type": "session", "version": 0, "id": "s", "createdAt": 0, "agentPreset": "x"},
            "['agentPreset'] are not kept",
        ),
        ({"type": "session", "version": 0, "id": "s"}, "invalid header"),
    ],
)
def test_reference_headers_we_cannot_keep_are_refused(head: dict[str, Any], text: str) -> None:
    with pytest.raises(InvalidEventError, match="line 1") as caught:
        parse_header_line(json.dumps(head))
    assert text in str(caught.value)


def test_a_reference_file_with_an_invalid_adapter_default_marker_imports_nothing(
    tmp_path: Path,
) -> None:
    """Issue 35, item 9: a request/header marking a value its configuration does not set is
    refused at import as the reference refuses it, naming the event; nothing is stored."""
    lines = _lines(FIXTURES / "reference" / "v0-plain.jsonl")
    at = next(n for n, line in enumerate(lines) if '"request/header"' in line)
    row = json.loads(lines[at])
    row["data"]["header"]["adapterDefaults"] = {"reasoningEffort": True}
    row["data"]["header"]["config"].pop("reasoningEffort", None)
    lines[at] = json.dumps(row)

    async def run() -> list[Any]:
        async with SessionStore(f"sqlite:///{tmp_path}/x.db") as store:
            with pytest.raises(InvalidEventError) as caught:
                await import_lines(store, lines)
            error = caught.value
            assert (error.event_type, error.seq, error.field) == ("request/header", 3, "line 5")
            assert "(seq 3): data.header.adapterDefaults: Value error, the marker" in str(error)
            return list(await store.list())

    assert asyncio.run(run()) == []


def test_a_malformed_chunk_row_names_its_line() -> None:
    lines = _lines(FIXTURES / "reference" / "v0-packed.jsonl")
    row = json.loads(lines[5])
    row["data"]["dt"] = [1]
    lines[5] = json.dumps(row)
    with pytest.raises(InvalidEventError, match=r"line 6: malformed text-chunks row"):
        parse_lines(lines)


def _spec_exchange(case_id: str) -> dict[str, Any]:
    (case,) = [c for c in corpus.spec_cases() if c["id"] == case_id]
    return case


@pytest.mark.parametrize(
    ("case_id", "pack"),
    [("jsonl:ts-file-into-python", False), ("jsonl:ts-packed-file-into-python", True)],
)
def test_export_format_reference_writes_what_the_reference_writes(
    tmp_path: Path, case_id: str, pack: bool
) -> None:
    """The reference's own files for the same events (the corpus's jsonl_exchange cases):
    importing one and exporting it in the reference's format gives it back byte for byte."""
    reference_file = _spec_exchange(case_id)["reference"]["file"].splitlines()

    async def run() -> tuple[list[str], list[str]]:
        async with SessionStore(f"sqlite:///{tmp_path}/x.db") as store:
            await import_lines(store, reference_file)
            ours = [line async for line in export_lines(store, "diff-session")]
            theirs = [
                line async for line in reference_lines(store, "diff-session", pack_chunks=pack)
            ]
            return ours, theirs

    ours, theirs = asyncio.run(run())
    assert theirs == reference_file
    assert json.loads(ours[0])["kind"] == "todo-sessions/session"  # the default stays ours
    assert ours[1:] == [
        line
        for line in _spec_exchange("jsonl:python-file-into-ts")["reference"]["file"].splitlines()[
            1:
        ]
    ]


def test_old_request_headers_keep_loading_and_export_upcast(tmp_path: Path) -> None:
    """Item 5: a frozen export of today's shape (d12fdba) still imports, its request/header
    reads through the upcaster, and the reference export writes it in the reference's shape
    (our session/meta, unknown there, marked ignorable)."""
    lines = _lines(FIXTURES / "todo-sessions-format0-d12fdba.jsonl")
    _, events = parse_lines(lines)
    config = derive_request(events).config
    assert config is not None and (config.provider, config.model, config.system) == (
        "scripted",
        "scripted-1",
        "be brief",
    )

    async def run() -> list[str]:
        async with SessionStore(f"sqlite:///{tmp_path}/old.db") as store:
            await import_lines(store, lines)
            again = [line async for line in export_lines(store, "ours-old")]
            assert again[1:] == lines[1:]  # an older export has no chain: the header gains it
            head = json.loads(again[0])
            assert head.pop("chain") == {"seq": 10, "head": await store.head("ours-old")}
            assert head == json.loads(lines[0])
            return [line async for line in reference_lines(store, "ours-old")]

    out = [json.loads(line) for line in asyncio.run(run())]
    assert out[0] == {
        "type": "session",
        "version": 0,
        "id": "ours-old",
        "createdAt": 1764000000000,
        "delegationDepth": 0,
    }
    header = out[4]["data"]
    assert header == {
        "header": {
            "config": {"provider": "scripted", "model": "scripted-1"},
            "system": "be brief",
            "tools": [
                {
                    "name": "todo_write",
                    "description": "Write the todo list",
                    "parameters": {"type": "object"},
                }
            ],
        },
        "reason": "initial",
    }
    assert out[5]["type"] == "assistant/chunk"  # chunks without an index are not packed
    meta = [row for row in out if row.get("type") == "session/meta"]
    assert meta and meta[0]["ignorable"] is True


def test_cli_export_format_reference(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/cli.db"
    fixture = FIXTURES / "reference" / "v0-packed.jsonl"
    runner = CliRunner()
    imported = runner.invoke(main, ["--db", db, "import", str(fixture)])
    assert imported.exit_code == 0, imported.output
    out = tmp_path / "back.jsonl"
    exported = runner.invoke(
        main, ["--db", db, "export", "ref-packed", "--format", "reference", "-o", str(out)]
    )
    assert exported.exit_code == 0, exported.output
    assert _lines(out) == _lines(fixture)


def test_cli_import_names_a_compressed_reference_file_and_reads_one_piped_in(
    tmp_path: Path,
) -> None:
    """The reference stores session.jsonl.zstd by default: import says so (nothing written)
    rather than "not UTF-8", and the decompressed file read from stdin imports."""
    db = f"sqlite:///{tmp_path}/cli.db"
    fixture = FIXTURES / "reference" / "v0-plain.jsonl"
    packed = tmp_path / "session.jsonl.zstd"
    packed.write_bytes(b"\x28\xb5\x2f\xfd\x24\x00\x01\x00\x00\x99" * 3)
    runner = CliRunner()
    refused = runner.invoke(main, ["--db", db, "import", str(packed)])
    assert refused.exit_code != 0
    assert "Zstandard-compressed" in refused.output
    assert "zstd -dc FILE | todo-sessions import -" in refused.output
    listed = runner.invoke(main, ["--db", db, "list", "--json"])
    assert json.loads(listed.output) == [], listed.output
    piped = runner.invoke(main, ["--db", db, "import", "-"], input=fixture.read_bytes())
    assert piped.exit_code == 0, piped.output
    assert "imported" in piped.output
