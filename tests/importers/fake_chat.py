"""A loopback fake of the OpenAI Chat Completions API (``POST /v1/chat/completions``, streamed
as server-sent events), scripted for the opencode CLI: the agent writes a todo list, runs a
command, delegates to a sub-agent (the ``task`` tool), updates the list (one item completed,
one cancelled) and answers. Each answer is chosen from the request alone (which tool results
it carries), so the order the CLI asks in does not matter; a request without tools (opencode's
title agent) gets the title. The request bodies are kept in ``requests``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROMPT = "Plan the work, run a command, delegate a part, then answer."
SUBTASK = "Delegated: print the word delegated."
FINAL = "All done: the list is complete."
SUB_FINAL = "The sub-agent printed the word."
TITLE = "Fake planned session"
FOLLOW_UP = "One more thing: say it again."
FOLLOW_ANSWER = "Said again: the list is complete."
REASONING = "Planning the work first."
TODOS_START = [
    {"content": "Run a command", "status": "in_progress", "priority": "high"},
    {"content": "Delegate a part", "status": "pending", "priority": "medium"},
    {"content": "Polish the answer", "status": "pending", "priority": "low"},
]
TODOS_DONE = [
    {"content": "Run a command", "status": "completed", "priority": "high"},
    {"content": "Delegate a part", "status": "completed", "priority": "medium"},
    {"content": "Polish the answer", "status": "cancelled", "priority": "low"},
]
MAIN_CALLS = [
    ("todowrite", {"todos": TODOS_START}),
    ("bash", {"command": "echo tool-ran-here", "description": "Print a word"}),
    ("task", {"description": "Print a word", "prompt": SUBTASK, "subagent_type": "general"}),
    ("todowrite", {"todos": TODOS_DONE}),
]


def _texts(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """``{text?, reasoning?, call?: (id, name, arguments)}`` for one request."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    if not body.get("tools"):
        return {"text": TITLE}
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    users = [_texts(m) for m in messages if m.get("role") == "user"]
    if users and FOLLOW_UP in users[-1]:
        return {"text": FOLLOW_ANSWER}
    if any(SUBTASK in _texts(m) for m in messages if m.get("role") == "user"):
        if "sub_1" not in answered:
            args = {"command": "echo delegated", "description": "Print delegated"}
            return {"call": ("sub_1", "bash", args)}
        return {"text": SUB_FINAL}
    for n, (name, args) in enumerate(MAIN_CALLS, 1):
        if f"main_{n}" not in answered:
            out: dict[str, Any] = {"call": (f"main_{n}", name, args)}
            if n == 1:
                out["reasoning"] = REASONING
            return out
    return {"text": FINAL}


def _chunks(reply: dict[str, Any]) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        data = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1}
        data.update(model="fake-model", choices=[choice], **extra)
        return b"data: " + json.dumps(data).encode() + b"\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    if "reasoning" in reply:
        out.append(chunk({"reasoning_content": reply["reasoning"]}))
    if "text" in reply:
        out.append(chunk({"content": reply["text"]}))
    finish = "stop"
    if "call" in reply:
        call_id, name, args = reply["call"]
        function = {"name": name, "arguments": json.dumps(args)}
        call = {"index": 0, "id": call_id, "type": "function", "function": function}
        out.append(chunk({"tool_calls": [call]}))
        finish = "tool_calls"
    usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    out.append(chunk({}, finish, usage=usage))
    return b"".join(out) + b"data: [DONE]\n\n"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(404)
        self.end_headers()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        self.server.requests.append(body)
        if not self.path.endswith("/chat/completions"):
            self.send_response(404)
            self.end_headers()
            return
        data = _chunks(answer(body))
        time.sleep(self.server.delay)  # a slower model: imports meet a session in progress
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[dict[str, Any]]
    delay: float


@contextmanager
def fake_chat_server(delay: float = 0.0) -> Iterator[_Server]:
    """The server on a free loopback port, serving in a thread until the block ends; each
    answer ``delay`` seconds late."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.requests = []
    server.delay = delay
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
