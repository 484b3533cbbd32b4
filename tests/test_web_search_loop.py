"""A hostile search does not stop the viewer (issue 39, item 1): the snippets of a page of
hits are built off the event loop, so ``todo-sessions serve`` answers other requests while
searches over long message bodies run. A bound (1 s for a request that takes milliseconds),
not a benchmark: before, each such search held the loop for a second or more."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from factories import header, turn
from test_web import serving

from todo_sessions import SyncSessionStore

HITS = 100
"""The viewer's largest page."""
BODY = "é " * 49_000 + "needle"
"""Not ASCII, so a snippet looks at its words one by one, and the match is past the words a
snippet scans (`core.search.SNIPPET_SCAN_CHARS`): the most work a snippet does."""
HOSTILE = {"q": "needle ne* nee* need* needl*", "limit": str(HITS)}


def _long_sessions(url: str) -> None:
    with SyncSessionStore(url) as store:
        for s in range(4):
            store.create(header(f"long{s}"))
            events = [e for n in range(30) for e in turn(6 * n, n + 1, text=BODY)]
            store.append(f"long{s}", events)


def _get(url: str) -> tuple[float, bytes]:
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=300) as answer:
        body = answer.read()
    return time.monotonic() - started, body


def test_the_viewer_answers_while_hostile_searches_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/long.db"
    _long_sessions(url)
    with serving(url) as base:
        searched: list[int] = []
        failed: list[BaseException] = []

        def search() -> None:
            try:
                for _ in range(2):
                    _, body = _get(f"{base}/api/search?{urlencode(HOSTILE)}")
                    searched.append(len(json.loads(body)["hits"]))
            except BaseException as exc:  # reported below
                failed.append(exc)

        searchers = [threading.Thread(target=search) for _ in range(3)]
        for thread in searchers:
            thread.start()
        waits = []
        while any(t.is_alive() for t in searchers):
            seconds, body = _get(f"{base}/api/sessions?limit=1")
            assert json.loads(body)["sessions"]
            waits.append(seconds)
            time.sleep(0.05)
        for thread in searchers:
            thread.join()
    assert not failed, failed
    assert searched == [HITS] * 6  # every search built a whole page of snippets
    assert len(waits) >= 3, waits  # the searches ran long enough to be asked meanwhile
    assert max(waits) < 1.0, waits
