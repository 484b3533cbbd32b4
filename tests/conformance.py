"""Running todo-sessions over the shared conformance corpus (``../shared/conformance``, beside the
checkout): what we give for each log, on the corpus's own vocabulary, and the comparison its
README describes. `tests/test_conformance.py` asserts on it; run this module to list every
difference (``python -m tests.conformance``).

`reference_invariants_problem` restates, in our words, the structure rules the reference checks
in its dev mode (from reading its ``invariant.ts``): our crash-repair closers must pass them.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from todo_sessions import InvalidEventError, Session, SessionEvent, StructureError
from todo_sessions.acp.mapping import todos_to_plan, update_to_wire
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

CORPUS = Path(
    os.environ.get(
        "TODO_SESSIONS_CONFORMANCE", Path(__file__).resolve().parents[2] / "shared" / "conformance"
    )
)
SESSION_ID = "conf"


def corpus_available() -> bool:
    return (CORPUS / "logs.jsonl").is_file()


def _rows(name: str) -> Iterator[dict[str, Any]]:
    with open(CORPUS / name, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


@cache
def logs() -> tuple[dict[str, Any], ...]:
    return tuple(_rows("logs.jsonl"))


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


if __name__ == "__main__":
    differences = unjudged_differences()
    rows = {row["id"]: row for row in logs()}
    for d in differences:
        print(f"{d.id} [{rows[d.id]['label']}] {d.kind}: {d.detail}")
    print(f"{len(differences)} unjudged differences", file=sys.stderr)
