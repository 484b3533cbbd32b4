"""Full-text search, the pure half: what of an event is indexed, the query syntax, snippets.

No I/O. The store writes `index_rows` of each appended event in the append transaction and
translates a parsed `SearchQuery` to its backend (`to_fts5` for SQLite FTS5, `to_tsquery` for
PostgreSQL); both backends index the same words (`words`: runs of letters and digits, case and
diacritics folded), so a query finds the same events on either. See docs/design.md, "Search".

Indexed kinds (one row per event and kind that has text):

- ``user``: the text blocks of ``user/message``;
- ``assistant``: the text blocks of ``assistant/message``;
- ``reasoning``: its reasoning blocks (searched only when ``kinds`` asks for it);
- ``tool_call``: ``tool/call`` name and arguments;
- ``tool_result``: the text of ``tool/result`` (and its error's name and code);
- ``todo``: the items of ``todo/write``;
- ``summary``: the summary of ``compaction/summary``.

Query syntax: words separated by spaces, all of which must occur (AND); ``"a phrase"`` (its
words adjacent, in order); ``word*`` (a prefix, also after a phrase: ``"exit cod"*``);
``-word`` / ``-"a phrase"`` (must not occur; at least one term without ``-``). Punctuation
inside a word splits it into a phrase (``foo.bar`` is ``"foo bar"``). Boolean operators and
grouping (``AND``, ``OR``, ``NOT``, ``NEAR``, parentheses, ``^``, braces) are refused, as are
an unbalanced quote, NUL, and a query longer than `MAX_QUERY_CHARS` or with more than
`MAX_TERMS` terms: `SearchQueryError` names the problem.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import SearchQueryError
from .types import (
    ASSISTANT_MESSAGE,
    COMPACTION_SUMMARY,
    TODO_WRITE,
    TOOL_CALL,
    TOOL_RESULT,
    USER_MESSAGE,
)

__all__ = [
    "DEFAULT_KINDS",
    "KINDS",
    "MAX_QUERY_CHARS",
    "MAX_TERMS",
    "SearchQuery",
    "Term",
    "fold",
    "index_rows",
    "parse_query",
    "snippet",
    "to_fts5",
    "to_tsquery",
    "words",
]

KINDS = ("user", "assistant", "reasoning", "tool_call", "tool_result", "todo", "summary")
"""Every indexed kind."""
DEFAULT_KINDS = tuple(k for k in KINDS if k != "reasoning")
"""What a search looks at unless ``kinds`` says otherwise: everything but reasoning."""
MAX_QUERY_CHARS = 1000
MAX_TERMS = 32
MAX_INDEXED_CHARS = 100_000
"""Text of one event and kind past this is not indexed (the log keeps it whole)."""

_WORD = re.compile(r"[^\W_]+")
_OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})
_REFUSED = "()^{}"


def fold(text: str) -> str:
    """Lowercased, diacritics removed (as FTS5's ``unicode61 remove_diacritics 2`` does; the
    PostgreSQL index is built from these words)."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def words(text: str) -> list[str]:
    """The indexed words of ``text``, folded, in order."""
    return _WORD.findall(fold(text))


# -- what is indexed --------------------------------------------------------------------------


def _blocks(content: Any, kind: str) -> list[str]:
    # Payloads are decoded JSON (plain dicts and lists): checked by type, not by ABC.
    out = []
    for block in content if type(content) is list else ():
        if type(block) is dict and block.get("type") == kind:
            text = block.get("text")
            if type(text) is str:
                out.append(text)
    return out


def _result_text(content: Any) -> list[str]:
    out: list[str] = []
    if type(content) is not list:
        return out
    for block in content:
        if type(block) is not dict:
            continue
        kind = block.get("type")
        if kind == "text" and type(block.get("text")) is str:
            out.append(block["text"])
        elif kind == "tool-result":
            out += _result_text(block.get("content"))
    return out


def _content(data: dict[str, Any]) -> Any:
    message = data.get("message")
    return message.get("content") if type(message) is dict else None


def _extract(event_type: str, data: Any) -> Iterable[tuple[str, list[str]]]:
    if type(data) is not dict:
        return ()
    if event_type == ASSISTANT_MESSAGE:
        content = _content(data)
        return (
            ("assistant", _blocks(content, "text")),
            ("reasoning", _blocks(content, "reasoning")),
        )
    if event_type == USER_MESSAGE:
        return (("user", _blocks(data.get("content"), "text")),)
    if event_type == TOOL_CALL:
        parts = [data.get("name"), data.get("arguments")]
        return (("tool_call", [p for p in parts if type(p) is str]),)
    if event_type == TOOL_RESULT:
        texts = _result_text(_content(data))
        error = data.get("error")
        if type(error) is dict:
            texts += [v for v in (error.get("name"), error.get("code")) if type(v) is str]
        return (("tool_result", texts),)
    if event_type == TODO_WRITE:
        todos = data.get("todos")
        items = todos if type(todos) is list else []
        return (
            (
                "todo",
                [t["content"] for t in items if type(t) is dict and type(t.get("content")) is str],
            ),
        )
    if event_type == COMPACTION_SUMMARY:
        return (("summary", _blocks(data.get("summary"), "text")),)
    return ()


def index_rows(session_id: str, seq: int, event_type: str, data: Any) -> list[dict[str, Any]]:
    """The search rows of one event: ``{session_id, seq, kind, body}`` per kind with text
    (``body``: the texts joined by newlines, at most `MAX_INDEXED_CHARS`)."""
    rows = []
    for kind, texts in _extract(event_type, data):
        if not texts:
            continue
        body = texts[0] if len(texts) == 1 else "\n".join(t for t in texts if t.strip())
        if body and not body.isspace():
            rows.append(
                {
                    "session_id": session_id,
                    "seq": seq,
                    "kind": kind,
                    "body": _clean(body),
                }
            )
    return rows


def _clean(body: str) -> str:
    body = body if len(body) <= MAX_INDEXED_CHARS else body[:MAX_INDEXED_CHARS]
    return body.replace("\x00", " ") if "\x00" in body else body


INDEXED_TYPES = frozenset(
    {USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, TODO_WRITE} | {COMPACTION_SUMMARY}
)
"""The event types `index_rows` reads (others give no rows: the append skips them cheaply)."""


# -- the query --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Term:
    """One term: its words (more than one: a phrase), whether the last is a prefix, and
    whether it must not occur."""

    words: tuple[str, ...]
    prefix: bool = False
    negated: bool = False


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A parsed query: every term of ``terms`` must hold."""

    text: str
    terms: tuple[Term, ...]

    @property
    def positive_words(self) -> tuple[tuple[str, ...], ...]:
        return tuple(t.words for t in self.terms if not t.negated)


def _fail(query: str, problem: str, position: int | None = None) -> Any:
    raise SearchQueryError(query, problem, position)


def _read_raw(query: str, i: int) -> tuple[str, int, bool]:
    """The text of the word or phrase at ``i``, where it ends, and whether it was quoted."""
    if query[i] == '"':
        close = query.find('"', i + 1)
        if close < 0:
            _fail(query, "unbalanced quote: a phrase has no closing '\"'", i)
        return query[i + 1 : close], close + 1, True
    j, n = i, len(query)
    while j < n and not query[j].isspace() and query[j] != '"':
        j += 1
    return query[i:j], j, False


def _check_bare(query: str, raw: str, start: int) -> None:
    """An unquoted word is no operator and holds no FTS syntax."""
    if raw in _OPERATORS:
        _fail(
            query,
            f"{raw!r}: boolean operators are not supported (all words must occur; "
            f'quote it, "{raw.lower()}", to search for the word)',
            start,
        )
    bad = next((ch for ch in raw if ch in _REFUSED), None)
    if bad is not None:
        _fail(query, f"{bad!r}: grouping and FTS operators are not supported", start)


def _read_term(query: str, start: int) -> tuple[Term, int]:
    """The term starting at ``start`` (not a space), and where it ends."""
    i, n = start, len(query)
    negated = query[i] == "-"
    if negated:
        i += 1
        if i >= n or query[i].isspace():
            _fail(query, "a '-' must be followed by the word or phrase to exclude", start)
    raw, i, quoted = _read_raw(query, i)
    prefix = False
    if i < n and query[i] == "*" and quoted:
        prefix, i = True, i + 1
    elif not quoted and raw.endswith("*"):
        prefix, raw = True, raw.rstrip("*")
    if (i < n and not query[i].isspace() and query[i] != '"') or (not quoted and "*" in raw):
        _fail(query, "'*' may only end a word or a phrase", start)
    if not quoted:
        _check_bare(query, raw, start)
    found = tuple(words(raw))
    if not found:
        _fail(query, f"term {query[start:i]!r} has no letters or digits to search", start)
    return Term(found, prefix, negated), i


def parse_query(query: Any) -> SearchQuery:
    """Parse the documented syntax (module docstring), or raise `SearchQueryError`."""
    if not isinstance(query, str):
        raise TypeError(f"a search query is a str, got {type(query).__name__}")
    if len(query) > MAX_QUERY_CHARS:
        _fail(query[:80] + "...", f"longer than {MAX_QUERY_CHARS} characters ({len(query)})")
    if "\x00" in query:
        _fail(query, "contains a NUL character", query.index("\x00"))
    terms: list[Term] = []
    i, n = 0, len(query)
    while i < n:
        if query[i].isspace():
            i += 1
            continue
        term, i = _read_term(query, i)
        terms.append(term)
        if len(terms) > MAX_TERMS:
            _fail(query, f"more than {MAX_TERMS} terms")
    if not terms:
        _fail(query, "empty: give at least one word")
    if all(t.negated for t in terms):
        _fail(query, "only excluded terms: give at least one word that must occur")
    return SearchQuery(query, tuple(terms))


def _fts5_term(term: Term) -> str:
    # Each word is one quoted string (no FTS5 syntax survives quoting; words hold no quotes).
    phrase = '"' + " ".join(term.words) + '"'
    return phrase + ("*" if term.prefix else "")


def to_fts5(query: SearchQuery) -> str:
    """The FTS5 MATCH expression of ``query``."""
    positive = [_fts5_term(t) for t in query.terms if not t.negated]
    negative = [_fts5_term(t) for t in query.terms if t.negated]
    expression = " AND ".join(positive)
    if negative:
        expression = f"({expression})" + "".join(f" NOT {n}" for n in negative)
    return expression


def _ts_term(term: Term) -> str:
    parts = [f"'{w}'" for w in term.words]  # words are letters and digits: nothing to escape
    if term.prefix:
        parts[-1] += ":*"
    phrase = " <-> ".join(parts)
    if len(parts) > 1:
        phrase = f"({phrase})"
    return f"!{phrase}" if term.negated else phrase


def to_tsquery(query: SearchQuery) -> str:
    """The ``to_tsquery`` text of ``query`` (built from words only, never the raw query)."""
    return " & ".join(_ts_term(t) for t in query.terms)


# -- snippets ---------------------------------------------------------------------------------

SNIPPET_CHARS = 160
SNIPPET_SCAN_CHARS = 20_000
"""A body that is not all ASCII is searched word by word for its first match in its first this
many characters (past them the snippet is the body's beginning, unmarked); an ASCII body is
searched whole, by one regular expression. Either way the scan ends with the snippet's window:
the work per hit is bounded, however long the body and however many terms."""


def _wanted(query: SearchQuery) -> tuple[frozenset[str], tuple[str, ...]]:
    """The words a snippet marks: those matched whole, and the prefixes (the last word of a
    prefix term), of the query's positive terms."""
    exact: set[str] = set()
    prefixes: set[str] = set()
    for term in query.terms:
        if not term.negated:
            exact.update(term.words[:-1])
            (prefixes if term.prefix else exact).add(term.words[-1])
    return frozenset(exact), tuple(sorted(prefixes))


def _ascii_pattern(exact: frozenset[str], prefixes: tuple[str, ...]) -> re.Pattern[str]:
    """The matched words in a lowercased ASCII body (a word: a run of ASCII letters and
    digits, as `words` splits ASCII text)."""
    parts = []
    if exact:
        parts.append("(?:" + "|".join(map(re.escape, sorted(exact, key=len, reverse=True))))
        parts[-1] += ")(?![a-z0-9])"
    if prefixes:
        parts.append("(?:" + "|".join(map(re.escape, prefixes)) + ")[a-z0-9]*")
    return re.compile("(?<![a-z0-9])(?:" + "|".join(parts) + ")")


def _spans(body: str, query: SearchQuery, width: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` of the matched words from the first match to the end of the
    window a snippet of ``width`` characters can show around it (`SNIPPET_SCAN_CHARS`)."""
    exact, prefixes = _wanted(query)
    if not exact and not prefixes:  # only excluded terms (a query built by hand)
        return []
    whole = body.isascii()
    if whole:  # ASCII: lowercasing keeps the offsets; one pattern finds the matched words
        found = _ascii_pattern(exact, prefixes).finditer(body.lower())
    else:
        found = _WORD.finditer(body)
    stop = len(body) if whole else SNIPPET_SCAN_CHARS
    spans: list[tuple[int, int]] = []
    for m in found:
        if m.start() >= stop:
            break
        if not whole:
            folded = fold(m.group())
            if folded not in exact and not folded.startswith(prefixes):
                continue
        if not spans:
            stop = m.start() + width + 1
        spans.append(m.span())
    return spans


def snippet(
    body: str, query: SearchQuery, width: int = SNIPPET_CHARS
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A window of ``body`` around the first match and the ``(start, end)`` offsets of every
    matched word in it (the words of the query's positive terms; a prefix matches the start
    of a word). Plain text: a renderer escapes it (the viewer's HTML does). The work is
    bounded (`SNIPPET_SCAN_CHARS`)."""
    spans = _spans(body, query, width)
    start = max(0, spans[0][0] - width // 3) if spans else 0
    if start:
        space = body.rfind(" ", 0, start + 1)  # begin at a word
        start = space + 1 if space >= 0 and start - space < 20 else start
    end = min(len(body), start + width)
    text = body[start:end]
    lead = "…" if start else ""
    tail = "…" if end < len(body) else ""
    shift = len(lead) - start
    marks = tuple((a + shift, b + shift) for a, b in spans if a >= start and b <= end)
    flat = (lead + text + tail).replace("\n", " ").replace("\r", " ")
    return flat, marks
