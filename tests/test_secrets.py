"""Secrets stay out of everything: a provider that echoes the API key in its error answers (a
fake server on loopback, 401 and 500), the default key sent only to its provider's own host,
and passwords masked in every URL the command line and the viewer show."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_model_adapters import FakeServer, Reply, prompt

from todo_sessions import Session, SessionHeader, SessionStore, export_lines
from todo_sessions._redact import mask_url, mask_urls, redact
from todo_sessions.cli import main
from todo_sessions.errors import ModelAuthError, ModelRequestError
from todo_sessions.harness import AgentLoop, TodoWriteTool, ToolRegistry
from todo_sessions.harness.adapters import (
    AnthropicModel,
    OpenAIChatModel,
    RetryPolicy,
    model_from_spec,
)

KEY = "sk-proj-Echoed0Secret0Key0123456789"
FAST = RetryPolicy(attempts=2, base_delay=0.0, max_delay=0.0)


def echoing(status: int) -> Reply:
    """An error answer that quotes the key back, as some proxies do."""
    message = f"Incorrect API key provided: Bearer {KEY}; key={KEY}"
    return Reply(status=status, body={"error": {"message": message, "type": "invalid_request"}})


def formatted(records: list[logging.LogRecord]) -> str:
    """The records as a handler with a traceback-printing formatter writes them."""
    formatter = logging.Formatter("%(levelname)s %(name)s %(message)s")
    return "\n".join(formatter.format(r) for r in records)


def database_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def viewer_html(url: str, session_id: str) -> str:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from todo_sessions.web import create_app

    paths = ["/sessions/", "/api/sessions/", "/api/sessions/", "/api/sessions/"]
    tails = ["", "/state", "/timeline", "/export"]
    with TestClient(create_app(url), base_url="http://127.0.0.1") as client:
        pages = [client.get(f"{p}{session_id}{t}") for p, t in zip(paths, tails, strict=True)]
    assert all(page.status_code == 200 for page in pages)
    text = "\n".join(page.text for page in pages)
    assert "HTTP 401" in text or "HTTP 500" in text  # the redacted error is shown
    return text


# -- the adapter and the loop: 401 and 500 that echo the key ---------------------------------------


@pytest.mark.parametrize("status", [401, 500])
async def test_an_echoed_key_is_nowhere(
    status: int, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # the default key, to a loopback base URL
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    caplog.set_level(logging.DEBUG)
    async with FakeServer(*[echoing(status)] * 4) as server:
        model = OpenAIChatModel("m", base_url=f"{server.url}/v1", retry=FAST)
        header = SessionHeader(id="s1", created_at=1_764_000_000_000, cwd="/r")
        session = Session(header, strict=True)
        registry = ToolRegistry()
        registry.register(TodoWriteTool())
        outcome = await AgentLoop(session, model, registry, model_retries=0).run_turn("hi")
        async with SessionStore(url) as store:
            await store.create(header)
            await store.append("s1", session.events)
            direct: BaseException | None = None
            try:
                async for _ in model.stream(prompt(), []):
                    pass
            except ModelRequestError as exc:
                direct = exc
            events = (await store.read("s1")).events
            exported = "\n".join([line async for line in export_lines(store, "s1")])
        await model.aclose()
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"  # it was sent
    assert outcome.reason == "error"
    end = events[-1]
    assert end.type == "turn/end"
    error = end.data["reason"]["error"]
    # the event keeps the status, the error type and the message, redacted
    assert error["status"] == status
    assert error["code"] == ("ModelAuthError" if status == 401 else "ModelRequestError")
    assert f"HTTP {status}" in error["message"] and "[redacted]" in error["message"]
    assert direct is not None and direct.__cause__ is None and direct.__context__ is None
    import traceback

    shown = "".join(traceback.format_exception(direct))
    assert "[redacted]" in shown
    logs = formatted(caplog.records)
    assert "Traceback" in logs  # the loop logged the failure with its traceback
    for place, text in {
        "events": json.dumps([e.to_json() for e in events]),
        "export": exported,
        "exception": shown,
        "log records": logs,
        "database": database_bytes(path).decode("latin-1"),
        "viewer": viewer_html(url, "s1"),
    }.items():
        assert KEY not in text, place
        assert KEY[8:] not in text, place


# -- the ACP agent over stdio: messages, stderr, with and without --debug --------------------------


async def _acp_prompt(server_url: str, db: Path, debug: bool) -> tuple[str, str, str]:
    env = {
        **os.environ,
        "TODO_SESSIONS_URL": f"sqlite:///{db}",
        "PYTHONPATH": os.pathsep.join(sys.path),
        "OPENAI_API_KEY": KEY,
    }
    args = ["-m", "todo_sessions", *(["--debug"] if debug else []), "acp"]
    args += ["--model", "openai:m", "--base-url", f"{server_url}/v1"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out: list[str] = []

    async def call(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        proc.stdin.write((json.dumps(message) + "\n").encode())
        await proc.stdin.drain()
        while True:
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
            assert line, "the agent exited"
            out.append(line)
            reply = json.loads(line)
            if reply.get("id") == request_id and "method" not in reply:
                return reply

    await call(1, "initialize", {"protocolVersion": 1})
    new = await call(2, "session/new", {"cwd": str(db.parent), "mcpServers": []})
    session_id = new["result"]["sessionId"]
    answer = await call(
        3, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
    )
    assert "error" in answer, answer  # the turn failed: the client is told
    proc.stdin.close()
    rest, err = await asyncio.wait_for(proc.communicate(), 60)
    return "".join(out) + rest.decode(), err.decode(), session_id


@pytest.mark.slow
async def test_the_acp_agent_never_shows_an_echoed_key(tmp_path: Path) -> None:
    replies = [echoing(401), echoing(401)]
    async with FakeServer(*replies) as server:
        plain = await _acp_prompt(server.url, tmp_path / "plain.db", debug=False)
        debug = await _acp_prompt(server.url, tmp_path / "debug.db", debug=True)
    for (messages, stderr, _), with_debug in ((plain, False), (debug, True)):
        assert "HTTP 401" in messages  # the error reached the client, redacted
        assert KEY not in messages and KEY not in stderr
        assert ("Traceback" in stderr) is with_debug, stderr
    for name, (_, _, session_id) in (("plain.db", plain), ("debug.db", debug)):
        db = tmp_path / name
        assert KEY.encode() not in database_bytes(db)
        args = ["--db", str(db), "export", session_id]
        exported = await asyncio.to_thread(CliRunner().invoke, main, args)
        assert exported.exit_code == 0 and "turn/end" in exported.stdout
        assert KEY not in exported.stdout
        assert KEY not in await asyncio.to_thread(viewer_html, f"sqlite:///{db}", session_id)


# -- where the default key may go ----------------------------------------------------------------


@pytest.mark.parametrize(
    "base_url",
    ["http://proxy.example/v1", "https://api.openai.com.evil.example/v1", "http://10.0.0.1/v1"],
)
def test_the_default_key_goes_only_to_its_own_host(
    base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    for spec in ("openai:m", "openai-responses:m", "anthropic:m"):
        with pytest.raises(ModelAuthError, match="--api-key-env") as caught:
            model_from_spec(spec, base_url=base_url)
        assert KEY not in str(caught.value)
    # named explicitly, it goes where it is told
    model_from_spec("openai:m", base_url=base_url, api_key_env="OPENAI_API_KEY")
    for fine in ("http://127.0.0.1:9/v1", "http://localhost:9", "http://[::1]:9/v1", None):
        model_from_spec("openai:m", base_url=fine)
    model_from_spec("openai:m", base_url="https://api.openai.com/v1")
    AnthropicModel("m", base_url="https://api.anthropic.com")
    # the SDK's own base URL variable counts as a base URL
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    with pytest.raises(ModelAuthError):
        OpenAIChatModel("m")


def test_a_deepseek_key_goes_only_to_deepseek(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    real = model_from_spec("openai:deepseek-chat", base_url="https://api.deepseek.com")
    assert real._client.api_key == KEY
    fake = model_from_spec("openai:m", base_url="http://evil.example/deepseek")
    assert fake._client.api_key != KEY


def test_the_cli_says_in_one_line_what_to_pass(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": KEY, "TODO_SESSIONS_URL": f"sqlite:///{tmp_path}/x.db"}
    args = ["acp", "--model", "openai:m", "--base-url", "http://proxy.example/v1"]
    result = CliRunner().invoke(main, args, env=env, input="")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "--api-key-env OPENAI_API_KEY" in lines[0] and "proxy.example" in lines[0]
    assert KEY not in result.stderr


# -- redaction and masking -------------------------------------------------------------------------


def test_redact_known_keys_and_key_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "plain-words-key")
    cases = {
        "401: Bearer abc.def-ghi_jkl": "401: Bearer [redacted]",
        "got sk-ant-api03-AbCdEf012345 here": "got [redacted] here",
        '{"api_key": "hunter22"}': '{"api_key": "[redacted]"}',
        "x-api-key: abcd1234": "x-api-key: [redacted]",
        "session 0123456789abcdef0123456789abcdef": "session 0123456789abcdef0123456789abcdef",
        "the plain-words-key leaked": "the [redacted] leaked",
        "my-own-secret-value": "[redacted]",
        "HTTP 500: internal error": "HTTP 500: internal error",
    }
    for text, expected in cases.items():
        assert redact(text, ["my-own-secret-value"]) == expected, text


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:hunter2@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:hun@ter2@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgresql://u@h/db?password=hunter2", "postgresql://u@h/db?password=***"),
        (
            "postgresql://u@h/db?sslmode=require&PASSWORD=x&a=1",
            "postgresql://u@h/db?sslmode=require&PASSWORD=***&a=1",
        ),
        (
            "postgresql+asyncpg://u:a@b@h/db?password=c",
            "postgresql+asyncpg://u:***@h/db?password=***",
        ),
        ("sqlite:///tmp/a:b@c.db", "sqlite:///tmp/a:b@c.db"),
        ("/tmp/plain.db", "/tmp/plain.db"),
        # a password spelled with what a URL's own syntax uses, unencoded
        ("postgresql://u:hun#ter2@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:hun?ter2@h/db?x=1", "postgresql://u:***@h/db?x=1"),
        ("postgresql://u:12?ter2@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:hun/ter2@h1:5432,h2:5433/db", "postgresql://u:***@h1:5432,h2:5433/db"),
        ("postgresql://u@h/db?password=hun#ter2", "postgresql://u@h/db?password=***"),
        # a parameter name percent-encoded
        ("postgresql://u@h/db?pass%77ord=hunter2&x=1", "postgresql://u@h/db?pass%77ord=***&x=1"),
        ("postgresql://u@h/db?ssl%70assword=hunter2", "postgresql://u@h/db?ssl%70assword=***"),
    ],
)
def test_mask_url(url: str, shown: str) -> None:
    assert mask_url(url) == shown
    if url.startswith("postgresql://"):  # what the store's errors and `StoreURL.given` show
        from todo_sessions.store.engine import mask_password

        assert mask_password(url) == shown


def test_mask_urls_in_a_message() -> None:
    message = "cannot connect to postgresql://u@h/db?password=hunter2: refused (see http://x/)"
    assert mask_urls(message) == (
        "cannot connect to postgresql://u@h/db?password=***: refused (see http://x/)"
    )


def test_the_viewer_header_masks_every_password(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from todo_sessions.web import create_app

    store = SessionStore(f"sqlite:///{tmp_path}/v.db")
    for shown in ("postgresql://u:hun@ter2@h/db", "postgresql://u@h/db?password=hunter2"):
        app = create_app(store, database=shown, own_store=False)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            page = client.get("/").text
        assert "hunter2" not in page and "ter2" not in page
        assert "***" in page


def test_migrate_list_and_serve_mask_a_query_password(fresh_pg_url: str) -> None:
    url = fresh_pg_url.replace("+asyncpg", "") + "?password=hunter2"
    runner = CliRunner()
    migrated = runner.invoke(main, ["--db", url, "migrate"])
    assert migrated.exit_code == 0, migrated.output
    assert "password=***" in migrated.stdout and "hunter2" not in migrated.output
    for n in range(2):
        runner.invoke(main, ["--db", url, "demo", "--id", f"d{n}"])
    listed = runner.invoke(main, ["--db", url, "list", "--limit", "1"])
    assert listed.exit_code == 0, listed.output
    assert "next page:" in listed.stdout and "hunter2" not in listed.output

    from todo_sessions.cli._context import Context

    context = Context(url, False, db_given=True)
    assert "hunter2" not in context.location() and "hunter2" not in context.store_url()
