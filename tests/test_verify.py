"""``verify`` (issue #6): healthy logs pass; each kind of damage is reported by name.

Two layers: `verify_events` over event lists (pure, table-driven), and the ``verify`` command
over databases damaged with raw SQL past the append-only triggers (SQLite file and PostgreSQL).
The command reports every problem, exits 1 when there is any, and changes nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner, Result
from factories import header, in_namespace, raw_sql, tamper
from hypothesis import given, settings
from logs import LogBuilder, build_plan, log_plans
from sqlalchemy import text
from sqlalchemy.engine import Connection

from todo_sessions import SessionEvent, SessionStore
from todo_sessions.cli import main
from todo_sessions.core.verify import Problem, verify_events
from todo_sessions.harness.demo import run_demo

# -- verify_events: pure --------------------------------------------------------------------------


def victim_log() -> LogBuilder:
    """Two closed turns: a plan, a tool step answering ``c1``, a text step."""
    b = LogBuilder()
    b.turn_start()
    b.user("fix it")
    b.todo(("look", "in_progress"))
    b.tool_step("c1")
    b.text_step("done")
    b.turn_end()
    b.exchange("thanks", answer="bye")
    return b


VICTIM = victim_log().events


def seq_of(kind: str, nth: int = 0, events: list[SessionEvent] = VICTIM) -> int:
    return [e.seq for e in events if e.type == kind][nth]


def healthy_logs() -> dict[str, list[SessionEvent]]:
    open_turn = LogBuilder()
    open_turn.exchange("first", "c1")
    open_turn.turn_start()
    open_turn.user("second")
    open_turn.step_start()
    open_turn.assistant(calls=["c2"])
    open_turn.tool_call("c2")  # unanswered, but the turn is still open: not a problem
    compacted = victim_log()
    compacted.turn_start()
    compacted.compact(compacted.surface[0], compacted.surface[-1])
    compacted.turn_end()
    with_seed = victim_log()
    with_seed.end_seed()
    with_seed.add("vendor/telemetry", {"n": 1}, ignorable=True)
    return {
        "victim": VICTIM,
        "open last turn": open_turn.events,
        "compaction": compacted.events,
        "fork seed and ignorable type": with_seed.events,
        "empty": [],
    }


@pytest.mark.parametrize("events", healthy_logs().values(), ids=healthy_logs().keys())
def test_healthy_logs_have_no_problems(events: list[SessionEvent]) -> None:
    assert verify_events(events) == []


@settings(max_examples=60, deadline=None)
@given(log_plans())
def test_generated_logs_have_no_problems(plan: Any) -> None:
    events, _ = build_plan(plan, todo_slots=range(0, 1000, 3))
    assert verify_events(events) == []


def unanswered_call() -> list[SessionEvent]:
    b = LogBuilder()
    b.turn_start()
    b.step_start()
    b.assistant(calls=["c9"])
    b.tool_call("c9")
    b.step_end()
    b.turn_end()
    return b.events


def never_started_call() -> list[SessionEvent]:
    b = LogBuilder()
    b.turn_start()
    b.step_start()
    b.assistant(calls=["c7"])
    b.step_end()
    b.turn_end()
    return b.events


def replace_missing_node() -> list[SessionEvent]:
    b = LogBuilder(validate=False)
    b.turn_start()
    b.user("a")
    replace = {"op": "replace", "start": 77, "end": 77}
    b.add("user/message", b.events[1].data | {"id": "x"}, surface_op=replace, source_event_seqs=[1])
    b.turn_end()
    return b.events


def with_event(events: list[SessionEvent], seq: int, **changes: Any) -> list[SessionEvent]:
    """``events`` with event ``seq`` rebuilt from its wire dict updated with ``changes``."""
    changed = SessionEvent.from_dict(events[seq].to_dict() | changes)
    return [*events[:seq], changed, *events[seq + 1 :]]


EMPTY_TODO = {"todos": [{"content": " ", "status": "pending"}]}

PURE_DAMAGE: list[tuple[str, Callable[[], list[SessionEvent]], list[tuple[str, int, str]]]] = [
    (
        "seq gap (reported once)",
        lambda: VICTIM[:2] + VICTIM[3:],  # the todo/write: no structural consequence
        [("seq", 3, "expected seq 2")],
    ),
    (
        "repeated seq",
        lambda: VICTIM[:6] + VICTIM[5:],
        [("seq", 5, "expected seq 6")],
    ),
    (
        "empty todo content",
        lambda: with_event(VICTIM, seq_of("todo/write"), data=EMPTY_TODO),
        [("payload", seq_of("todo/write"), "content")],
    ),
    (
        "unknown type not ignorable",
        lambda: with_event(VICTIM, seq_of("todo/write"), type="vendor/strict"),
        [("payload", seq_of("todo/write"), "not marked ignorable")],
    ),
    (
        "turn number (reported once)",
        lambda: with_event(VICTIM, 0, data={"turn": 7}),
        [("structure", 0, "turn/start has turn 7, expected 1")],
    ),
    (
        "tool/call outside a step",
        lambda: [e for e in VICTIM if e.seq != seq_of("step/start")],
        [("seq", seq_of("step/start") + 1, "expected seq"), ("structure", 4, "outside")],
    ),
    ("unanswered call", unanswered_call, [("unanswered", 5, "'c9' unanswered")]),
    ("never started call", never_started_call, [("unanswered", 4, "'c7' unanswered")]),
    ("replace of a missing node", replace_missing_node, [("surface", 2, "77")]),
]


@pytest.mark.parametrize(
    ("make", "expected"), [d[1:] for d in PURE_DAMAGE], ids=[d[0] for d in PURE_DAMAGE]
)
def test_each_kind_of_damage_is_named(
    make: Callable[[], list[SessionEvent]], expected: list[tuple[str, int, str]]
) -> None:
    problems = verify_events(make())
    assert [(p.kind, p.seq) for p in problems] == [(kind, seq) for kind, seq, _ in expected]
    for problem, (_, _, fragment) in zip(problems, expected, strict=True):
        assert fragment in problem.message
        assert str(problem).startswith(f"seq {problem.seq}: [{problem.kind}] ")


def test_unreadable_rows_are_not_reported_twice() -> None:
    lost = seq_of("step/start")
    rest = [e for e in VICTIM if e.seq != lost]
    assert verify_events(rest, unreadable={lost}) == []
    assert [p.kind for p in verify_events(rest)] == ["seq", "structure"]
    later = with_event(rest, len(rest) - 1, data={"todos": "x"})  # payload checks go on
    assert later[-1].type == "turn/end"
    assert [p.kind for p in verify_events(later, unreadable={lost})] == ["payload"]


def test_problem_without_seq_prints_plainly() -> None:
    assert str(Problem(None, "corrupt", "header is bad")) == "[corrupt] header is bad"


# -- the verify command over damaged databases ----------------------------------------------------


async def snapshot(store: SessionStore) -> tuple[list[Any], list[Any]]:
    """Every stored row of both tables (to prove verify writes nothing), but the search
    index's mark: verify brings the index up to date first, so it moves the marks as it
    writes the index rows (derived data, revision 0013)."""

    def read(conn: Connection) -> tuple[list[Any], list[Any]]:
        sessions = conn.execute(text(in_namespace(store, "SELECT * FROM sessions ORDER BY id")))
        events = conn.execute(
            text(in_namespace(store, "SELECT * FROM session_events ORDER BY session_id, seq"))
        )
        rows = [
            tuple(v for k, v in r.items() if k != "index_from") for r in sessions.mappings().all()
        ]
        return rows, [tuple(r) for r in events.all()]

    return await raw_sql(store, read)


async def verify(url: str, *args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, main, ["--db", url, "verify", *args])


def _where(seq: int) -> str:
    return f"WHERE session_id = 'victim' AND seq = {seq}"


def _true(store: SessionStore) -> str:
    return "true" if store.dialect == "postgresql" else "1"


STORE_DAMAGE: list[tuple[str, Callable[[SessionStore], str], str, int | None, str]] = [
    (
        "broken JSON row",
        lambda s: f"UPDATE session_events SET data = '{{\"turn\": 1' {_where(3)}",
        "corrupt",
        3,
        "cannot be decoded",
    ),
    (
        "seq gap",
        lambda s: f"DELETE FROM session_events {_where(seq_of('assistant/chunk'))}",
        "corrupt",
        seq_of("assistant/chunk"),
        f"seq {seq_of('assistant/chunk')} is missing",
    ),
    (
        "invalid user/message payload",
        lambda s: f'UPDATE session_events SET data = \'{{"id": "x"}}\' {_where(1)}',
        "payload",
        1,
        "user/message",
    ),
    (
        "todo/write with empty content",
        lambda s: (
            "UPDATE session_events SET data = "
            f'\'{{"todos": [{{"content": "", "status": "pending"}}]}}\' '
            f"{_where(seq_of('todo/write'))}"
        ),
        "corrupt",
        seq_of("todo/write"),
        "stored todo/write is invalid",
    ),
    (
        "turn/start number changed",
        lambda s: f"UPDATE session_events SET data = '{{\"turn\": 7}}' {_where(0)}",
        "structure",
        0,
        "turn/start has turn 7, expected 1",
    ),
    (
        "tool result turned into an ignorable note",
        lambda s: (
            f"UPDATE session_events SET type = 'vendor/note', ignorable = {_true(s)}, "
            f"surface_op = NULL, source_event_seqs = NULL {_where(seq_of('tool/result'))}"
        ),
        "unanswered",
        seq_of("turn/end"),
        "tool call 'c1' unanswered",
    ),
    (
        "unknown type not ignorable",
        lambda s: f"UPDATE session_events SET type = 'vendor/strict' {_where(seq_of('step/end'))}",
        "format",
        seq_of("step/end"),
        "'vendor/strict' (seq",
    ),
    (
        "surface replace of a missing node",
        lambda s: (
            "UPDATE session_events SET surface_op = "
            '\'{"op": "replace", "start": 999, "end": 999}\' '
            f"{_where(seq_of('assistant/message', 1))}"
        ),
        "surface",
        seq_of("assistant/message", 1),
        "999",
    ),
]


@pytest.fixture
async def damaged_db(shared_db_url: str) -> str:
    """A database holding the demo session and the healthy ``victim`` log."""
    async with SessionStore(shared_db_url) as store:
        await run_demo(store, session_id="demo")
        await store.create(header("victim"))
        await store.append("victim", VICTIM)
    return shared_db_url


async def test_verify_passes_before_damage(damaged_db: str) -> None:
    result = await verify(damaged_db)
    assert result.exit_code == 0, result.stdout
    assert "2 session(s) checked, 0 with problems" in result.stdout
    assert json.loads((await verify(damaged_db, "--json")).stdout) == {"demo": [], "victim": []}


@pytest.mark.parametrize(
    ("statement", "kind", "seq", "fragment"),
    [d[1:] for d in STORE_DAMAGE],
    ids=[d[0] for d in STORE_DAMAGE],
)
async def test_verify_names_each_kind_of_damage(
    damaged_db: str,
    statement: Callable[[SessionStore], str],
    kind: str,
    seq: int | None,
    fragment: str,
) -> None:
    async with SessionStore(damaged_db) as store:
        await tamper(store, statement(store))
        before = await snapshot(store)

    one = await verify(damaged_db, "victim", "--json")
    assert one.exit_code == 1
    report = json.loads(one.stdout)
    assert list(report) == ["victim"]
    found = [(p["kind"], p["seq"]) for p in report["victim"] if p["kind"] != "chain"]
    assert found == [(kind, seq)], report
    assert fragment in report["victim"][0]["message"]
    # and the row written past the triggers breaks the hash chain, at or before that seq
    chain = [p["seq"] for p in report["victim"] if p["kind"] == "chain"]
    assert len(chain) == 1 and chain[0] <= (seq if seq is not None else chain[0]), report

    every = await verify(damaged_db)
    assert every.exit_code == 1
    assert "✓ demo" in every.stdout
    assert "✗ victim: 2 problem(s)" in every.stdout
    assert f"seq {seq}: [{kind}] " in every.stdout and fragment in every.stdout
    assert "2 session(s) checked, 1 with problems" in every.stdout
    assert "Traceback" not in every.stdout + every.stderr

    async with SessionStore(damaged_db) as store:
        assert await snapshot(store) == before  # verify changed nothing


async def test_verify_reads_on_past_bad_rows(damaged_db: str) -> None:
    """Several damaged rows in one session: every one is reported, in seq order."""
    chunk, second_user = seq_of("assistant/chunk"), seq_of("user/message", 1)
    async with SessionStore(damaged_db) as store:
        await tamper(store, f"UPDATE session_events SET data = 'nope' {_where(1)}")
        await tamper(store, f"DELETE FROM session_events {_where(chunk)}")
        await tamper(store, f"UPDATE session_events SET type = 'vendor/x' {_where(chunk + 1)}")
        await tamper(store, f"UPDATE session_events SET data = '[]' {_where(second_user)}")
    result = await verify(damaged_db, "victim", "--json")
    assert result.exit_code == 1
    problems = json.loads(result.stdout)["victim"]
    assert [(p["kind"], p["seq"]) for p in problems] == [
        ("corrupt", 1),
        ("corrupt", chunk),
        ("format", chunk + 1),
        ("payload", second_user),
        ("chain", 1),  # the first row rewritten past the triggers
    ]


async def test_verify_reports_a_newer_format_without_reading_on(damaged_db: str) -> None:
    async with SessionStore(damaged_db) as store:
        await tamper(store, "UPDATE sessions SET format_version = 99 WHERE id = 'victim'")
    result = await verify(damaged_db, "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["demo"] == []
    ((problem),) = report["victim"]
    assert problem["kind"] == "format" and problem["seq"] is None
    assert "newer version" in problem["message"]


async def test_verify_unknown_id_is_one_line(damaged_db: str) -> None:
    result = await verify(damaged_db, "nope")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == ["error: session 'nope' not found"]


async def test_a_replace_cutting_a_call_from_its_result_is_a_warning(shared_db_url: str) -> None:
    """A surface replace that cuts a tool call from its result is valid (the reference accepts
    it, import stores it) but reported: `verify` prints it as a warning and exits 0."""
    b = LogBuilder()
    b.exchange("one", "c1")
    b.exchange("two")
    cut = b.compact(b.surface[0], b.surface[1])  # the prompt and the call, not the result
    async with SessionStore(shared_db_url) as store:
        await store.create(header("cut"))
        await store.append("cut", b.events)
    result = await verify(shared_db_url)
    assert result.exit_code == 0, result.stdout
    assert "! cut: 1 warning(s)" in result.stdout
    assert f"seq {cut.seq}: [surface, warning]" in result.stdout
    assert "1 session(s) checked, 0 with problems" in result.stdout
    found = json.loads((await verify(shared_db_url, "--json")).stdout)["cut"]
    assert [(p["seq"], p["kind"], p.get("warning")) for p in found] == [(cut.seq, "surface", True)]
