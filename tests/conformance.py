"""Running todo-sessions over the conformance corpus (``tests/conformance/corpus/``, read
through `tests.conformance_files`): what we give for each log, on the corpus's own vocabulary,
and the comparison its README describes, for logs and spec cases. `tests/test_conformance.py`
asserts on it; run this module to list every difference (``python -m tests.conformance``).

`reference_invariants_problem` restates, in our words, the structure rules the reference checks
in its dev mode (from reading its ``invariant.ts``): our crash-repair closers must pass them.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from tests.conformance_files import CORPUS, read_bytes, stored_files
from todo_sessions import InvalidEventError, Session, SessionEvent, StructureError
from todo_sessions.acp.mapping import todos_to_plan, update_to_wire
from todo_sessions.core.catalog import validate_event
from todo_sessions.core.header import SessionHeader
from todo_sessions.core.repair import interrupted_turn_closers
from todo_sessions.core.surface import fold_surface

__all__ = [
    "CORPUS",
    "Difference",
    "classify",
    "compare_log",
    "corpus_available",
    "judged",
    "logs",
    "normal",
    "reference",
]

SESSION_ID = "conf"


def corpus_available() -> bool:
    return "logs.jsonl" in stored_files(CORPUS) if CORPUS.is_dir() else False


def _rows(name: str) -> Iterator[dict[str, Any]]:
    # (split at "\n" only: str.splitlines would also split at a U+2028 inside a string)
    for line in read_bytes(name).decode("utf-8").split("\n"):
        if line.strip():
            yield json.loads(line)


@cache
def logs() -> tuple[dict[str, Any], ...]:
    return tuple(_rows("logs.jsonl"))


@cache
def _by_id() -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in logs()}


@cache
def reference() -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in _rows("reference.jsonl")}


@cache
def judged() -> frozenset[tuple[str, str]]:
    """``(id, kind)`` of every judged difference: what a comparison skips."""
    return frozenset((row["id"], row["kind"]) for row in _rows("judged.jsonl"))


@cache
def spec_cases() -> tuple[dict[str, Any], ...]:
    return tuple(_rows("spec_cases.jsonl"))


def normal(value: Any) -> Any:
    """The corpus's normalisation: integral floats as ints (key order is ignored by ``==``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normal(v) for v in value]
    return value


# -- our verdicts, on the corpus's codes ------------------------------------------------------

_SURFACE_CODES = (
    ("requires a surfaceOp", "surface:op-missing"),
    ("surfaceOp must be", "surface:op-invalid"),
    ("invalid surfaceOp", "surface:op-invalid"),
    ("may not carry", "surface:not-eligible"),
    ("start seq", "surface:start-missing"),
    ("end seq", "surface:end-missing"),
    ("comes after end seq", "surface:reversed"),
    ("must cite every node", "surface:missing-cite"),
    ("tool/result surface replacement", "surface:tool-rewrite"),
)


def classify(exc: Exception) -> str:
    """Our error on the corpus's vocabulary of reasons (README, "Codes")."""
    text = str(exc)
    if isinstance(exc, StructureError):
        return f"structure:{exc.rule}"
    if not isinstance(exc, InvalidEventError):
        return f"other:{type(exc).__name__}"
    fld = exc.field or ""
    if "is not valid lossless JSON" in text or "not JSON" in text:
        return "json"
    if "not registered" in text:
        return "unknown-type"
    if fld == "surfaceOp" or (fld == "data" and "surface replacement" in text):
        if "comes after end seq" in text:
            return "surface:reversed"
        for needle, code in _SURFACE_CODES:
            if needle in text:
                return code
        return "surface:other"
    if fld == "sourceEventSeqs":
        if "must cite every node" in text:
            return "surface:missing-cite"
        if "may not carry" in text:
            return "surface:not-eligible"
        for needle, code in (
            ("unique", "sources:dup"),
            ("smaller than", "sources:not-earlier"),
            ("not be empty", "sources:empty"),
        ):
            if needle in text:
                return code
        return "sources:invalid"
    if fld == "seq" and "expected" in text:
        return "seq"
    if "missing required key" in text:
        return "envelope"
    if fld in ("type", "seq", "time", "ignorable") or fld.startswith("[") or not fld:
        return "envelope"
    if fld == "data" and "losslessly" in text:
        return "json"
    if fld.startswith("data.todos") or exc.event_type == "todo/write":
        return _todo_code(text)
    if fld.startswith("data"):
        kind = exc.event_type or ""
        if kind in ("user/message", "assistant/message", "tool/result"):
            return "payload:message"
        if kind.startswith("request/"):
            return "payload:request"
        if kind in ("turn/start", "turn/end", "step/start", "step/end"):
            return "payload:turn"
        return "payload:other"
    return "envelope"


def _todo_code(text: str) -> str:
    for needle, code in (
        ("valid list", "todo:not-list"),
        ("valid dictionary", "todo:item"),
        ("content: Input should be a valid string", "todo:content"),
        ("must be a list", "todo:not-list"),
        ("duplicate", "todo:dup"),
        ("status", "todo:status"),
        ("empty", "todo:content"),
        ("content", "todo:content"),
        ("extra", "todo:extra-key"),
        ("unknown key", "todo:extra-key"),
    ):
        if needle in text:
            return code
    return "todo:item"


@dataclass
class Verdict:
    ok: bool
    code: str = "ok"
    index: int | None = None
    error: str = ""


def _index(exc: Exception) -> int | None:
    seq = getattr(exc, "seq", None)
    return seq if type(seq) is int else None


def parse_log(row: Mapping[str, Any]) -> tuple[list[SessionEvent] | None, Verdict]:
    lines = row.get("lines") or [
        json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in row["events"]
    ]
    events: list[SessionEvent] = []
    for position, line in enumerate(lines):
        try:
            events.append(SessionEvent.from_json(line))
        except InvalidEventError as exc:
            index = _index(exc)
            return None, Verdict(
                False, classify(exc), position if index is None else index, str(exc)
            )
    return events, Verdict(True)


def _header() -> SessionHeader:
    return SessionHeader(id=SESSION_ID, created_at=0)


def load(events: Sequence[SessionEvent], *, strict: bool) -> tuple[Session | None, Verdict]:
    try:
        return Session(_header(), events, strict=strict), Verdict(True)
    except (InvalidEventError, StructureError) as exc:
        return None, Verdict(False, classify(exc), _index(exc), str(exc))


# -- the reference's dev-mode structure rules, restated ---------------------------------------


class _ReferenceTrace:
    """The turn/step state the reference's dev mode keeps (our reading of ``invariant.ts``)."""

    def __init__(self) -> None:
        self.open_turn: Any = None
        self.open_step: Any = None
        self.next_turn = 1
        self.next_step = 1
        self.pending: set[Any] = set()

    def in_step(self, data: Mapping[str, Any]) -> bool:
        return self.open_turn == data.get("turn") and self.open_step == data.get("step")

    def problem(self, event: SessionEvent) -> str | None:
        data = event.data if isinstance(event.data, Mapping) else {}
        kind, where = event.type, f"{event.type} at seq {event.seq}"
        if kind == "turn/start":
            bad = self.open_turn is not None or data.get("turn") != self.next_turn
            self.open_turn, self.next_step = data.get("turn"), 1
            return where if bad else None
        if kind == "turn/end":
            bad = self.open_turn != data.get("turn") or self.open_step is not None
            self.open_turn = None
            self.next_turn += 1
            return where if bad else None
        if kind == "step/start":
            bad = self.open_turn != data.get("turn") or self.open_step is not None
            bad = bad or data.get("step") != self.next_step
            self.open_step = data.get("step")
            return where if bad else None
        if kind == "step/end":
            bad = not self.in_step(data)
            self.pending.clear()
            self.open_step = None
            self.next_step += 1
            return where if bad else None
        if kind in ("assistant/chunk", "assistant/message", "tool/call"):
            if kind == "tool/call":
                self.pending.add(data.get("callId"))
            return None if self.in_step(data) else f"{where} outside its step"
        if kind == "tool/result":
            return self._result(event, data, where)
        if kind in ("todo/write", "request/header", "request/context") and self.open_turn is None:
            return f"{where} outside any turn"
        return None

    def _result(self, event: SessionEvent, data: Mapping[str, Any], where: str) -> str | None:
        if event.surface_op != "append":
            return f"{where}: a rewrite outside any turn" if self.open_turn is None else None
        if not self.in_step(data):
            return f"{where} outside its step"
        message = data.get("message", {})
        call_id = message.get("source", {}).get("callId")
        block = (message.get("content") or [{}])[0]
        synthetic = (
            block.get("isError") is True
            and (data.get("error") or {}).get("code") == "TOOL_NOT_STARTED"
        )
        known = call_id in self.pending
        self.pending.discard(call_id)
        return None if known or synthetic else f"{where}: no tool/call {call_id} in its step"


def reference_invariants_problem(events: Iterable[SessionEvent]) -> str | None:
    """Why the reference's dev-mode turn/step rules refuse a log, or None: results need the
    open step and a call pending in it, ``step/end`` forgets pending calls, a rewrite needs
    only an open turn."""
    trace = _ReferenceTrace()
    for event in events:
        problem = trace.problem(event)
        if problem:
            return problem
    return None


# -- comparing one log -------------------------------------------------------------------------


@dataclass
class Difference:
    id: str
    kind: str
    detail: str


@dataclass
class Outcome:
    raw: Verdict
    strict: Verdict | None = None
    repaired: Verdict | None = None
    values: dict[str, Any] = field(default_factory=dict)
    closers: list[SessionEvent] = field(default_factory=list)


_REPAIR_ID = re.compile(r"(^interrupted-tool-result-|:repair:\d+$)")


def _mask(messages: list[Any]) -> list[Any]:
    masked = []
    for message in messages:
        if isinstance(message, dict) and _REPAIR_ID.search(str(message.get("id", ""))):
            message = json.loads(json.dumps(message))
            message["id"] = "<repair>"
            for block in message.get("content", []):
                for inner in block.get("content", []) if isinstance(block, dict) else []:
                    if isinstance(inner, dict) and inner.get("type") == "text":
                        inner["text"] = "<repair text>"
        masked.append(message)
    return masked


def _messages(session: Session) -> list[Any]:
    return normal([m.to_wire() for m in session.derive_messages()])


def _todos(items: Sequence[Any] | None) -> Any:
    return None if items is None else [normal(i.model_dump()) for i in items]


def _closer_shape(event: SessionEvent) -> dict[str, Any]:
    wire = event.to_dict()
    shape: dict[str, Any] = {
        "type": event.type,
        "seq": event.seq,
        "time": event.time,
        "surfaceOp": wire.get("surfaceOp"),
        "sourceEventSeqs": wire.get("sourceEventSeqs"),
    }
    data = wire["data"]
    if event.type == "tool/result":
        message = data["message"]
        block = message["content"][0]
        shape.update(
            turn=data["turn"],
            step=data["step"],
            error=data.get("error"),
            role=message["role"],
            source=message["source"],
            blockType=block["type"],
            toolCallId=block["toolCallId"],
            isError=block.get("isError"),
            innerTypes=[b["type"] for b in block["content"]],
        )
    else:
        shape["data"] = data
    return normal(shape)


def ours(row: Mapping[str, Any]) -> Outcome:
    """Our outcome for one log (computed once per log and process)."""
    return _ours(row["id"])


@cache
def _ours(log_id: str) -> Outcome:
    row = _by_id()[log_id]
    events, verdict = parse_log(row)
    if events is None:
        return Outcome(verdict)
    session, raw = load(events, strict=False)
    outcome = Outcome(raw)
    if session is None:
        return outcome
    outcome.strict = load(events, strict=True)[1]
    closers = interrupted_turn_closers(events, session_id=SESSION_ID)
    outcome.closers = closers
    repaired_session, outcome.repaired = load([*events, *closers], strict=False)
    fold = fold_surface(events)
    todos = session.todos
    outcome.values = {
        "messages": _messages(session),
        "fold": {
            "nodes": list(fold.seqs),
            "replacements": [
                {"seq": r.seq, "start": r.start, "end": r.end, "removed": list(r.removed)}
                for r in fold.replacements
            ],
        },
        "todos": _todos(todos),
        "standing": _todos(session.standing_plan),
        "plan": None if todos is None else normal(update_to_wire(todos_to_plan(todos))),
        "closers": [_closer_shape(c) for c in closers],
        "repairedMessages": _mask(_messages(repaired_session)) if repaired_session else None,
    }
    return outcome


def _same_reason(ref: Mapping[str, Any], mine: Verdict) -> tuple[bool, bool]:
    """(same code, same index) of two refusals."""
    same_code = ref.get("code") == mine.code
    same_index = ref.get("code") == "seq" or ref.get("index") == mine.index
    return same_code, same_index


def compare_log(row: Mapping[str, Any]) -> list[Difference]:
    """Every difference of one log, by the README's table (judged ones included)."""
    ref = reference()[row["id"]]
    mine = ours(row)
    found: list[Difference] = []

    def differ(kind: str, detail: str) -> None:
        found.append(Difference(row["id"], kind, detail))

    raw = ref["raw"]
    if raw["ok"] != mine.raw.ok:
        strict = ref["strict"]
        devmode = (
            raw["ok"]
            and not strict["ok"]
            and (strict.get("code") == mine.raw.code or strict.get("index") == mine.raw.index)
        )
        kind = "accept-raw-devmode" if devmode else "accept-raw"
        differ(kind, f"ts={raw['code']} py={mine.raw.code}: {mine.raw.error or raw.get('error')}")
        return found
    if not raw["ok"]:
        _compare_reasons("raw", raw, mine.raw, differ)
        return found
    for name, verdict in (("strict", mine.strict), ("repaired", mine.repaired)):
        assert verdict is not None
        theirs = ref[name]
        if theirs["ok"] != verdict.ok:
            differ(
                f"accept-{name}",
                f"ts={theirs['code']} py={verdict.code}: {verdict.error or theirs.get('error')}",
            )
        elif not verdict.ok:
            _compare_reasons(name, theirs, verdict, differ)
    values = mine.values
    for name in ("messages", "fold", "todos"):
        if normal(ref[name]) != values[name]:
            differ(name, _first_difference(normal(ref[name]), values[name]))
    if normal(ref["todos"]) == values["todos"]:
        for name in ("standing", "plan"):
            if normal(ref[name]) != values[name]:
                differ(name, _first_difference(normal(ref[name]), values[name]))
    if normal(ref["closers"]) != values["closers"]:
        differ("closers", _first_difference(normal(ref["closers"]), values["closers"]))
    if mine.closers:
        problem = None
        if ref["strict"]["ok"]:
            events = parse_log(row)[0] or []
            problem = reference_invariants_problem([*events, *mine.closers])
        if problem:
            differ("repair-cross", f"the reference's invariants refuse our closers: {problem}")
    if ref["closerEvents"] and mine.closers:
        events = parse_log(row)[0] or []
        if load([*events, *mine.closers], strict=True)[1].ok:
            theirs = parse_log({"events": ref["closerEvents"]})[0] or []
            verdict = load([*events, *theirs], strict=True)[1]
            if not verdict.ok:
                differ("repair-cross", f"we refuse the reference's closers: {verdict.error}")
    if normal(ref["messages"]) == values["messages"]:
        theirs = _mask(normal(ref.get("repairedMessages", ref["messages"])))
        if theirs != values["repairedMessages"]:
            differ("repaired-messages", _first_difference(theirs, values["repairedMessages"]))
    return found


def _compare_reasons(name: str, theirs: Mapping[str, Any], mine: Verdict, differ: Any) -> None:
    same_code, same_index = _same_reason(theirs, mine)
    if not same_code:
        differ(f"reason-{name}", f"ts={theirs['code']} py={mine.code}: {mine.error}")
    elif not same_index:
        differ(f"where-{name}", f"ts={theirs.get('index')} py={mine.index}: {mine.error}")


def _first_difference(a: Any, b: Any, path: str = "$") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b or a[key] != b[key]:
                return _first_difference(a.get(key), b.get(key), f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}[len {len(a)}!={len(b)}]"
        for x, y in zip(a, b, strict=True):
            if x != y:
                return _first_difference(x, y, f"{path}[]")
    return f"{path}: ts={json.dumps(a)[:200]} py={json.dumps(b)[:200]}"


def unjudged_differences() -> list[Difference]:
    skip = judged()
    return [d for row in logs() for d in compare_log(row) if (d.id, d.kind) not in skip]


# -- spec cases --------------------------------------------------------------------------------

SPEC_DELIBERATE = frozenset(
    {
        # README, "Spec cases where todo-sessions deliberately differs"
        "surface:sources-reject-a-non-contiguous-event-seq",
        "repair:closed-step",
        "repair:orphan-call",
        "repair:not-started",
        "invariant:end-seed-inside",
        "invariant:end-seed-then-end",
        "todo:append",
        "todo:parallel",
        "todo:present-call",
        "todo:rejects-unknown-item-keys",
        "wording:model-visible-error",
        "wording:duplicate-before-empty",
        "todoinv:reject-5",
        # judged as the reference's quirks, or cosmetic
        "session:plugin-null-data",
        "invariant:plugin-marker",
        "session:append-dense-arrays",
        "wording:unknown-root-key",
        "surface:toolrewrite-block-toolCallId",
        "invariant:end-seed-then-turn",
        "invariant:result-outside-step",
        "invariant:later-step",
    }
)
"""Spec cases a test skips (the README's list; ``jsonl:python-default-export-into-ts`` is
compared all the same: what `compare_jsonl_exchange` looks at agrees)."""

SPEC_OPS = frozenset(
    {
        "fold",
        "seed",
        "append",
        "validate",
        "analyse",
        "plan",
        "todo_write",
        "present_call",
        "repair",
        "jsonl_exchange",
    }
)
"""The ops `compare_spec_case` compares (``jsonl_exchange``, where the reference asserts
nothing, on what the files hold; tests/test_reference_jsonl.py also writes them byte for
byte through the store)."""


def _events_of(job: Mapping[str, Any]) -> tuple[list[SessionEvent] | None, Verdict]:
    return parse_log({"events": job["events"]})


def compare_spec_case(case: Mapping[str, Any]) -> list[str]:
    """What differs between us and the reference on one spec case (empty: agreement)."""
    op, job, ref = case["op"], case["job"], case["reference"]
    if op == "todo_write":
        return compare_todo_write(case)
    if op == "present_call":
        return compare_present_call(case)
    if op == "repair":
        return compare_repair(case)
    if op == "jsonl_exchange":
        return compare_jsonl_exchange(case)
    if op == "plan":
        from todo_sessions.core.todos import TodoItem

        items = [TodoItem(**item) for item in job["todos"]]
        mine = normal(update_to_wire(todos_to_plan(items)))
        return [] if mine == normal(ref) else [f"plan: {mine}"]
    events, parsed = _events_of(job)
    verdicts: dict[str, Verdict] = {}
    session: Session | None = None
    if events is None:
        verdicts = {"raw": parsed, "strict": parsed}
    elif op == "fold":
        try:
            for event in events:
                validate_event(event)
            fold = fold_surface(events)
            verdicts["raw"] = Verdict(True)
        except InvalidEventError as exc:
            verdicts["raw"] = Verdict(False, classify(exc), _index(exc), str(exc))
    else:
        session, verdicts["raw"] = load(events, strict=False)
        verdicts["strict"] = load(events, strict=True)[1] if session else verdicts["raw"]
    found: list[str] = []
    theirs_raw = ref.get("raw", ref)
    pairs = [("raw", theirs_raw)]
    if "strict" in ref:
        pairs.append(("strict", ref["strict"]))
    strict_ref = ref.get("strict", {})
    for name, theirs in pairs:
        mine = verdicts[name]
        devmode = (  # the todo rules are always on here (README: accept-raw-devmode)
            name == "raw"
            and theirs["ok"]
            and not strict_ref.get("ok", True)
            and strict_ref.get("code") == mine.code
        )
        if devmode:
            continue
        if theirs["ok"] != mine.ok:
            found.append(f"{name}: ts={theirs.get('code')} py={mine.code} {mine.error}")
        elif not mine.ok and theirs.get("code") != mine.code:
            found.append(f"{name} reason: ts={theirs.get('code')} py={mine.code} {mine.error}")
    if found or not verdicts["raw"].ok or events is None:
        return found
    if op == "fold":
        if list(fold.seqs) != ref["nodes"]:
            found.append(f"nodes: {list(fold.seqs)}")
    elif session is not None and "messages" in ref:
        if _messages(session) != normal(ref["messages"]):
            found.append("messages")
        if "nodes" in ref and list(fold_surface(events).seqs) != ref["nodes"]:
            found.append("nodes")
        if "todos" in ref and _todos(session.todos) != normal(ref["todos"]):
            found.append("todos")
    return found


# -- spec cases of the todo tool ---------------------------------------------------------------

_SCHEMA_PREFIX = ("invalid arguments: ", "invalid arguments for tool todo_write: ")
"""The schema messages of the two sides: theirs, ours (docs/format.md, "The todo_write tool":
the schema messages are our own, so only their kind is compared)."""


def _todo_session() -> Session:
    session = Session(_header(), strict=True)
    session.append("turn/start", {"turn": 1})
    return session


def run_todo_write(job: Mapping[str, Any]) -> dict[str, Any]:
    """Our todo tool on a spec job, on the reference's keys: ``isError``, ``text`` (the text
    the model reads), ``value`` (our structured counts on the reference's shape), ``results``
    (one per call) and ``written`` (the lists the calls appended, in order)."""
    import asyncio

    from todo_sessions.harness.tools.base import ToolContext
    from todo_sessions.harness.tools.todo_write import TodoWriteTool

    tool = TodoWriteTool(allow_parallel_in_progress=job["allowParallel"])
    session = _todo_session() if job["agent"] else None
    results = []
    for n, args in enumerate(job.get("calls") or [job["args"]]):
        context = ToolContext(session=session, call_id=f"call-{n}")
        result = asyncio.run(tool.run(json.loads(json.dumps(args)), context))
        mine: dict[str, Any] = {"isError": result.is_error, "text": result.text_content}
        counts = result.structured
        if counts is not None:
            mine["value"] = {
                "todos": counts["todos"],
                "counts": {
                    "pending": counts["pending"],
                    "inProgress": counts["in_progress"],
                    "completed": counts["completed"],
                },
            }
        results.append(mine)
    written = [
        normal(e.data["todos"])
        for e in (session.events if session else ())
        if e.type == "todo/write"
    ]
    return {**results[-1], "results": results, "written": written}


def _same_error_text(theirs: str, mine: str) -> bool:
    """An error's text, theirs (``message``) against ours: equal, or both schema messages."""
    if theirs.startswith(_SCHEMA_PREFIX[0]):
        return mine.startswith(_SCHEMA_PREFIX[1])
    return theirs == mine


def compare_todo_write(case: Mapping[str, Any]) -> list[str]:
    """Our todo tool against the reference's answer (every call's verdict, the text the model
    reads, the counts, what was written) and against what its test asserts (``expect``)."""
    ref, mine = case["reference"], run_todo_write(case["job"])
    found = []
    for n, (theirs, ours_) in enumerate(zip(ref["results"], mine["results"], strict=True)):
        if theirs["isError"] != ours_["isError"]:
            found.append(f"call {n} isError: ts={theirs['isError']} py={ours_['isError']}")
        elif theirs["isError"] and not _same_error_text(theirs["message"], ours_["text"]):
            found.append(f"call {n} message: ts={theirs['message']!r} py={ours_['text']!r}")
        elif not theirs["isError"]:
            for key in ("text", "value"):
                if normal(theirs[key]) != ours_[key]:
                    found.append(f"call {n} {key}: ts={theirs[key]!r} py={ours_[key]!r}")
    if normal(ref["written"]) != mine["written"]:
        found.append(f"written: ts={ref['written']} py={mine['written']}")
    found += _todo_expect(case.get("expect") or {}, ref, mine)
    return found


def _todo_expect(
    expect: Mapping[str, Any], ref: Mapping[str, Any], mine: Mapping[str, Any]
) -> list[str]:
    found = []
    message = mine["text"] if mine["isError"] else None
    for key, wanted in expect.items():
        if key == "same_as_ts":
            for name in wanted:
                theirs = ref.get(name)
                got = message if name == "message" else mine.get(name)
                if normal(theirs) != got:
                    found.append(f"expect same {name}: ts={theirs!r} py={got!r}")
        elif key == "text_contains":
            if wanted not in mine["text"]:
                found.append(f"expect text containing {wanted!r}: py={mine['text']!r}")
        elif key == "written_last":
            if not mine["written"] or mine["written"][-1] != normal(wanted):
                found.append(f"expect written_last: py={mine['written']}")
        elif normal(wanted) != mine.get(key):
            found.append(f"expect {key}: {wanted!r} py={mine.get(key)!r}")
    return found


def compare_present_call(case: Mapping[str, Any]) -> list[str]:
    """The tool's presentation: title, kind and the raw input, on the reference's keys (ours
    has no ``card``: `present_call` gives ``{title, kind, raw_input}``)."""
    from todo_sessions.harness.tools.todo_write import TodoWriteTool

    shown = TodoWriteTool().present_call(case["job"]["args"]) or {}
    mine = {
        "title": shown.get("title"),
        "kind": shown.get("kind"),
        "rawInput": shown.get("raw_input"),
    }
    view = case["reference"]["view"]
    theirs = {key: view.get(key) for key in mine}
    found = [] if normal(theirs) == normal(mine) else [f"view: ts={theirs} py={mine}"]
    if view.get("card") != "generic":
        found.append(f"card: ts={view.get('card')!r} (ours is always the generic one)")
    return found


# -- spec cases of crash repair ----------------------------------------------------------------


def _closer_shapes(events: Iterable[SessionEvent]) -> list[dict[str, Any]]:
    return [_closer_shape(e) for e in events]


def compare_repair(case: Mapping[str, Any]) -> list[str]:
    """Our closers against the reference's on a spec log: their shapes (type, seq, time, surface
    marks, turn, step, error, source, block), what its test asserts (``expect``), and, as on
    every log, that the reference's invariants accept log and closers when they accept the log,
    and that our strict mode accepts the log with the reference's closers when it accepts ours
    (README, ``repair-cross``)."""
    events, parsed = _events_of(case["job"])
    if events is None:
        return [f"the log does not parse: {parsed.error}"]
    mine = interrupted_turn_closers(events, session_id=SESSION_ID)
    theirs, _ = parse_log({"events": case["reference"]["closers"]})
    assert theirs is not None, case["id"]
    found = []
    if _closer_shapes(theirs) != _closer_shapes(mine):
        found.append("closers: " + _first_difference(_closer_shapes(theirs), _closer_shapes(mine)))
    found += _repair_expect(case.get("expect") or {}, mine)
    if mine and reference_invariants_problem(events) is None:
        problem = reference_invariants_problem([*events, *mine])
        if problem:
            found.append(f"the reference's invariants refuse our closers: {problem}")
    if load([*events, *mine], strict=True)[1].ok:
        verdict = load([*events, *theirs], strict=True)[1]
        if not verdict.ok:
            found.append(f"repair-cross: we refuse the reference's closers: {verdict.error}")
    return found


def _repair_expect(expect: Mapping[str, Any], closers: Sequence[SessionEvent]) -> list[str]:
    found = []
    texts = [
        inner["text"]
        for c in closers[:1]
        if c.type == "tool/result"
        for inner in c.data["message"]["content"][0]["content"]
    ]
    for key, wanted in expect.items():
        if key == "closer_types":
            got: Any = [c.type for c in closers]
        elif key == "closer_seqs":
            got = [c.seq for c in closers]
        elif key == "closer_last":
            got = {k: closers[-1].to_dict().get(k) for k in wanted} if closers else None
        elif key == "closer0":
            shape = _closer_shape(closers[0]) if closers else {}
            got = {k: shape.get(k) for k in wanted}
        elif key == "closer0_text":
            got = texts[0] if texts else None
        elif key == "closer0_text_contains":
            missing = [part for part in wanted if not any(part in t for t in texts)]
            if missing:
                found.append(f"expect closer0 text containing {missing}: py={texts}")
            continue
        else:
            found.append(f"expect {key}: not understood")
            continue
        if normal(wanted) != normal(got):
            found.append(f"expect {key}: {wanted!r} py={got!r}")
    return found


if __name__ == "__main__":
    differences = unjudged_differences()
    rows = {row["id"]: row for row in logs()}
    for d in differences:
        print(f"{d.id} [{rows[d.id]['label']}] {d.kind}: {d.detail}")
    print(f"{len(differences)} unjudged differences on logs", file=sys.stderr)
    specs = [c for c in spec_cases() if c["op"] in SPEC_OPS and c["id"] not in SPEC_DELIBERATE]
    differing = [(c["id"], found) for c in specs if (found := compare_spec_case(c))]
    for case_id, found in differing:
        print(f"{case_id}: {found}")
    print(f"{len(differing)} of {len(specs)} compared spec cases differ", file=sys.stderr)


# -- spec cases of the JSONL exchange ----------------------------------------------------------


def compare_jsonl_exchange(case: Mapping[str, Any]) -> list[str]:
    """The reference's file for the job's events imports here as those events, under its
    header (its header line is the one we would write for it); the reference read the same
    events back from the file (``readBack``)."""
    from todo_sessions import parse_lines
    from todo_sessions._jsonl import reference_header_line

    ref, wanted = case["reference"], normal(case["job"]["events"])
    lines = ref["file"].splitlines()
    found = []
    try:
        header, events = parse_lines(lines)
    except InvalidEventError as exc:
        return [f"import refuses the reference's file: {exc}"]
    if normal([e.to_dict() for e in events]) != wanted:
        found.append(
            "imported events: " + _first_difference(wanted, normal([e.to_dict() for e in events]))
        )
    if reference_header_line(header) != lines[0]:
        found.append(f"header line: ts={lines[0]} py={reference_header_line(header)}")
    back = ref["readBack"]
    if not back["ok"] or normal(back["events"]) != wanted:
        found.append(f"the reference's reading of the file: {str(back)[:200]}")
    return found
