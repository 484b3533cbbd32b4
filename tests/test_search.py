"""Full-text search (`SessionStore.search`, `reindex`, the index's check) on SQLite and
PostgreSQL over sessions made by the real agent loop: every indexed kind is found, reasoning
only when asked, filters and paging agree with `list`, hostile queries are typed errors, the
rebuilt index equals the one appends built, and compacted text stays findable, marked as out
of the model's history."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import _fresh
from factories import raw_sql
from sqlalchemy import text

from todo_sessions import SearchHit, SearchQueryError, SessionService, SessionStore, verify_session
from todo_sessions.core.search import KINDS, parse_query, snippet, to_fts5, to_tsquery
from todo_sessions.harness import AgentLoop, ScriptedModel, ScriptedResponse
from todo_sessions.harness.tools import TodoWriteTool, ToolContext, ToolRegistry, ToolResult
from todo_sessions.store import search as search_index


@pytest.fixture(params=["sqlite-file", "postgres"])
async def url(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> AsyncIterator[str]:
    async for found in _fresh(request.param, request, tmp_path):
        yield found


class Grep:
    name = "grep"
    description = "searches"
    parameters: dict[str, Any] = {"type": "object"}

    async def run(self, args: dict[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult.text(f"found zanzibarresult{args.get('n', 0)} in café.py")


def tools() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(TodoWriteTool())
    registry.register(Grep())
    return registry


def script(n: int) -> list[ScriptedResponse]:
    plan = {"todos": [{"content": f"fix quokkatodo{n}", "status": "in_progress"}]}
    return [
        ScriptedResponse(
            reasoning=f"pondering wombatthought{n}",
            tool_calls=[("todo_write", plan), ("grep", {"pattern": f"kiwiarg{n}", "n": n})],
        ),
        ScriptedResponse(text=f"the answer is narwhalanswer{n}"),
    ]


async def make_session(
    service: SessionService, sid: str, n: int, *, cwd: str = "/repo", tags: tuple[str, ...] = ()
) -> None:
    session = await service.new(sid, cwd=cwd)
    loop = AgentLoop(session, ScriptedModel(script(n)), tools())
    await loop.run_turn(f"please look for platypusprompt{n} and the common word")
    await service.flush(sid)
    await service.close(sid)
    if tags:
        await service.store.update_meta(sid, tags=list(tags))


async def seeded(url: str, count: int = 6) -> SessionStore:
    async with SessionService(SessionStore(url), flush_interval=None) as service:
        for n in range(count):
            tags = ("even",) if n % 2 == 0 else ()
            await make_session(service, f"s{n}", n, cwd=f"/repo{n % 3}", tags=tags)
    return SessionStore(url)


async def test_every_indexed_kind_is_found_and_reasoning_only_when_asked(url: str) -> None:
    async with await seeded(url, 2) as store:
        found = {
            "user": "platypusprompt1",
            "assistant": "narwhalanswer1",
            "tool_call": "kiwiarg1",
            "tool_result": "zanzibarresult1",
            "todo": "quokkatodo1",
        }
        for kind, word in found.items():
            hits = await store.search(word)
            assert {h.kind for h in hits} >= {kind}, (kind, hits)
            assert {h.session_id for h in hits} == {"s1"}
        assert await store.search("wombatthought1") == []
        asked = await store.search("wombatthought1", kinds=["reasoning"])
        assert [(h.session_id, h.kind, h.event_type) for h in asked] == [
            ("s1", "reasoning", "assistant/message")
        ]
        assert await store.search("todo_write", kinds=["tool_call"])  # the tool's name
        # diacritics and case are folded on both backends; a prefix finds the longer word
        assert await store.search("CAFE") and await store.search("zanzibarres*")
        assert await store.search('"look for platypusprompt0"')
        assert await store.search('"platypusprompt0 look"') == []
        assert {h.session_id for h in await store.search("common -platypusprompt0")} == {"s1"}
        with pytest.raises(ValueError, match="kinds"):
            await store.search("common", kinds=["nonsense"])


@pytest.mark.parametrize("recent_rows", [None, 1, 7])
async def test_filters_and_paging_agree_with_list(
    url: str, recent_rows: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also with PostgreSQL's first look at the newest rows (`search.RECENT_ROWS`) cut so
    small that pages are made across its boundary, and from the GIN index alone."""
    if recent_rows is not None:
        monkeypatch.setattr(search_index, "RECENT_ROWS", recent_rows)
    async with await seeded(url, 6) as store:
        for filters in ({}, {"cwd": "/repo1"}, {"tag": "even"}):
            listed = {s.id for s in await store.list(**filters)}  # type: ignore[arg-type]
            hits = await store.search("platypusprompt*", kinds=["user"], **filters)  # type: ignore[arg-type]
            assert {h.session_id for h in hits} == listed
        summaries = await store.list()
        middle = summaries[2].updated_at
        since = {s.id for s in await store.list(since=middle)}
        assert {h.session_id for h in await store.search("common", since=middle)} == since
        until = {s.id for s in await store.list(until=middle)}
        assert {h.session_id for h in await store.search("common", until=middle)} == until
        # pages of 2 give the one page of everything, in order, without repeats
        everything = await store.search("common", limit=100)
        assert len(everything) == 6
        paged: list[SearchHit] = []
        before = None
        while True:
            page = await store.search("common", limit=2, before=before)
            paged += page
            if len(page) < 2:
                break
            before = page[-1]
        assert paged == everything
        # newest first: the last session made is the first hit
        assert everything[0].session_id == "s5" and everything[-1].session_id == "s0"


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced',
        'common "unbalanced',
        "a OR b",
        "NEAR(a b)",
        "a AND b",
        "(a)",
        "title:a",  # fine: a phrase "title a" (no FTS5 column filter survives)
        "a^b",
        "{a b}",
        "a*b",
        "*",
        "-a",
        "",
        "   ",
        "x" * 10_000,
        "a\x00b",
        "'; DROP TABLE sessions; --",
    ],
)
async def test_hostile_queries_are_typed_errors_never_sql_errors(url: str, query: str) -> None:
    async with await seeded(url, 1) as store:
        try:
            hits = await store.search(query)
        except SearchQueryError as exc:
            assert exc.problem and str(exc).startswith("search query: ")
        else:
            assert query in ("title:a", "'; DROP TABLE sessions; --")
            assert hits == []
        assert len(await store.list()) == 1


def test_the_parser_translates_to_both_backends() -> None:
    parsed = parse_query('fix "exit cod"* -flaky Über.rc')
    assert to_fts5(parsed) == '("fix" AND "exit cod"* AND "uber rc") NOT "flaky"'
    assert to_tsquery(parsed) == "'fix' & ('exit' <-> 'cod':*) & !'flaky' & ('uber' <-> 'rc')"
    with pytest.raises(SearchQueryError, match="at character 5") as raised:
        parse_query('fix "open')
    assert raised.value.position == 4
    text_, marks = snippet("We fixed the Exit code today", parse_query('"exit cod"*'))
    assert [text_[a:b] for a, b in marks] == ["Exit", "code"]


async def index_rows(store: SessionStore) -> list[tuple[Any, ...]]:
    table = store.namespace.name("search_text")
    name = table if store.namespace.schema is None else f'"{store.namespace.schema}".{table}'
    return await raw_sql(
        store,
        lambda c: [
            tuple(r)
            for r in c.execute(text(f"SELECT session_id, seq, kind, body FROM {name}")).all()
        ],
    )


async def test_reindex_builds_the_index_appends_built_and_verify_reports_a_stale_one(
    url: str,
) -> None:
    async with await seeded(url, 3) as store:
        assert await store.search_index_problems() == []  # it catches the index up first
        built = sorted(await index_rows(store))
        assert built
        assert await store.reindex() == len(built)
        assert sorted(await index_rows(store)) == built
        assert [h.session_id for h in await store.search("common")] == ["s2", "s1", "s0"]
    # appends with the index off: search misses them, verify warns, reindex repairs
    async with SessionService(SessionStore(url, search_index=False), flush_interval=None) as svc:
        await make_session(svc, "late", 9)
    async with SessionStore(url) as store:
        assert await store.search("platypusprompt9") == []
        problems = await verify_session(store, "late")
        assert [(p.kind, p.warning) for p in problems] == [("search-index", True)]
        await store.reindex()
        assert [h.session_id for h in await store.search("platypusprompt9")] == ["late"]
        assert await verify_session(store, "late") == []
        await store.delete("late")  # its rows go with it
        assert await store.search("platypusprompt9") == []
        assert sorted(await index_rows(store)) == built


async def test_compacted_text_is_found_and_marked_out_of_the_history(url: str) -> None:
    async with SessionService(SessionStore(url), flush_interval=None) as service:
        session = await service.new("comp")
        loop = AgentLoop(session, ScriptedModel(script(1) + script(2)), tools())
        await loop.run_turn("first platypusprompt1")
        await loop.run_turn("second platypusprompt2")
        await service.compact("comp", "Summary: looked for echidnasummary things.")
        store = service.store
        old = await store.search("platypusprompt1", kinds=["user"])
        assert [(h.seq, h.in_history) for h in old] == [(old[0].seq, False)]
        latest = await store.search("platypusprompt2", kinds=["user"])
        assert [h.in_history for h in latest] == [True]
        summary = await store.search("echidnasummary")
        assert {h.kind for h in summary} >= {"user", "summary"}  # the replacement, the record
        assert {h.in_history for h in summary if h.kind == "user"} == {True}
        assert {h.in_history for h in summary if h.kind == "summary"} == {None}  # log-only


def test_kinds_are_the_clis() -> None:
    from todo_sessions.cli._options import SEARCH_KINDS

    assert SEARCH_KINDS == KINDS
