"""A local fake of the Anthropic Messages API (loopback only) for the real Claude Code CLI.

`FakeAnthropic` serves ``POST /v1/messages`` (streamed as server-sent events when asked) from a
``reply(request) -> content blocks`` function, records every request body, and answers
anything else with 404. It runs in a thread, so a blocking client and an async test both
reach it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], list[dict[str, Any]]]


def _events(blocks: list[dict[str, Any]], model: str, n: int) -> list[tuple[str, dict[str, Any]]]:
    usage = {"input_tokens": 10, "output_tokens": 5}
    message = {
        "id": f"msg_fake_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    out: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": message})]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out.append(("content_block_start", {"index": i, "content_block": start}))
        out.append(("content_block_delta", {"index": i, "delta": delta}))
        out.append(("content_block_stop", {"index": i}))
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    out.append(
        (
            "message_delta",
            {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}},
        )
    )
    out.append(("message_stop", {}))
    return [(name, {"type": name, **data}) for name, data in out]


class FakeAnthropic:
    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.other_paths: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                fake.other_paths.append(self.path)
                self._send(404, b'{"type":"error","error":{"type":"not_found_error"}}')

            def do_HEAD(self) -> None:
                self._send(200, b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.split("?")[0].endswith("/v1/messages"):
                    fake.other_paths.append(self.path)
                    if "count_tokens" in self.path:
                        self._send(200, b'{"input_tokens": 10}')
                    else:
                        self._send(404, b'{"type":"error","error":{"type":"not_found_error"}}')
                    return
                fake.requests.append(body)
                n = len(fake.requests)
                blocks = fake.reply(body)
                model = body.get("model", "claude-fake")
                if not body.get("stream"):
                    events = _events(blocks, model, n)
                    message = events[0][1]["message"]
                    message["content"] = blocks
                    message["stop_reason"] = events[-2][1]["delta"]["stop_reason"]
                    self._send(200, json.dumps(message).encode())
                    return
                payload = b"".join(
                    f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                    for name, data in _events(blocks, model, n)
                )
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(payload)))
                self.send_header("request-id", f"req_fake_{n}")
                self.end_headers()
                self.wfile.write(payload)

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
