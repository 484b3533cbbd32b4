"""Importing opencode sessions (todo_sessions.importers.OpencodeImporter) from the committed
corpus tests/fixtures/importers/opencode: a database built from opencode's own tables
(schema.sql) and hand-written rows (sessions.sql), and an ``opencode export`` file. The
mapping (todos without the cancelled item, tool calls with opencode's names and inputs,
results and errors, reasoning, the child session, the compaction, a message still being
written), incremental and idempotent imports over rows updated in place, strictly read-only
access while another connection writes, and the export as ``opencode export`` prints it."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from todo_sessions import SessionStore, verify_session
from todo_sessions.core.header import SessionHeader
from todo_sessions.harness.requests import derive_request
from todo_sessions.importers import (
    AGENTS,
    FileResult,
    OpencodeImporter,
    export_session,
    get_importer,
    import_paths,
)
from todo_sessions.importers._opencode_read import _js_number, read_db_session

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "importers" / "opencode"
EXPORT_FILE = CORPUS / "export-ses_fixexport00000000000001.json"
MAIN = "opencode-ses_fixmain0000000000000001"
CHILD = "opencode-ses_fixchild000000000000001"
EXPORTED = "opencode-ses_fixexport00000000000001"
PENDING = "msg_fix0010asst000000000010"


def fixture_db(directory: Path) -> Path:
    """The corpus database, built in ``directory`` (WAL mode, as opencode keeps it)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "opencode.db"
    with sqlite3.connect(path) as db:
        db.executescript((CORPUS / "schema.sql").read_text(encoding="utf-8"))
        db.executescript((CORPUS / "sessions.sql").read_text(encoding="utf-8"))
    return path


async def typed(store: SessionStore, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [e.data_copy() for e in await store.read_from(session_id) if e.type == kind]


def texts(message: Any) -> list[str]:
    return [b.text for b in message.content if getattr(b, "type", None) == "text"]


async def imported(store: SessionStore, *paths: Path) -> dict[str, FileResult]:
    results = await import_paths(store, OpencodeImporter(), list(paths))
    return {r.session_id: r for r in results}


async def test_database_mapping_todos_calls_child_compaction(
    store: SessionStore, tmp_path: Path
) -> None:
    db = fixture_db(tmp_path)
    results = await imported(store, tmp_path)  # a directory: its opencode*.db
    assert list(results) == [MAIN, CHILD]  # the parent first
    assert {r.status for r in results.values()} == {"created"}
    main = results[MAIN]
    assert main.lines == 9  # the answer still being written is left for later, reported
    assert [w for w in main.warnings if PENDING in w and "not complete yet" in w] == main.warnings
    assert main.unknown_kinds == {"part/x-newer-part": 6}
    # the todo list: each todowrite a snapshot, the cancelled item dropped from it
    writes = await typed(store, MAIN, "todo/write")
    assert [[(t["content"], t["status"]) for t in w["todos"]] for w in writes] == [
        [
            ("Reproduce the failure", "in_progress"),
            ("Fix the parser", "pending"),
            ("Rewrite the tokenizer", "pending"),
        ],
        [("Reproduce the failure", "completed"), ("Fix the parser", "completed")],
    ]
    # the calls: opencode's own names, its inputs as the arguments
    calls = await typed(store, MAIN, "tool/call")
    assert [(c["name"], json.loads(c["arguments"])) for c in calls][1:4] == [
        (
            "bash",
            {"command": "pytest -q tests/test_parser.py", "description": "Run the parser test"},
        ),
        ("read", {"filePath": "/home/dev/project/missing.py"}),
        (
            "task",
            {
                "description": "Inspect the parser",
                "prompt": "Inspect parser.py and report.",
                "subagent_type": "general",
            },
        ),
    ]
    results_ = {
        r["message"]["source"]["callId"]: r for r in await typed(store, MAIN, "tool/result")
    }
    failed = results_["toolu_03"]["message"]["content"][0]
    assert failed.get("isError") is True
    assert failed["content"][0]["text"] == "File not found: /home/dev/project/missing.py"
    assert results_["toolu_02"]["message"]["content"][0]["content"][0]["text"] == (
        "1 failed, 4 passed\n"
    )
    # messages: the prompt without its synthetic part, reasoning, usage, the model
    steps = await typed(store, MAIN, "assistant/message")
    assert steps[0]["message"]["content"][:2] == [
        {"type": "reasoning", "text": "The test fails on empty input; plan first."},
        {"type": "text", "text": "I'll plan this."},
    ]
    assert steps[0]["usage"]["input"] == 1000
    assert steps[0]["message"]["source"] == {
        "kind": "model",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
    }
    prompts = [m for m in await typed(store, MAIN, "user/message") if m["source"]["kind"] == "user"]
    assert [[b["text"] for b in m["content"]] for m in prompts] == [
        ["Fix the failing test in parser.py"],
        ["Now add a changelog entry."],
    ]
    # the compaction: its summary replaces what came before on the surface
    messages = await store.derive_messages(MAIN)
    assert messages[0].source.kind == "compaction"
    assert texts(messages[0]) == [
        "Summary: the failing parser test was fixed; the todo list is complete."
    ]
    assert texts(messages[-1]) == ["Now add a changelog entry."]
    # the session: title, tags, cwd, metadata; the child under it
    summary = await store.summary(MAIN)
    assert summary.title == "Fix the failing parser test"
    assert "agent:opencode" in summary.tags
    assert summary.metadata["opencode"]["slug"] == "calm-otter"
    assert summary.metadata["opencode"]["cost"] == 0.0123
    child = await store.summary(CHILD)
    assert child.parent == MAIN and "opencode-subagent" in child.tags
    assert next(texts(m) for m in await store.derive_messages(CHILD)) == [
        "Inspect parser.py and report."
    ]
    assert await verify_session(store, CHILD) == []
    # search finds both; the last turn (its answer still being written) is reported open
    hits = await store.search("parser")
    assert {h.session_id for h in hits} >= {MAIN, CHILD}
    assert [p.kind for p in await verify_session(store, MAIN)] == ["interrupted"]
    # the surface as a request in each provider format: the summary, then the open turn
    request = derive_request(await store.read_from(MAIN))
    for fmt in ("openai-chat", "openai-responses", "anthropic"):
        assert request.to_params(fmt, model="m")
    assert db.exists()


async def kept(store: SessionStore, session_id: str) -> list[tuple[str, Any]]:
    """A session's events but its metadata, and its session info without its row."""
    out = []
    for event in await store.read_from(session_id):
        data = event.data_copy()
        if event.type == "opencode/session":
            data.pop("row", None)
        if event.type != "session/meta":
            out.append((event.type, data))
    return out


def file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_reimport_appends_only_what_is_new_and_reads_read_only(tmp_path: Path) -> None:
    db = fixture_db(tmp_path / "data")
    async with SessionStore(f"sqlite:///{tmp_path}/store.db") as store:
        await imported(store, db)
        before = len(await store.read_from(MAIN))
        # opencode keeps writing (each row's time_updated set as it writes): another
        # connection holds an uncommitted write
        writer = sqlite3.connect(db, isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")
        writer.execute(
            "UPDATE message SET data = json_set(data, '$.time.completed', 1760000061900, "
            "'$.finish', 'stop'), time_updated = 1760000061900 WHERE id = ?",
            (PENDING,),
        )
        shas = {p.name: file_sha(p) for p in db.parent.iterdir()}
        again = await imported(store, db)
        assert {r.status for r in again.values()} == {"unchanged"}
        assert [r.warnings for r in again.values()] == [[], []]  # untouched: not read again
        assert {p.name: file_sha(p) for p in db.parent.iterdir()} == shas  # nothing written
        # the write lands: the answer is complete, the session renamed
        writer.execute(
            "UPDATE session SET title = 'Parser fixed', time_updated = 1760000062000 WHERE id = ?",
            (MAIN[9:],),
        )
        writer.execute("COMMIT")
        writer.close()
        grown = await imported(store, db)
        assert [r.status for r in grown.values()] == ["appended", "unchanged"]
        assert grown[MAIN].lines == 1 and grown[MAIN].warnings == []
        added = (await store.read_from(MAIN))[before:]
        kinds = [e.type for e in added]
        assert kinds.count("opencode/message") == 1 and kinds.count("opencode/session") == 1
        assert kinds[-2:] == ["turn/end", "session/meta"]
        assert added[-1].payload["title"] == "Parser fixed"
        assert (await store.summary(MAIN)).title == "Parser fixed"
        assert await verify_session(store, MAIN) == []
        # a message changed after it was imported is reported, not merged
        with sqlite3.connect(db) as db_:
            db_.execute(
                "UPDATE part SET data = json_set(data, '$.text', 'edited'), "
                "time_updated = 1760000070000 WHERE id = ?",
                ("prt_fix0006asst000000000006001",),
            )
        last = await imported(store, db)
        assert last[MAIN].status == "unchanged"
        assert ["msg_fix0006asst000000000006" in w for w in last[MAIN].warnings] == [True]


async def test_export_file_import_and_export_byte_identical(store: SessionStore) -> None:
    results = await imported(store, EXPORT_FILE)
    assert [(r.session_id, r.status, r.lines) for r in results.values()] == [
        (EXPORTED, "created", 2)
    ]
    # an aborted answer: its text, its turn ended as interrupted
    ends = await typed(store, EXPORTED, "turn/end")
    assert [e["reason"] for e in ends] == [{"kind": "interrupted"}]
    messages = await store.derive_messages(EXPORTED)
    assert [texts(m) for m in messages] == [
        ["Explain how the build works."],
        ["The build runs make, which"],
    ]
    assert (await store.summary(EXPORTED)).title == "Explain the build — é, 日本"
    exported = await export_session(store, OpencodeImporter(), EXPORTED)
    assert exported == EXPORT_FILE.read_bytes()
    assert {r.status for r in (await imported(store, EXPORT_FILE)).values()} == {"unchanged"}


async def test_a_message_no_event_can_hold_is_kept_as_text(tmp_path: Path) -> None:
    path = tmp_path / "lone.json"
    text = EXPORT_FILE.read_text(encoding="utf-8")
    path.write_text(text.replace("Explain how", "Explain \\udc80 how"), encoding="utf-8")
    async with SessionStore(f"sqlite:///{tmp_path}/store.db") as store:
        [result] = await import_paths(store, OpencodeImporter(), [path])
        assert (result.status, result.lines) == ("created", 2)
        assert ["msg_fixe001user000000000001 kept as text only" in w for w in result.warnings] == [
            True
        ]
        kinds = [e.type for e in await store.read_from(EXPORTED)]
        assert kinds.count("import/verbatim") == 1 and "user/message" not in kinds
        assert await export_session(store, OpencodeImporter(), EXPORTED) == path.read_bytes()


async def test_database_export_round_trips_through_an_export_file(tmp_path: Path) -> None:
    db = fixture_db(tmp_path / "data")
    async with SessionStore(f"sqlite:///{tmp_path}/a.db") as first:
        await imported(first, db)
        text = await export_session(first, OpencodeImporter(), MAIN)
        snapshot = read_db_session(db, MAIN[9:])
        assert snapshot is not None
        assert json.loads(text) == {"info": snapshot.info, "messages": snapshot.messages[:9]}
        events_first = await kept(first, MAIN)
    path = tmp_path / "exported.json"
    path.write_bytes(text)
    async with SessionStore(f"sqlite:///{tmp_path}/b.db") as second:
        await imported(second, path)
        assert await export_session(second, OpencodeImporter(), MAIN) == text
        # the same events, but for the database row and where they came from
        assert await kept(second, MAIN) == events_first


async def test_errors_conflicts_and_the_registry(tmp_path: Path) -> None:
    not_db = tmp_path / "notes.txt"
    not_db.write_text("hello\n", encoding="utf-8")
    not_export = tmp_path / "other.json"
    not_export.write_text('{"a": 1}\n', encoding="utf-8")
    shutil.copy(EXPORT_FILE, tmp_path / "session.json")
    async with SessionStore(f"sqlite:///{tmp_path}/store.db") as store:
        # given a directory, JSON files that are not exports are not opencode's: left out
        assert [
            r.session_id for r in await import_paths(store, OpencodeImporter(), [tmp_path])
        ] == [EXPORTED]
        for path in (not_db, not_export):
            [result] = await import_paths(store, OpencodeImporter(), [path])
            assert result.status == "error" and str(path) in str(result.message)
        assert await import_paths(store, OpencodeImporter(), [tmp_path / "missing"]) == []
    async with SessionStore(f"sqlite:///{tmp_path}/other.db") as store:
        await store.create(SessionHeader(id=EXPORTED, created_at=0))  # a native session
        turn = {"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}}
        await store.append(EXPORTED, [turn])
        [result] = await import_paths(store, OpencodeImporter(), [EXPORT_FILE])
        assert result.status == "conflict", result.message
        assert [e.type for e in await store.read_from(EXPORTED)] == ["turn/start"]
    assert "opencode" in AGENTS
    assert isinstance(get_importer("opencode"), OpencodeImporter)


@pytest.mark.parametrize(
    ("value", "javascript"),
    [
        (0.1, "0.1"),
        (1e-7, "1e-7"),
        (1.5e16, "15000000000000000"),
        (1e21, "1e+21"),
        (100.0, "100"),
        (0.000001, "0.000001"),
        (-2.5e-8, "-2.5e-8"),
        (0.0123, "0.0123"),
    ],
)
def test_numbers_are_written_as_javascript_writes_them(value: float, javascript: str) -> None:
    assert _js_number(value) == javascript
