"""Importing files as agents write them: a file that grows between imports, a last line cut
short (an agent killed mid-write, or still writing), a malformed line, an entry kind from a
newer version, a line whose bytes only the verbatim record reproduces, a file rewritten since
its import, a file in no agent's format, a session this importer did not create."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from todo_sessions import SessionStore
from todo_sessions.core.header import SessionHeader
from todo_sessions.importers import (
    VERBATIM_TYPE,
    CodexImporter,
    SourceFile,
    export_session,
    import_file,
    import_paths,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"
MAIN = next((FIXTURES / "codex" / "sessions").rglob("rollout-*0199d0a4*.jsonl"))
SESSION = "codex-0199d0a4-7b1e-7c30-9f2a-3c4d5e6f7a8b"
CODEX = CodexImporter()


@pytest.fixture
def rollout(tmp_path: Path) -> Path:
    copy = tmp_path / MAIN.name
    shutil.copy(MAIN, copy)
    return copy


def lines_of(path: Path) -> list[bytes]:
    return read(path).splitlines(keepends=True)


def write(path: Path, content: bytes) -> None:
    """What the agent does to its file (a plain function: the tests' own blocking I/O)."""
    path.write_bytes(content)


def read(path: Path) -> bytes:
    return path.read_bytes()


async def once(store: SessionStore, path: Path) -> object:
    [result] = await import_paths(store, CODEX, [path])
    return result


async def test_growth_between_imports_appends_only_the_new_lines(rollout: Path) -> None:
    whole = lines_of(rollout)
    async with SessionStore("sqlite://") as store, SessionStore("sqlite://") as direct:
        prior = 0
        for cut in (5, 9, 14, len(whole)):
            write(rollout, b"".join(whole[:cut]))
            result = await once(store, rollout)
            assert (result.status, result.lines) == (
                "appended" if prior else "created",
                cut - prior,
            )
            prior = cut
            assert await export_session(store, CODEX, SESSION) == read(rollout)
        await once(direct, rollout)
        grown, whole_import = await store.read_from(SESSION), await direct.read_from(SESSION)
        typed = [(e.type, e.data_copy()) for e in grown if e.type not in ("session/meta",)]
        expected = [(e.type, e.data_copy()) for e in whole_import if e.type != "session/meta"]
        assert [t for t, _ in typed] == [t for t, _ in expected]
        assert await store.current_todos(SESSION) == await direct.current_todos(SESSION)
        assert await store.derive_messages(SESSION) == await direct.derive_messages(SESSION)


async def test_a_last_line_without_newline_waits_with_a_warning(rollout: Path) -> None:
    whole = lines_of(rollout)
    cut = whole[-1][:25]  # killed mid-write
    write(rollout, b"".join(whole[:-1]) + cut)
    async with SessionStore("sqlite://") as store:
        result = await once(store, rollout)
        assert result.status == "created"
        assert result.lines == len(whole) - 1
        assert result.warnings == [
            f"{rollout}:{len(whole)}: skipped for now: the last line has no newline yet "
            "(still being written, or cut short)"
        ]
        assert await export_session(store, CODEX, SESSION) == b"".join(whole[:-1])
        # the agent finishes the line: the next import takes exactly it
        write(rollout, b"".join(whole))
        result = await once(store, rollout)
        assert (result.status, result.lines, result.warnings) == ("appended", 1, [])
        assert await export_session(store, CODEX, SESSION) == read(rollout)


async def test_malformed_lines_are_skipped_with_file_and_line(rollout: Path) -> None:
    whole = lines_of(rollout)
    bad = [b"{not json\n", b"[1, 2]\n", b'{"type": "no payload"}\n', b"\xff\xfe\n"]
    write(rollout, b"".join(whole[:3] + bad + whole[3:]))
    async with SessionStore("sqlite://") as store:
        result = await once(store, rollout)
        assert result.status == "created"
        assert result.lines == len(whole)
        assert [w.split(": skipped: ")[0] for w in result.warnings] == [
            f"{rollout}:{n}" for n in (4, 5, 6, 7)
        ]
        assert "not JSON" in result.warnings[0] and "not UTF-8" in result.warnings[3]
        assert await export_session(store, CODEX, SESSION) == b"".join(whole)
        assert (await once(store, rollout)).warnings == []  # reported once, not every import


async def test_an_unknown_entry_kind_is_kept_whole_and_reported(rollout: Path) -> None:
    newer = {"timestamp": "2025-10-11T09:00:12.000Z", "type": "hologram_state", "payload": {"x": 1}}
    item = {"timestamp": "2025-10-11T09:00:12.000Z", "type": "response_item"}
    item["payload"] = {"type": "hologram_call", "call_id": "h1"}
    with rollout.open("a", encoding="utf-8") as handle:
        for line in (newer, item):
            handle.write(json.dumps(line, separators=(",", ":")) + "\n")
    count = len(lines_of(rollout))
    async with SessionStore("sqlite://") as store:
        result = await once(store, rollout)
        assert result.unknown_kinds == {
            "hologram_state": count - 1,
            "response_item/hologram_call": count,
        }
        assert result.warnings == []
        kept = [e for e in await store.read_from(SESSION) if e.type == "codex/entry"]
        assert kept[-2].data_copy() == newer and kept[-2].ignorable
        assert await export_session(store, CODEX, SESSION) == read(rollout)


async def test_lines_json_dumps_cannot_reproduce_are_kept_verbatim(rollout: Path) -> None:
    spaced = b'{"timestamp": "2025-10-11T09:00:12.000Z", "type": "event_msg", "payload": '
    spaced += b'{"type": "agent_message", "message": "caf\\u00e9 \\/ 1e5", "n": 1.50}}\r\n'
    write(rollout, read(rollout) + spaced)
    async with SessionStore("sqlite://") as store:
        await once(store, rollout)
        events = await store.read_from(SESSION)
        verbatim = [e for e in events if e.type == VERBATIM_TYPE]
        assert [e.data_copy()["line"] for e in verbatim] == [spaced[:-1].decode()]
        assert await export_session(store, CODEX, SESSION) == read(rollout)


async def test_a_rewritten_file_is_reported_not_merged(rollout: Path) -> None:
    async with SessionStore("sqlite://") as store:
        await once(store, rollout)
        before = (await store.summary(SESSION)).next_seq
        whole = lines_of(rollout)
        for changed in (
            whole[0].replace(b"0.46.0", b"0.47.0") + b"".join(whole[1:]),  # edited in place
            b"".join(whole[:5]),  # truncated
        ):
            write(rollout, changed)
            result = await once(store, rollout)
            assert result.status == "rewritten"
            assert str(rollout) in (result.message or "")
            assert (await store.summary(SESSION)).next_seq == before


async def test_a_file_in_no_agent_format_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "rollout-notes.jsonl"
    path.write_text('hello\n{"role": "user"}\n', encoding="utf-8")
    async with SessionStore("sqlite://") as store:
        result = await once(store, path)
        assert result.status == "error"
        assert result.message == f"{path}: no line in the codex format"
        assert len(result.warnings) == 2
        assert await store.list() == []


async def test_a_session_not_imported_from_a_file_is_left_alone(rollout: Path) -> None:
    async with SessionStore("sqlite://") as store:
        await store.create(SessionHeader(id=SESSION, created_at=0))
        await store.append(
            SESSION, [{"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}}]
        )
        result = await import_file(store, CODEX, SourceFile(rollout, SESSION))
        assert result.status == "conflict"
        assert (await store.summary(SESSION)).next_seq == 1


async def test_a_claude_transcript_growing_with_a_cut_line_and_a_new_kind(tmp_path: Path) -> None:
    pytest.importorskip("claude_agent_sdk")
    from todo_sessions.importers.claude_code import ClaudeCodeImporter

    claude = ClaudeCodeImporter()
    source = next((FIXTURES / "claude-code" / "projects").glob("*/*.jsonl"))
    path = tmp_path / "projects" / source.parent.name / source.name
    path.parent.mkdir(parents=True)
    whole = lines_of(source)
    newer = b'{"type":"hologram","uuid":"h1","sessionId":"s"}\n'
    steps = [b"".join(whole[:4]) + whole[4][:40], b"".join(whole[:9]), b"".join(whole) + newer]
    async with SessionStore("sqlite://") as store:
        results = []
        for content in steps:
            path.write_bytes(content)
            [result] = await import_paths(store, claude, [path.parent.parent])
            results.append(result)
        assert [(r.status, r.lines) for r in results] == [
            ("created", 4),
            ("appended", 5),
            ("appended", len(whole) - 9 + 1),
        ]
        assert results[0].warnings == [
            f"{path}:5: skipped for now: the last line has no newline yet "
            "(still being written, or cut short)"
        ]
        assert results[2].unknown_kinds == {"hologram": len(whole) + 1}
        session = results[0].session_id
        assert await export_session(store, claude, session) == read(path)
        todos = await store.current_todos(session)
        assert [t.status for t in todos or []] == ["completed", "completed"]


async def test_lines_no_event_can_hold_are_kept_as_text_only(rollout: Path) -> None:
    odd = [
        b'{"timestamp":"t","type":"event_msg","payload":{"type":"agent_message","message":"\\ud800"}}\n',
        b'{"timestamp":"t","type":"event_msg","payload":{"type":"x","n":-0.0}}\n',
        b'{"timestamp":"t","type":"event_msg","payload":{"type":"x","n":NaN}}\n',
        b'{"timestamp":"t","type":"event_msg","payload":{"type":"thread_name_updated",'
        b'"thread_name":"a\\u0000b"}}\n',
    ]
    whole = lines_of(rollout)
    write(rollout, b"".join(whole[:2] + odd + whole[2:]))
    async with SessionStore("sqlite://") as store:
        result = await once(store, rollout)
        assert (result.status, result.lines) == ("created", len(whole) + 4)
        assert [w.split(": kept as text only: ")[0] for w in result.warnings] == [
            f"{rollout}:{n}" for n in (3, 4, 5)
        ]
        alone = [
            e.data_copy()
            for e in await store.read_from(SESSION)
            if e.type == VERBATIM_TYPE and e.data_copy().get("alone")
        ]
        assert [a["line"].encode() + b"\n" for a in alone] == odd[:3]
        assert (await store.summary(SESSION)).title == "ab"
        assert await export_session(store, CODEX, SESSION) == read(rollout)
        assert (await once(store, rollout)).status == "unchanged"


async def test_a_file_that_cannot_be_read_is_an_error(tmp_path: Path) -> None:
    gone = tmp_path / "rollout-2025-10-11T09-00-00-gone.jsonl"  # vanished after discovery
    async with SessionStore("sqlite://") as store:
        result = await import_file(store, CODEX, SourceFile(gone, "codex-gone"))
        assert (result.status, result.message) == ("error", f"{gone}: No such file or directory")
        assert await store.list() == []


async def test_a_line_over_the_limit_is_skipped_with_a_warning(rollout: Path) -> None:
    whole = lines_of(rollout)
    long_line = max(range(len(whole)), key=lambda i: len(whole[i]))
    limit = len(whole[long_line]) - 2  # the newline aside, one byte short
    async with SessionStore("sqlite://") as store:
        [result] = await import_paths(store, CODEX, [rollout], max_line_bytes=limit)
        assert result.warnings == [
            f"{rollout}:{long_line + 1}: skipped: longer than {limit:,} bytes ({limit + 1:,})"
        ]
        expected = b"".join(line for i, line in enumerate(whole) if i != long_line)
        assert await export_session(store, CODEX, SESSION) == expected


async def test_a_new_or_unchanged_file_is_imported_without_reading_the_log(
    rollout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's session ids are listed once and a session's position is in its summary:
    neither a new session nor a file with nothing new since reads the session's log; a file
    that grew does (its state continues the log's)."""
    whole = lines_of(rollout)
    write(rollout, b"".join(whole[:9]))
    async with SessionStore("sqlite://") as store:
        reads: list[str] = []
        real = store.read_from

        async def counted(session_id: str, *args: object, **kwargs: object) -> object:
            reads.append(session_id)
            return await real(session_id, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(store, "read_from", counted)
        assert (await once(store, rollout)).status == "created"  # type: ignore[attr-defined]
        assert (await once(store, rollout)).status == "unchanged"  # type: ignore[attr-defined]
        assert reads == []
        write(rollout, b"".join(whole))
        assert (await once(store, rollout)).status == "appended"  # type: ignore[attr-defined]
        assert reads == [SESSION]
        assert await export_session(store, CODEX, SESSION) == read(MAIN)
