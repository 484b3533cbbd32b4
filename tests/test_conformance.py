"""todo-sessions against the reference harness, over the conformance corpus kept in
tests/conformance/corpus/ (see its README.md, tests/conformance.py and
tests/conformance_files.py, which also refreshes it from the team's copy).

Every log and spec case must agree with what the reference gave, except the judged differences
of ``judged.jsonl`` (skipped exactly: that kind for that log) and two more deliberate ones named
in docs/format.md, "Differences from the reference": our own earlier ``request/header`` shape
still loads here (through its upcaster), and the ``compaction/*`` types, registered by the
compaction module, are not this test's to check.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from tests import conformance as corpus
from tests import conformance_files as files
from todo_sessions import EVENT_TYPES, parse_lines
from todo_sessions._jsonl import header_line
from todo_sessions.core.request_header import is_legacy_request_header
from todo_sessions.core.verify import errors_of, verify_events
from todo_sessions.core.vocabulary import REFERENCE_EVENT_TYPES


def test_the_corpus_is_there() -> None:
    assert corpus.corpus_available(), f"no conformance corpus at {corpus.CORPUS}"
    assert len(corpus.logs()) == 636 and len(corpus.spec_cases()) == 192


def test_the_corpus_is_the_teams_copy() -> None:
    """Ours holds exactly the files of ``../shared/conformance`` (when the checkout has one
    beside it), so a change to the team's copy fails here until ours is refreshed."""
    if not files.TEAM_COPY.is_dir():
        pytest.skip(f"no team copy at {files.TEAM_COPY} to compare with (ours is read alone)")
    found = files.differences(files.TEAM_COPY, corpus.CORPUS)
    assert found == [], (
        f"refresh tests/conformance/corpus: python -m tests.conformance_files ({found})"
    )


def test_the_skipped_spec_cases_are_the_ones_the_corpus_readme_names() -> None:
    """Every spec case the comparison skips is still named as deliberate, a quirk or cosmetic
    in the corpus README's list (a case the README stops naming is compared again)."""
    readme = files.read_bytes("README.md").decode("utf-8")
    section = readme.split("Spec cases where todo-sessions deliberately differs", 1)[1]
    bullets, inside = [], False  # the list items, with their continuation lines
    for line in section.splitlines():
        inside = line.startswith("- ") or (inside and line.startswith("  "))
        bullets += [line] if inside else []
    named = set(re.findall(r"`([a-z]+:[^`]+)`", "\n".join(bullets)))
    assert named >= corpus.SPEC_DELIBERATE, sorted(corpus.SPEC_DELIBERATE - named)
    ids = {case["id"] for case in corpus.spec_cases()}
    assert ids >= corpus.SPEC_DELIBERATE


def test_a_copy_that_differs_from_the_team_copy_is_named_and_refreshed(tmp_path: Path) -> None:
    """The comparison reads plain and gzipped files alike and names every difference;
    `refresh` stores big files gzipped, removes what the source lost, and is then equal."""
    team, ours = tmp_path / "team", tmp_path / "ours"
    team.mkdir()
    (team / "README.md").write_text("corpus\n")
    big = b"".join(b'{"n": %d}\n' % n for n in range(files.GZIP_ABOVE // 8))
    (team / "logs.jsonl").write_bytes(big)
    (team / "judged.jsonl").write_bytes(b"{}\n")
    assert files.refresh(team, ours) == ["README.md", "judged.jsonl", "logs.jsonl.gz"]
    assert sorted(p.name for p in ours.iterdir()) == ["README.md", "judged.jsonl", "logs.jsonl.gz"]
    assert gzip.decompress((ours / "logs.jsonl.gz").read_bytes()) == big
    assert files.differences(team, ours) == [] and files.refresh(team, ours) == []
    (team / "logs.jsonl").write_bytes(big + b'{"n": -1}\n')
    (team / "judged.jsonl").unlink()
    (team / "spec_cases.jsonl").write_bytes(b"{}\n")
    assert files.differences(team, ours) == [
        f"spec_cases.jsonl: only in {team}",
        f"judged.jsonl: only in {ours}",
        "logs.jsonl: differs",
    ]
    files.refresh(team, ours)
    assert files.differences(team, ours) == []
    assert not (ours / "judged.jsonl").exists()


def _legacy_header_refused(row: dict, difference: corpus.Difference) -> bool:
    """The reference refuses a request/header that our earlier versions wrote (its old
    shape), which loads here through the upcaster."""
    return (
        difference.kind == "accept-raw"
        and difference.detail.startswith("ts=payload:request py=ok")
        and any(
            e["type"] == "request/header" and is_legacy_request_header(e["data"])
            for e in row["events"]
        )
    )


def _compaction_record_refused(row: dict, difference: corpus.Difference) -> bool:
    """A ``compaction/*`` record without its fields (the corpus has a bare
    ``compaction/summary {title}``): the reference reads log-only payloads unchecked, ours are
    checked (docs/format.md, "Differences from the reference": stricter payloads)."""
    return (
        difference.kind == "accept-raw"
        and "ts=ok py=payload:other" in difference.detail
        and "invalid event 'compaction/" in difference.detail
    )


def test_every_log_agrees_with_the_reference_but_the_judged_differences() -> None:
    skip = corpus.judged()
    unexplained = []
    for row in corpus.logs():
        for difference in corpus.compare_log(row):
            if (difference.id, difference.kind) in skip:
                continue
            refused = _legacy_header_refused(row, difference)
            if refused or _compaction_record_refused(row, difference):
                continue
            unexplained.append(
                f"{row['id']} [{row['label']}] {difference.kind}: {difference.detail}"
            )
    assert unexplained == []


def test_every_spec_case_agrees_but_the_deliberate_ones() -> None:
    compared = [
        case
        for case in corpus.spec_cases()
        if case["op"] in corpus.SPEC_OPS and case["id"] not in corpus.SPEC_DELIBERATE
    ]
    assert len(compared) > 150
    assert {"todo_write", "repair", "jsonl_exchange"} <= {case["op"] for case in compared}
    differing = {case["id"]: corpus.compare_spec_case(case) for case in compared}
    assert {k: v for k, v in differing.items() if v} == {}


def test_the_deliberate_todo_tool_cases_differ_only_in_shape() -> None:
    """``todo:append``, ``todo:parallel`` (counts ``{pending, in_progress, completed, todos}``)
    and ``todo:present-call`` (``{title, kind, raw_input}``) are deliberate differences of
    shape only: on the reference's keys, everything agrees."""
    cases = {case["id"]: case for case in corpus.spec_cases()}
    shaped = ("todo:append", "todo:parallel", "todo:present-call")
    differing = {name: corpus.compare_spec_case(cases[name]) for name in shaped}
    assert {name: found for name, found in differing.items() if found} == {}


def test_our_closers_of_the_deliberate_repair_cases_still_pass_the_reference_rules() -> None:
    """Issue 25, item 9: where our closers differ on purpose (we answer every call of the open
    turn, with our own ids and wording), the reference's invariants still accept them, and we
    accept the reference's closers."""
    cases = [case for case in corpus.spec_cases() if case["op"] == "repair"]
    assert {"repair:closed-step", "repair:orphan-call", "repair:not-started"} <= {
        case["id"] for case in cases
    }
    crossing = {
        case["id"]: [
            found
            for found in corpus.compare_spec_case(case)
            if found.startswith(("the reference's invariants", "repair-cross"))
        ]
        for case in cases
    }
    assert {k: v for k, v in crossing.items() if v} == {}


def test_import_accepts_exactly_what_verify_accepts() -> None:
    """Issue 25, item 8: a log imports if and only if `verify` finds nothing wrong with it."""
    head = header_line(corpus._header())
    disagreeing = []
    for row in corpus.logs():
        if row["kind"] != "invalid" and row["source"] != "agentloop":
            continue  # (a valid or cut generated log: both accept it, test_every_log says)
        lines = row.get("lines") or [
            json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in row["events"]
        ]
        try:
            parse_lines([head, *lines])
            imported = True
        except ValueError:
            imported = False
        events, _ = corpus.parse_log(row)
        healthy = events is not None and not errors_of(verify_events(events))
        if imported != healthy:
            disagreeing.append(row["id"])
    assert disagreeing == []


def test_our_closers_pass_the_reference_invariants_on_cut_logs() -> None:
    """Issue 25, item 9, over the corpus: logs that both strict modes accept, cut at many
    places, are closed by closers the reference's invariants accept."""
    from todo_sessions.core.repair import interrupted_turn_closers

    checked = 0
    for row in corpus.logs():
        reference = corpus.reference()[row["id"]]
        if row["kind"] == "invalid" or not reference["strict"]["ok"]:
            continue
        events, _ = corpus.parse_log(row)
        assert events is not None
        for cut in {*range(5, len(events), 23), len(events)}:
            prefix = events[:cut]
            closers = interrupted_turn_closers(prefix, session_id="conf")
            if closers:
                checked += 1
                problem = corpus.reference_invariants_problem([*prefix, *closers])
                assert problem is None, (row["id"], cut, problem)
    assert checked > 100


def test_the_vocabulary_is_the_reference_list() -> None:
    """Issue 25, item 7: the 48 names of the reference's known-event-types.ts, all registered
    here (compaction/* by the compaction module), none of them surface-eligible but the three
    message types."""
    assert len(REFERENCE_EVENT_TYPES) == 48
    ours = {name for name in REFERENCE_EVENT_TYPES if not name.startswith("compaction/")}
    assert ours <= set(EVENT_TYPES)
    surface = {name for name in ours if EVENT_TYPES[name].surface}
    assert surface == {"user/message", "assistant/message", "tool/result"}
