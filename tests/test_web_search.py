"""The viewer's search: the box on the session list, /search and /api/search; hits open the
session at their seq; stored text in snippets is escaped, the matched words marked."""

from __future__ import annotations

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
