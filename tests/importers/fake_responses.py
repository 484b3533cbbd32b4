"""A loopback fake of the OpenAI Responses API (``POST /v1/responses``, streamed as server-sent
events), scripted for the Codex CLI: the agent writes a plan, runs a command, delegates to a
sub-agent and waits for it, completes the plan and answers. Each answer is chosen from the
request alone (which tool outputs it carries), so the order the CLI's threads ask in does not
matter. The request bodies are kept in ``requests``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROMPT = "Plan the work, run a command, delegate a part, then answer."
SUBTASK = "Delegated: print the word delegated."
FINAL = "All done: the plan is complete."
SUB_FINAL = "The sub-agent printed the word."
PLAN_START = {
    "explanation": "Two steps",
    "plan": [
        {"step": "Run a command", "status": "in_progress"},
        {"step": "Delegate a part", "status": "pending"},
    ],
}
PLAN_DONE = {
    "plan": [
        {"step": "Run a command", "status": "completed"},
        {"step": "Delegate a part", "status": "completed"},
    ]
}


def _call(name: str, args: dict[str, Any], call_id: str, namespace: str | None = None) -> dict:
    item = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name}
    item["arguments"] = json.dumps(args)
    if namespace is not None:
        item["namespace"] = namespace
    return item


def _message(text: str, n: int) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text}]
    return {"type": "message", "role": "assistant", "id": f"msg_{n}", "content": content}


def _user_texts(items: list[dict[str, Any]]) -> list[str]:
    return [
        part.get("text", "")
        for item in items
        if item.get("type") == "message" and item.get("role") == "user"
        for part in item.get("content", [])
        if isinstance(part, dict)
    ]


def answer(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The output items for one request."""
    items = [i for i in body.get("input", []) if isinstance(i, dict)]
    outputs = {
        i["call_id"]: i.get("output") for i in items if i.get("type") == "function_call_output"
    }
    if SUBTASK in _user_texts(items):  # the sub-agent's thread
        if "sub_1" not in outputs:
            return [_call("exec_command", {"cmd": "echo delegated"}, "sub_1")]
        return [_message(SUB_FINAL, 2)]
    if "main_1" not in outputs:
        summary = [{"type": "summary_text", "text": "Planning the work"}]
        reasoning = {"type": "reasoning", "id": "rs_1", "summary": summary}
        return [reasoning, _call("update_plan", PLAN_START, "main_1")]
    if "main_2" not in outputs:
        return [_call("exec_command", {"cmd": "echo tool-ran-here"}, "main_2")]
    if "main_3" not in outputs:
        return [_call("spawn_agent", {"message": SUBTASK}, "main_3", "multi_agent_v1")]
    if "main_4" not in outputs:
        spawned = json.loads(str(outputs["main_3"])).get("agent_id", "")
        wait = {"targets": [spawned], "timeout_ms": 60000}
        return [_call("wait_agent", wait, "main_4", "multi_agent_v1")]
    if "main_5" not in outputs:
        return [_call("update_plan", PLAN_DONE, "main_5")]
    return [_message(FINAL, 1)]


def _events(items: list[dict[str, Any]]) -> bytes:
    def sse(kind: str, data: dict[str, Any]) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

    usage = {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 110,
    }
    out = [sse("response.created", {"response": {"id": "resp"}})]
    for i, item in enumerate(items):
        out.append(sse("response.output_item.done", {"output_index": i, "item": item}))
    out.append(sse("response.completed", {"response": {"id": "resp", "usage": usage}}))
    return b"".join(out)


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
        if not self.path.endswith("/responses"):
            self.send_response(404)
            self.end_headers()
            return
        data = _events(answer(body))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[dict[str, Any]]


@contextmanager
def fake_responses_server() -> Iterator[_Server]:
    """The server on a free loopback port, serving in a thread until the block ends."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
