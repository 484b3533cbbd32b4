"""The viewer stays local: the Host allow-list (loopback, ``--allow-host``, a wildcard
``--host`` refused without one), the Origin / fetch-metadata / token checks of a fork, and the
header timeout of the real server."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")

from click.testing import CliRunner
from starlette.testclient import TestClient
from test_web import DEMO, make_demo, serving

from todo_sessions import SyncSessionStore
from todo_sessions.cli import main
from todo_sessions.web import create_app
from todo_sessions.web.security import host_name
from todo_sessions.web.server import HostError, allowed_hosts


def test_allowed_hosts() -> None:
    local = ["127.0.0.1", "localhost", "::1", "[::1]"]
    assert allowed_hosts("127.0.0.1") == local
    assert allowed_hosts("192.168.1.5") == [*local, "192.168.1.5"]
    assert allowed_hosts("0.0.0.0", ["viewer.lan"]) == [*local, "viewer.lan"]
    assert allowed_hosts("::", ["a", "b", "a"]) == [*local, "a", "b"]
    for wildcard in ("0.0.0.0", "::", ""):
        with pytest.raises(HostError, match="--allow-host NAME"):
            allowed_hosts(wildcard)
    assert host_name("[::1]:8765") == "::1"
    assert host_name("Viewer.LAN.:80") == "viewer.lan"
    assert host_name("127.0.0.1") == "127.0.0.1"


def test_serve_on_every_interface_needs_allow_host(tmp_path: Path) -> None:
    for wildcard in ("0.0.0.0", "::"):
        args = ["--db", str(tmp_path / "x.db"), "serve", "--host", wildcard, "--port", "0"]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: --host")
        assert "--allow-host NAME" in lines[0]
    bad = CliRunner().invoke(main, ["serve", "--allow-host", "http://x/"])
    assert bad.exit_code == 2 and "--allow-host takes a host name" in bad.stderr


@pytest.fixture(scope="module")
def forkable(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int]:
    url = f"sqlite:///{tmp_path_factory.mktemp('sec') / 'sec.db'}"
    make_demo(url)
    with SyncSessionStore(url) as store:
        between = next(e.seq for e in store.read_from(DEMO) if e.type == "turn/end")
    return url, between


def test_the_host_matrix(forkable: tuple[str, int]) -> None:
    url, _ = forkable
    cases = {
        "127.0.0.1:8765": 200,
        "localhost:8765": 200,
        "[::1]:8765": 200,
        "LOCALHOST": 200,
        "viewer.lan:8765": 200,
        "evil.example": 400,
        "evil.example:8765": 400,
        "127.0.0.1.evil.example": 400,
        "": 400,
    }
    wildcard = create_app(url, allowed_hosts=allowed_hosts("0.0.0.0", ["viewer.lan"]))
    local = create_app(url, allowed_hosts=allowed_hosts("127.0.0.1"))
    with TestClient(wildcard) as w, TestClient(local) as loopback:
        for host, status in cases.items():
            assert w.get("/", headers={"host": host}).status_code == status, host
            expected = 400 if host.startswith("viewer.lan") else status
            assert loopback.get("/", headers={"host": host}).status_code == expected, host
        refused = w.get(f"/api/sessions/{DEMO}/state", headers={"host": "evil.example"})
        assert refused.status_code == 400 and "content-security-policy" in refused.headers


def test_the_origin_and_token_matrix(forkable: tuple[str, int]) -> None:
    url, between = forkable
    app = create_app(url, allow_writes=True, allowed_hosts=allowed_hosts("0.0.0.0", ["v.lan"]))
    with TestClient(app, base_url="http://v.lan:8765") as client:
        page = client.get(f"/sessions/{DEMO}").text
        found = re.search(r'data-fork-token="([^"]+)"', page)
        assert found is not None and found.group(1) == app.state.fork_token
        token = found.group(1)
        fork = f"/api/sessions/{DEMO}/fork?at={between}"
        form = {"content-type": "application/x-www-form-urlencoded"}
        same_site = {**form, "sec-fetch-site": "same-origin"}
        body = f"fork_token={token}"
        cases: list[tuple[dict[str, str], str, int]] = [
            (same_site, body, 201),
            ({**form, "origin": "http://v.lan:8765"}, body, 201),  # no fetch metadata
            ({**same_site, "origin": "http://v.lan:8765"}, body, 201),
            (form, body, 403),  # neither Origin nor Sec-Fetch-Site
            ({**form, "origin": "http://evil.example"}, body, 403),
            ({**form, "origin": "null"}, body, 403),
            ({**form, "origin": "https://v.lan:8765"}, body, 403),  # another scheme
            ({**form, "sec-fetch-site": "cross-site"}, body, 403),
            ({**form, "sec-fetch-site": "same-site"}, body, 403),
            ({**form, "sec-fetch-site": "cross-site", "origin": "http://v.lan:8765"}, body, 403),
            (same_site, "", 403),  # missing token
            (same_site, "fork_token=wrong", 403),
            (same_site, f"fork_token={token}&fork_token={token}", 403),
            ({**same_site, "host": "evil.example"}, body, 400),  # DNS rebinding
        ]
        for headers, content, status in cases:
            answer = client.post(fork, headers=headers, content=content)
            assert answer.status_code == status, (headers, content, answer.text)
            if status == 403:
                assert "own page" in answer.text or "token" in answer.text
    other = create_app(url, allow_writes=True)  # another server: another token
    assert other.state.fork_token != app.state.fork_token
    read_only = create_app(url, allowed_hosts=["testserver"])
    with TestClient(read_only) as client:
        refused = client.post(f"/api/sessions/{DEMO}/fork", headers=same_site, content=body)
        assert refused.status_code == 403 and "read-only" in refused.text


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` (recv gives b"") within ``seconds``."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False


@pytest.mark.slow
def test_the_real_server_checks_host_and_times_out_half_sent_heads(
    forkable: tuple[str, int],
) -> None:
    url, _ = forkable
    options = ("--host", "0.0.0.0", "--allow-host", "viewer.lan", "--header-timeout", "0.5")
    with serving(url, *options) as base:
        port = int(base.rsplit(":", 1)[1])

        def ask(host: str) -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                head = f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                sock.sendall(head.encode())
                return sock.recv(64)

        assert ask("viewer.lan").startswith(b"HTTP/1.1 200")
        assert ask("evil.example").startswith(b"HTTP/1.1 400")
        half = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(20)]
        try:
            for sock in half:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
            time.sleep(0.2)
            assert all(_closed_within(sock, 30) for sock in half)
        finally:
            for sock in half:
                sock.close()
        assert ask("localhost").startswith(b"HTTP/1.1 200")  # still serving
