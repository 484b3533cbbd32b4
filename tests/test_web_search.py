"""The viewer's search: the box on the session list, /search and /api/search; hits open the
session at their seq; stored text in snippets is escaped, the matched words marked."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx2")

from factories import header, turn
from starlette.testclient import TestClient

from todo_sessions import SyncSessionStore
from todo_sessions.web.app import create_app
from todo_sessions.web.render import snippet_html

HOSTILE = '<script>alert("x")</script> needle & <b>bold</b> "quoted"'


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    url = f"sqlite:///{tmp_path}/web.db"
    with SyncSessionStore(url) as store:
        store.create(header("s<1>", title="<i>title</i>"))
        store.append("s<1>", turn(0, text=HOSTILE))
        for n in range(3):
            store.create(header(f"other{n}"))
            store.append(f"other{n}", turn(0, text=f"haystack needle number {n}"))
    with TestClient(create_app(url, allowed_hosts=["testserver"])) as client:
        yield client


def test_the_list_has_a_search_box(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert 'action="/search"' in page.text and 'name="q"' in page.text


def test_hits_are_escaped_marked_and_open_the_session_at_their_seq(client: TestClient) -> None:
    page = client.get("/search", params={"q": "needle bold"})
    assert page.status_code == 200
    assert (
        "<script>" not in page.text and "<b>bold" not in page.text and "<i>title" not in page.text
    )
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page.text
    assert "<mark>needle</mark> &amp; &lt;b&gt;<mark>bold</mark>&lt;/b&gt;" in page.text
    assert "&lt;i&gt;title&lt;/i&gt;" in page.text
    link = "/sessions/s%3C1%3E?at=1#seq-1"
    assert f'href="{link}"' in page.text
    opened = client.get(link.split("#")[0])
    assert opened.status_code == 200 and 'id="seq-1"' in opened.text


def test_the_api_pages_and_refuses_a_malformed_query(client: TestClient) -> None:
    first = client.get("/api/search", params={"q": "needle", "limit": 2}).json()
    assert [h["sessionId"] for h in first["hits"]] == ["other2", "other1"]
    rest = client.get(first["next"].replace("/search", "/api/search")).json()
    assert [h["sessionId"] for h in rest["hits"]] == ["other0", "s<1>"]
    assert rest["hits"][1]["snippet"].startswith('<script>alert("x")')  # JSON: the text itself
    assert rest["hits"][1]["url"] == "/sessions/s%3C1%3E?at=1#seq-1"
    bad = client.get("/api/search", params={"q": '"unbalanced'})
    assert bad.status_code == 400 and "unbalanced quote" in bad.json()["error"]
    page = client.get("/search", params={"q": "a OR <b>"})
    assert page.status_code == 400 and "boolean operators" in page.text
    assert "<b>" not in page.text.split("<main", 1)[1]


def test_snippet_html_escapes_every_piece() -> None:
    html = snippet_html("<a> x & y", ((4, 5),))
    assert str(html) == "&lt;a&gt; <mark>x</mark> &amp; y"
    assert str(snippet_html("<", ((0, 9),))) == "&lt;"  # a mark past the end is ignored


# -- what one request may cost (any web page can send one) --------------------------------------


def test_a_query_with_too_many_terms_or_prefixes_is_refused(client: TestClient) -> None:
    hostile = " ".join(f"w{n}*" for n in range(32))
    answer = client.get("/api/search", params={"q": hostile, "limit": 500})
    assert answer.status_code == 400
    assert answer.json()["error"] == "search query: 32 terms: the viewer searches at most 8"
    page = client.get("/search", params={"q": hostile})
    assert page.status_code == 400 and "the viewer searches at most 8" in page.text
    five = client.get("/api/search", params={"q": "a* b* c* d* needle*"})
    assert five.status_code == 400
    assert "5 prefix terms: the viewer searches at most 4" in five.json()["error"]
    eight = client.get("/api/search", params={"q": "needle haystack* -a -b -c -d -e -f"})
    assert eight.status_code == 200  # eight terms, one a prefix: run
    assert sorted(h["sessionId"] for h in eight.json()["hits"]) == ["other0", "other1", "other2"]


def test_a_page_holds_at_most_100_hits(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/many.db"
    with SyncSessionStore(url) as store:
        store.create(header("many"))
        store.append("many", [e for n in range(130) for e in turn(6 * n, n + 1, text="needle")])
    with TestClient(create_app(url, allowed_hosts=["testserver"])) as client:
        first = client.get("/api/search", params={"q": "needle", "limit": 500}).json()
    newest = sorted((6 * n + 1 for n in range(130)), reverse=True)
    assert [h["seq"] for h in first["hits"]] == newest[:100]  # 100 snippets built, not 130
    assert first["next"] is not None


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"before": str(2**63)}, "before must be <= 9223372036854775807"),
        ({"before": "0"}, "before must be >= 1"),
        ({"cwd": "\x00"}, "cwd must not contain NUL characters"),
        ({"tag": "t\x00"}, "tag must not contain NUL characters"),
        ({"limit": "many"}, "limit must be an integer"),
    ],
)
def test_out_of_range_parameters_are_400(
    client: TestClient, params: dict[str, str], problem: str
) -> None:
    answer = client.get("/api/search", params={"q": "needle", **params})
    assert answer.status_code == 400 and problem in answer.json()["error"]
    page = client.get("/search", params={"q": "needle", **params})
    assert page.status_code == 400 and html.escape(problem) in page.text
