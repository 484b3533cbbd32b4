"""Bounded work per request and per line: the viewer of a 100,000-event session (peak memory
of one request and of six at once, measured with tracemalloc: bounds, not timings), a message
over the size limit shown cut with a link to its full text, and the line limits of ``import``
and of the ACP stdin reader."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from factories import header, turn

from todo_sessions import SessionStore, SyncSessionStore, export_lines
from todo_sessions.acp.jsonrpc import GuardedStdioTransport
from todo_sessions.cli import main

MB = 1024 * 1024


async def _big_session(url: str, events: int) -> None:
    """A session of ``events`` events (small turns, a 1 KB user message in each), appended in
    large batches."""
    async with SessionStore(url) as store:
        await store.create(header("big", title="big"))
        batch: list[Any] = []
        seq = 0
        number = 0
        while seq < events:
            number += 1
            batch += turn(seq, number, text=f"message {number} " + "x" * 1000)
            seq += 6
            if len(batch) >= 12_000 or seq >= events:
                await store.append("big", batch)
                batch = []


def test_the_viewer_of_a_100000_event_session_is_bounded(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    import httpx2 as httpx

    from todo_sessions.web import create_app

    url = f"sqlite:///{tmp_path / 'big.db'}"
    asyncio.run(_big_session(url, 100_002))

    async def main() -> tuple[int, int, list[int]]:
        async with SessionStore(url) as store:
            app = create_app(store, allowed_hosts=["127.0.0.1"], own_store=False)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                paths = ["/sessions/big", "/api/sessions/big/state", "/sessions/big?at=50100"]
                for path in paths:  # warm: templates compiled, connections open
                    assert (await c.get(path)).status_code == 200
                peaks = []
                for path in paths:
                    tracemalloc.start()
                    answer = await c.get(path)
                    peaks.append(tracemalloc.get_traced_memory()[1])
                    tracemalloc.stop()
                    assert answer.status_code == 200
                state = (await c.get("/api/sessions/big/state", params={"at": 50_100})).json()
                tracemalloc.start()
                answers = await asyncio.gather(
                    *[c.get(paths[i % 3]) for i in range(6)],
                )
                six = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                assert all(a.status_code == 200 for a in answers)
                return max(peaks), six, state["messageSeqs"]

    one, six, seqs = asyncio.run(main())
    assert one < 60 * MB, f"one request peaked at {one / MB:.1f} MB"
    assert six < 200 * MB, f"six requests peaked at {six / MB:.1f} MB"
    print(f"peak of one request {one / MB:.1f} MB, of six at once {six / MB:.1f} MB")
    # what it built is the window of seq 50,100: the user messages of seqs 50,000..50,100
    assert seqs == [s for s in range(50_000, 50_101) if s % 6 == 1]


# -- a message over the size limit ---------------------------------------------------------------


def test_a_big_message_is_shown_cut_with_a_link_to_its_full_text(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from todo_sessions.web import create_app

    url = f"sqlite:///{tmp_path / 'm.db'}"
    huge = "é" * 1_500_000 + "THE END"  # 3 MB of UTF-8
    with SyncSessionStore(url) as store:
        store.create(header("m"))
        store.append("m", [*turn(0, 1, text=huge)[:2]])
    with TestClient(create_app(url), base_url="http://127.0.0.1") as client:
        page = client.get("/sessions/m")
        assert page.status_code == 200
        assert len(page.content) < 2.5 * MB  # the text is in the timeline and in the pane
        assert "THE END" not in page.text
        assert page.text.count('href="/api/sessions/m/message?seq=1"') == 2
        state = client.get("/api/sessions/m/state").json()
        block = state["messages"][0]["content"][0]
        assert block["cut"] == {"bytes": len(huge.encode())}
        assert len(block["text"].encode()) <= 1_000_000
        full = client.get("/api/sessions/m/message?seq=1")
        assert full.status_code == 200 and full.text == huge
        assert client.get("/api/sessions/m/message?seq=9").status_code == 404
    small = create_app(url, message_limit=100)
    with TestClient(small, base_url="http://127.0.0.1") as client:
        block = client.get("/api/sessions/m/state").json()["messages"][0]["content"][0]
        assert block["text"] == "é" * 50 and block["cut"]["bytes"] == len(huge.encode())


# -- line limits ----------------------------------------------------------------------------------


def test_import_refuses_a_line_over_the_limit(tmp_path: Path) -> None:
    db = str(tmp_path / "i.db")
    source = f"sqlite:///{tmp_path / 'src.db'}"
    with SyncSessionStore(source) as store:
        store.create(header("s"))
        store.append("s", [*turn(0, 1, text="y" * 5000)])

    async def exported() -> list[str]:
        async with SessionStore(source) as store:
            return [line async for line in export_lines(store, "s")]

    path = tmp_path / "s.jsonl"
    path.write_text("\r\n".join(asyncio.run(exported())) + "\r\n")  # CRLF is fine
    runner = CliRunner()
    refused = runner.invoke(main, ["--db", db, "import", str(path), "--max-line-bytes", "4000"])
    assert refused.exit_code == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "line 3 is longer than 4000 bytes" in lines[0], refused.stderr
    assert json.loads(runner.invoke(main, ["--db", db, "list", "--json"]).stdout) == []
    accepted = runner.invoke(main, ["--db", db, "import", str(path)])
    assert accepted.exit_code == 0, accepted.output


class _Writer:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.lines.append(json.loads(data))

    async def drain(self) -> None:
        return None


async def test_the_acp_reader_refuses_a_line_over_the_limit() -> None:
    reader = asyncio.StreamReader(limit=1024)
    writer = _Writer()
    transport = GuardedStdioTransport(reader, writer, max_line=10_000)  # type: ignore[arg-type]
    ok = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    big = {"jsonrpc": "2.0", "id": 2, "method": "x", "params": {"p": "z" * 50_000}}
    exact = {"jsonrpc": "2.0", "id": 3, "method": "y", "params": {"p": ""}}
    exact["params"]["p"] = "q" * (10_000 - len(json.dumps(exact)))
    for message in (big, ok, exact, big):
        reader.feed_data(json.dumps(message).encode() + b"\n")
    reader.feed_data(b"w" * 30_000)  # too long, and cut by the end of input
    reader.feed_eof()
    assert await transport.receive() == ok
    assert writer.lines[0]["error"]["code"] == -32600
    assert "longer than 10000 bytes" in writer.lines[0]["error"]["data"]["reason"]
    assert await transport.receive() == exact  # exactly at the limit is fine
    assert await transport.receive() is None
    assert len(writer.lines) == 3
    with pytest.raises(ValueError):
        GuardedStdioTransport(reader, writer, max_line=0)  # type: ignore[arg-type]
