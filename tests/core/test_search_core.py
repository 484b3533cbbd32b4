"""The pure half of search (`core.search`): what each event type puts in the index, the query
syntax and its refusals, the FTS5 and tsquery translations, and snippets."""

from __future__ import annotations

import random
import re

import pytest

from todo_sessions.core import search
from todo_sessions.core.search import (
    DEFAULT_KINDS,
    INDEXED_TYPES,
    MAX_INDEXED_CHARS,
    MAX_QUERY_CHARS,
    MAX_TERMS,
    SNIPPET_SCAN_CHARS,
    SearchQuery,
    Term,
    fold,
    index_rows,
    parse_query,
    snippet,
    to_fts5,
    to_tsquery,
    words,
)
from todo_sessions.errors import SearchQueryError


def text(t: str) -> dict[str, str]:
    return {"type": "text", "text": t}


def rows(event_type: str, data: object) -> list[tuple[str, str]]:
    return [(r["kind"], r["body"]) for r in index_rows("s", 4, event_type, data)]


# -- what is indexed --------------------------------------------------------------------------


def test_each_row_names_its_session_seq_kind_and_body() -> None:
    assert index_rows("s1", 7, "user/message", {"content": [text("hello")]}) == [
        {"session_id": "s1", "seq": 7, "kind": "user", "body": "hello"}
    ]


def test_assistant_text_and_reasoning_are_separate_kinds() -> None:
    data = {
        "message": {
            "content": [text("the answer"), {"type": "reasoning", "text": "thinking"}, text("2")]
        }
    }
    assert rows("assistant/message", data) == [
        ("assistant", "the answer\n2"),
        ("reasoning", "thinking"),
    ]
    assert "reasoning" not in DEFAULT_KINDS and "assistant" in DEFAULT_KINDS


def test_tool_calls_index_name_and_arguments() -> None:
    data = {"name": "bash", "arguments": '{"cmd": "ls"}'}
    assert rows("tool/call", data) == [("tool_call", 'bash\n{"cmd": "ls"}')]
    assert rows("tool/call", {"name": "bash", "arguments": 3}) == [("tool_call", "bash")]


def test_tool_results_index_text_nested_results_and_the_error() -> None:
    content = [
        text("out"),
        {"type": "tool-result", "content": [text("inner"), {"type": "image"}]},
        "not a block",
    ]
    data = {"message": {"content": content}, "error": {"name": "Boom", "code": 7}}
    assert rows("tool/result", data) == [("tool_result", "out\ninner\nBoom")]
    assert rows("tool/result", {"message": {"content": "text"}}) == []


def test_todo_items_and_compaction_summaries() -> None:
    todos = {"todos": [{"content": "write tests"}, {"content": 3}, "x", {"content": "ship"}]}
    assert rows("todo/write", todos) == [("todo", "write tests\nship")]
    assert rows("todo/write", {"todos": "none"}) == []
    assert rows("compaction/summary", {"summary": [text("so far")]}) == [("summary", "so far")]


def test_blank_text_and_other_types_give_no_rows() -> None:
    assert rows("user/message", {"content": [text("  \n ")]}) == []
    assert rows("user/message", {"content": [text("a"), text(" "), text("b")]}) == [
        ("user", "a\nb")
    ]
    assert rows("user/message", {"content": [{"type": "text", "text": 5}]}) == []
    assert rows("user/message", {"content": "plain"}) == []
    assert rows("user/message", ["not", "a", "dict"]) == []
    assert rows("turn/start", {"content": [text("x")]}) == []
    assert "turn/start" not in INDEXED_TYPES
    for event_type in ("user/message", "assistant/message", "tool/call", "tool/result"):
        assert event_type in INDEXED_TYPES
    assert {"todo/write", "compaction/summary"} <= INDEXED_TYPES


def test_bodies_are_cut_and_lose_nul() -> None:
    long = "a" * (MAX_INDEXED_CHARS + 10)
    assert rows("user/message", {"content": [text(long)]}) == [("user", long[:MAX_INDEXED_CHARS])]
    assert rows("user/message", {"content": [text("a\x00b")]}) == [("user", "a b")]
    exact = "b" * MAX_INDEXED_CHARS
    assert rows("user/message", {"content": [text(exact)]}) == [("user", exact)]


def test_words_fold_case_and_diacritics() -> None:
    assert fold("Café ÉTÉ") == "cafe ete"
    assert fold("ASCII") == "ascii"
    assert words("Fix the_bug in café.py, v2!") == ["fix", "the", "bug", "in", "cafe", "py", "v2"]


# -- the query --------------------------------------------------------------------------------


def test_words_phrases_prefixes_and_exclusions() -> None:
    query = parse_query('fix "exit code" migr* -flaky -"not this" "exit cod"*')
    assert query.terms == (
        Term(("fix",)),
        Term(("exit", "code")),
        Term(("migr",), prefix=True),
        Term(("flaky",), negated=True),
        Term(("not", "this"), negated=True),
        Term(("exit", "cod"), prefix=True),
    )
    assert query.positive_words == (("fix",), ("exit", "code"), ("migr",), ("exit", "cod"))
    assert query.text.startswith("fix ")


def test_punctuation_inside_a_word_makes_a_phrase() -> None:
    assert parse_query("foo.bar").terms == (Term(("foo", "bar")),)
    assert parse_query("  Ünïcode  ").terms == (Term(("unicode",)),)


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ('"open', "unbalanced quote"),
        ("a OR b", "boolean operators"),
        ("NOT b", "boolean operators"),
        ("(a)", "grouping"),
        ("a^b", "grouping"),
        ("a*b", "'*' may only end"),
        ('"a"b', "'*' may only end"),
        ("- a", "'-' must be followed"),
        ("a -", "'-' must be followed"),
        ("...", "no letters or digits"),
        ("", "empty"),
        ("   ", "empty"),
        ("-a", "only excluded terms"),
        ("a\x00b", "NUL"),
    ],
)
def test_malformed_queries_name_the_problem(query: str, problem: str) -> None:
    with pytest.raises(SearchQueryError) as caught:
        parse_query(query)
    assert problem in str(caught.value)


def test_a_search_looks_at_every_kind_but_reasoning_by_default() -> None:
    assert set(DEFAULT_KINDS) == {
        "user",
        "assistant",
        "tool_call",
        "tool_result",
        "todo",
        "summary",
    }
    assert set(search.KINDS) == {*DEFAULT_KINDS, "reasoning"}


def test_the_documented_query_length_is_1000_characters() -> None:
    parse_query("a" * 1000)
    with pytest.raises(SearchQueryError, match="longer than 1000 characters"):
        parse_query("a" * 1001)


def test_the_problem_position_and_the_limits() -> None:
    with pytest.raises(SearchQueryError) as caught:
        parse_query('ok "open')
    assert caught.value.position == 3
    with pytest.raises(SearchQueryError) as caught:
        parse_query("a\x00")
    assert caught.value.position == 1
    parse_query("a" * MAX_QUERY_CHARS)  # at the limit: fine
    with pytest.raises(SearchQueryError, match=f"longer than {MAX_QUERY_CHARS}"):
        parse_query("a" * (MAX_QUERY_CHARS + 1))
    parse_query(" ".join(["w"] * MAX_TERMS))
    with pytest.raises(SearchQueryError, match=f"more than {MAX_TERMS} terms"):
        parse_query(" ".join(["w"] * (MAX_TERMS + 1)))
    with pytest.raises(TypeError):
        parse_query(b"bytes")


def test_the_operator_error_says_how_to_search_for_the_word() -> None:
    with pytest.raises(SearchQueryError, match='"or"'):
        parse_query("a OR b")
    assert parse_query('"OR"').terms == (Term(("or",)),)
    assert parse_query("or").terms == (Term(("or",)),)  # lower case: a word


def test_translations_keep_only_words() -> None:
    query = parse_query('fix "exit code" migr* -flaky')
    assert to_fts5(query) == '("fix" AND "exit code" AND "migr"*) NOT "flaky"'
    assert to_fts5(parse_query("one")) == '"one"'
    assert to_tsquery(query) == "'fix' & ('exit' <-> 'code') & 'migr':* & !'flaky'"
    assert to_tsquery(parse_query('"a b"*')) == "('a' <-> 'b':*)"


# -- snippets ---------------------------------------------------------------------------------


def test_snippets_mark_every_matched_word() -> None:
    body = "Fixed the Migration bug; migrations now pass"
    flat, marks = snippet(body, parse_query("migration* -bug"))
    assert flat == body
    assert [flat[a:b] for a, b in marks] == ["Migration", "migrations"]
    flat, marks = snippet(body, parse_query('"the migration"'))
    assert [flat[a:b] for a, b in marks] == ["the", "Migration"]


def test_a_long_body_is_windowed_around_the_first_match() -> None:
    body = "word " * 100 + "needle here" + " tail" * 100
    flat, marks = snippet(body, parse_query("needle"), width=60)
    assert flat.startswith("…") and flat.endswith("…")
    assert [flat[a:b] for a, b in marks] == ["needle"]
    assert len(flat) <= 62
    assert flat[1] != " " and flat[1:5] == "word"  # it begins at a word
    first, _ = snippet("needle at the start " + "x" * 300, parse_query("needle"), width=40)
    assert first.startswith("needle") and first.endswith("…")


def test_snippets_are_one_line_and_without_a_match_start_at_the_beginning() -> None:
    flat, marks = snippet("a\nb\rc", parse_query("zzz"))
    assert flat == "a b c" and marks == ()


def test_the_window_follows_the_first_match_not_the_last() -> None:
    body = "alpha " * 30 + "needle one " + "beta " * 60 + "needle two " + "gamma " * 30
    flat, marks = snippet(body, parse_query("needle"), width=60)
    assert "needle one" in flat and "needle two" not in flat
    assert [flat[a:b] for a, b in marks] == ["needle"]
    assert flat.index("needle") > 10  # some words before the match are shown
    near, _ = snippet("ab needle " + "z " * 200, parse_query("needle"), width=60)
    assert near.startswith("ab needle")


def _reference_snippet(
    body: str, query: SearchQuery, width: int = 160
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The snippet as first written: every word of the body folded and compared with every
    prefix (the result the bounded `snippet` must keep, within `SNIPPET_SCAN_CHARS`)."""
    wanted: dict[str, bool] = {}
    for term in query.terms:
        if term.negated:
            continue
        for k, w in enumerate(term.words):
            last = k == len(term.words) - 1
            wanted[w] = wanted.get(w, False) or (term.prefix and last)
    spans = []
    for m in re.finditer(r"[^\W_]+", body):
        folded = fold(m.group())
        if folded in wanted or any(p and folded.startswith(w) for w, p in wanted.items()):
            spans.append((m.start(), m.end()))
    start = max(0, spans[0][0] - width // 3) if spans else 0
    if start:
        space = body.rfind(" ", 0, start + 1)
        start = space + 1 if space >= 0 and start - space < 20 else start
    end = min(len(body), start + width)
    lead, tail = ("…" if start else ""), ("…" if end < len(body) else "")
    shift = len(lead) - start
    marks = tuple((a + shift, b + shift) for a, b in spans if a >= start and b <= end)
    return (lead + body[start:end] + tail).replace("\n", " ").replace("\r", " "), marks


VOCABULARY = ["Need", "needle", "NEEDLES", "hay", "haystack", "x_1", "a.b", "ab", "abc", "9z"]
ACCENTED = ["Café", "cafe", "naïve", "NAIVE", "straße", "Ωmega", "ωmeg"]


@pytest.mark.parametrize("accented", [False, True])
def test_the_bounded_snippet_equals_the_word_by_word_one(accented: bool) -> None:
    rng = random.Random(35 + accented)
    vocabulary = VOCABULARY + (ACCENTED if accented else [])
    queries = ["need*", "needle", "ab* hay", '"a b"', "-hay needle*", "caf* naive", "omega*"]
    for _ in range(300):
        parts = [rng.choice(vocabulary) for _ in range(rng.randint(0, 400))]
        body = "".join(p + rng.choice([" ", "  ", "\n", ", ", "-"]) for p in parts)
        query = parse_query(rng.choice(queries))
        width = rng.choice([20, 60, 160])
        assert snippet(body, query, width) == _reference_snippet(body, query, width)


def test_a_snippet_scans_a_bounded_part_of_a_long_body(monkeypatch: pytest.MonkeyPatch) -> None:
    folded: list[str] = []

    def counting_fold(text: str) -> str:
        folded.append(text)
        return fold(text)

    needle = parse_query("needle")
    monkeypatch.setattr(search, "fold", counting_fold)
    tail = "é " * 50_000  # not ASCII: folded word by word
    flat, marks = snippet("needle " + tail, needle, width=60)
    assert [flat[a:b] for a, b in marks] == ["needle"]
    assert len(folded) <= 31  # the scan ends with the window, not with the body
    folded.clear()
    flat, marks = snippet(tail + " needle", needle)
    assert marks == () and flat.startswith("é é")  # the match lies past the scan
    assert len(folded) == SNIPPET_SCAN_CHARS // 2
    # an ASCII body is searched whole, without folding word by word
    prefix = parse_query("need*")
    folded.clear()
    flat, marks = snippet("word " * 50_000 + "Needle", prefix)
    assert [flat[a:b] for a, b in marks] == ["Needle"] and folded == []


def test_a_query_of_only_excluded_terms_marks_nothing() -> None:
    query = SearchQuery("-a", (Term(("a",), negated=True),))
    assert snippet("a b a", query) == ("a b a", ())
    assert snippet("é a", query) == ("é a", ())
