"""Hostile input: mutations of valid wire lines and JSONL files.

Whatever the mutation (bit flips, truncation, deep nesting, huge numbers, wrong types, invalid
UTF-8, lone surrogates), only `todo_sessions.errors` types escape `SessionEvent.from_json`,
`validate_event`, `SessionHeader` and the JSONL import; every accepted event round-trips byte
for byte; a rejected file stores nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

from factories import T0, header, turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from todo_sessions import (
    SessionEvent,
    SessionHeader,
    SessionStore,
    TodoSessionsError,
    import_lines,
    parse_lines,
)
from todo_sessions._jsonl import header_line
from todo_sessions.core.catalog import validate_event


def _corpus() -> list[str]:
    calls = {"turn": 1, "step": 2, "callId": "c1", "name": "todo_write", "arguments": "{}"}
    result = {
        "turn": 1,
        "step": 2,
        "message": {
            "id": "r1",
            "role": "user",
            "source": {"kind": "tool", "callId": "c1"},
            "content": [{"type": "tool-result", "toolCallId": "c1", "content": []}],
        },
    }
    extra = [
        SessionEvent("tool/call", 6, T0, calls),
        SessionEvent(
            "tool/result", 7, T0, result, surface_op={"op": "replace", "start": 0, "end": 0}
        ),
        SessionEvent("tool/result", 8, T0, result, surface_op="append", source_event_seqs=[6]),
        SessionEvent("vendor/x", 9, T0, {"n": 2**70, "f": 1.5e-7}, ignorable=True),
    ]
    return [e.to_json() for e in [*turn(0), *extra]]


CORPUS = _corpus()
HEADER = header_line(header("fuzz", cwd="/repo", title="t"))

MUTATIONS = [
    "flip",
    "truncate",
    "nest",
    "huge",
    "retype",
    "surrogate",
    "bytes",
    "duplicate",
]


@st.composite
def mutated(draw: st.DrawFn, line: str) -> str | bytes:
    kind = draw(st.sampled_from(MUTATIONS))
    raw = line.encode()
    at = draw(st.integers(0, max(len(line) - 1, 0)))
    if kind == "flip":
        bit = draw(st.integers(0, 7))
        flipped = bytearray(raw)
        flipped[min(at, len(raw) - 1)] ^= 1 << bit
        data = bytes(flipped)
        return (
            data.decode("utf-8", errors="strict") if draw(st.booleans()) and _utf8(data) else data
        )
    if kind == "truncate":
        return line[:at]
    if kind == "nest":
        depth = draw(st.sampled_from([255, 256, 257, 1000, 5000]))
        return line.replace('"data":', '"data":' + "[" * depth, 1) + "]" * depth
    if kind == "huge":
        digits = draw(st.sampled_from([17, 20, 400, 4300, 4301, 10_000]))
        number = "9" * digits
        target = draw(st.sampled_from(['"seq":', '"time":', '"turn":', '"start":']))
        head, sep, tail = line.partition(target)
        if not sep:
            return line + number
        rest = tail.lstrip("-0123456789")
        return f"{head}{sep}{draw(st.sampled_from(['', '-']))}{number}{rest}"
    if kind == "retype":
        value = draw(
            st.sampled_from(
                [
                    "[]",
                    "{}",
                    '""',
                    "null",
                    "true",
                    "1e999",
                    "-0.0",
                    "NaN",
                    '["x"]',
                    '{"a":1}',
                    "1.5",
                ]
            )
        )
        key = draw(
            st.sampled_from(
                ['"type":', '"seq":', '"time":', '"data":', '"turn":', '"content":', '"surfaceOp":']
            )
        )
        head, sep, tail = line.partition(key)
        if not sep:
            return line
        depth, end = 0, 0
        for i, ch in enumerate(tail):  # the extent of the value after the key
            if ch in "[{":
                depth += 1
            elif ch in "]}":
                if depth == 0:
                    end = i
                    break
                depth -= 1
            elif ch == "," and depth == 0:
                end = i
                break
        return f"{head}{sep}{value}{tail[end:]}"
    if kind == "surrogate":
        return (
            line[:at]
            + draw(st.sampled_from(["\\ud800", "\ud800", "\\udfff", "\\u0000"]))
            + line[at:]
        )
    if kind == "bytes":
        return (
            raw[:at]
            + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"]))
            + raw[at:]
        )
    # duplicate: a key given twice
    return line.replace('{"type":', '{"type":"x","type":', 1)


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@st.composite
def mutated_line(draw: st.DrawFn) -> str | bytes:
    return draw(mutated(draw(st.sampled_from(CORPUS))))


FAST = settings(
    max_examples=2500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FAST
@given(mutated_line())
def test_mutated_event_lines_raise_only_typed_errors(line: str | bytes) -> None:
    try:
        event = SessionEvent.from_json(line)
    except TodoSessionsError:
        return
    text = event.to_json()
    again = SessionEvent.from_json(text)
    assert again == event and again.to_json() == text  # accepted: a byte-exact round trip
    try:
        validate_event(event)
    except TodoSessionsError:
        return


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(HEADER))
def test_mutated_header_lines_raise_only_typed_errors(line: str | bytes) -> None:
    try:
        parsed, events = parse_lines([line, *CORPUS])
    except TodoSessionsError:
        return
    assert isinstance(parsed, SessionHeader)
    assert [e.to_json() for e in events] == CORPUS


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_header_objects_raise_only_typed_errors(data: st.DataObject) -> None:
    wire: dict[str, Any] = json.loads(HEADER)["header"]
    key = data.draw(st.sampled_from([*wire, "unknown"]))
    wire[key] = data.draw(
        st.one_of(
            st.integers(min_value=-(2**80), max_value=2**80),
            st.text(max_size=300),
            st.none(),
            st.booleans(),
            st.floats(allow_nan=True),
            st.lists(st.integers(), max_size=3),
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        )
    )
    try:
        parsed = SessionHeader.model_validate(wire)
    except TodoSessionsError:
        return
    for name in ("created_at", "seed_length", "delegation_depth", "format_version"):
        value = getattr(parsed, name)
        assert value is None or 0 <= value <= 2**53 - 1  # what both backends store


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.data())
def test_a_rejected_file_stores_nothing(tmp_path: Path, data: st.DataObject) -> None:
    lines: list[str | bytes] = [HEADER, *CORPUS]
    at = data.draw(st.integers(0, len(lines) - 1))
    lines[at] = data.draw(mutated(str(lines[at])))
    url = f"sqlite:///{tmp_path}/fuzz.db"

    async def run() -> None:
        async with SessionStore(url) as store:
            before = [(s.id, s.revision) for s in await store.list(limit=1000)]
            try:
                result = await import_lines(store, lines, as_id=f"f{len(before)}")
            except TodoSessionsError:
                assert [(s.id, s.revision) for s in await store.list(limit=1000)] == before
                return
            stored = await store.read_from(result.session_id)
            assert [e.to_json() for e in stored] == [
                SessionEvent.from_json(line).to_json() for line in lines[1:]
            ]

    asyncio.run(run())


# -- deep nesting outside the payload (envelope and header fields) ------------------------------

DEEP_FIELDS = ['"surfaceOp":', '"sourceEventSeqs":', '"title":', '"cwd":', '"type":', '"seq":']


def _nested(line: str, key: str, depth: int, opener: str = "[") -> str:
    closer = "]" if opener == "[" else "}"
    value = (opener if opener == "[" else '{"a":') * depth + "1" + closer * depth
    if key not in line:
        return line[:-1] + f",{key}{value}}}"
    head, _, tail = line.partition(key)
    return f"{head}{key}{value},{tail.split(',', 1)[1] if ',' in tail else '}'}"


def test_deep_nesting_in_envelope_and_header_fields_is_a_typed_error(tmp_path: Path) -> None:
    """Nested far past `MAX_DEPTH` (and past Python's recursion limit) inside ``surfaceOp``,
    ``sourceEventSeqs`` or a header field: a `TodoSessionsError`, never a RecursionError, from
    the wire parser, from Python values, and from the command line's import."""
    from click.testing import CliRunner

    from todo_sessions.cli import main

    deep: Any = 1
    for _ in range(50_000):
        deep = {"a": [deep]}
    payload = {"id": "u", "role": "user", "content": [], "source": {"kind": "user"}}
    for build in (
        lambda: SessionEvent("user/message", 0, T0, payload, surface_op=deep),
        lambda: SessionEvent(
            "user/message",
            0,
            T0,
            payload,
            surface_op={"op": "replace", "start": 0, "end": 0},
            source_event_seqs=[deep],
        ),
        lambda: SessionEvent("user/message", 0, T0, payload, source_event_seqs=deep),
        lambda: SessionHeader(id="x", created_at=T0, title=deep),
        lambda: SessionHeader(id="x", created_at=T0, metadata={"k": deep}),
    ):
        try:
            build()
        except TodoSessionsError as exc:
            assert len(str(exc)) < 2000  # a short message, not the whole value
        else:
            raise AssertionError("accepted a deeply nested value")
    lines = [HEADER, *CORPUS]
    runner = CliRunner()
    for key in DEEP_FIELDS:
        header_field = key in ('"title":', '"cwd":')
        index = 0 if header_field else next((i for i, x in enumerate(lines) if key in x and i), 1)
        for depth in (257, 1000, 100_000):
            for opener in "[{":
                bad = _nested(lines[index], key, depth, opener)
                if not header_field:
                    with contextlib.suppress(TodoSessionsError):
                        SessionEvent.from_json(bad)
                if depth < 100_000:
                    continue
                path = tmp_path / "deep.jsonl"
                path.write_text("\n".join([*lines[:index], bad, *lines[index + 1 :]]) + "\n")
                result = runner.invoke(main, ["--db", str(tmp_path / "d.db"), "import", str(path)])
                assert result.exit_code == 1, (key, depth, result.output[:300])
                assert "unexpected" not in result.stderr and "Recursion" not in result.stderr
                assert len(result.stderr) < 2000
