"""A guard in front of the ACP SDK's connection: every stdin line is checked first.

The SDK's stdio reader drops a line that is not JSON without an answer, and a line that is
JSON but not an object (``42``, ``null``, ``[...]``) stops its receive loop, so the agent
exits. `GuardedStdioTransport` reads the newline-delimited JSON itself and hands the SDK only
well-formed messages; anything else is answered as JSON-RPC 2.0 says and the agent keeps
running:

- a line that is not JSON (or not UTF-8): ``-32700 Parse error``, id ``null``;
- JSON that is not an object (``42``, ``"x"``, ``null``, ``[]``): ``-32600 Invalid Request``,
  id ``null``;
- a batch (a non-empty array): batches are not part of ACP and not supported; the whole line
  gets one ``-32600`` error, id ``null``, whose data says so (no element is run);
- an object without a string ``method`` that is not a response (``{}``, ``{"id": 1}``), a
  ``jsonrpc`` other than ``"2.0"``, an id that is not a string, an integer or null, or
  ``params`` that are neither an object nor an array: ``-32600``, with the request's id when it
  has a usable one, else ``null``.

A response (``id`` and ``result`` or ``error``, no ``method``) from the client to one of our
requests is passed on; one with an unusable id or a malformed ``error`` is logged and dropped
or made well-formed, never allowed to crash the reader.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

__all__ = ["GuardedStdioTransport", "check_line"]

logger = logging.getLogger("todo_sessions.acp")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


_encode = json.JSONEncoder(separators=(",", ":")).encode
"""``json.dumps(message, separators=(",", ":"))``, with one encoder made once."""


def _error(code: int, message: str, request_id: Any = None, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _usable_id(value: Any) -> bool:
    return value is None or isinstance(value, str) or type(value) is int


def check_line(line: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(message, None)`` for a well-formed message, ``(None, error response)`` for a line to
    answer with an error, ``(None, None)`` for a line to skip (blank, or a bad response)."""
    line = line.strip()
    if not line:
        return None, None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested absurdly deep
        return None, _error(PARSE_ERROR, "Parse error", data={"reason": "the line is not JSON"})
    if isinstance(value, list):
        reason = "batch requests are not supported" if value else "empty batch"
        return None, _error(INVALID_REQUEST, "Invalid Request", data={"reason": reason})
    if not isinstance(value, dict):
        reason = f"a message must be a JSON object, not {_kind(value)}"
        return None, _error(INVALID_REQUEST, "Invalid Request", data={"reason": reason})
    request_id = value.get("id")
    reply_id = request_id if _usable_id(request_id) else None
    if "method" not in value and "id" in value and ("result" in value or "error" in value):
        return _response(value), None
    problem = _request_problem(value)
    if problem is not None:
        return None, _error(INVALID_REQUEST, "Invalid Request", reply_id, {"reason": problem})
    return value, None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def _request_problem(value: dict[str, Any]) -> str | None:
    if "jsonrpc" in value and value["jsonrpc"] != "2.0":
        return 'jsonrpc must be "2.0"'
    method = value.get("method")
    if method is None:
        return "a request needs a method"
    if not isinstance(method, str) or not method:
        return "method must be a non-empty string"
    if "id" in value and not _usable_id(value["id"]):
        return "id must be a string, an integer or null"
    if "params" in value and not isinstance(value["params"], dict | list):
        return "params must be an object or an array"
    return None


def _response(value: dict[str, Any]) -> dict[str, Any] | None:
    """A client's response, made safe for the SDK (which indexes and hashes it)."""
    if not _usable_id(value["id"]):
        logger.warning("dropped a response with an unusable id")
        return None
    if "error" in value and not isinstance(value["error"], dict):
        return {**value, "error": {"code": -32603, "message": "malformed error response"}}
    return value


class GuardedStdioTransport:
    """The SDK's message transport over newline-delimited JSON, with `check_line` in front.

    ``receive`` returns only well-formed messages (None at end of input); a malformed line is
    answered on the spot and reading goes on. Writes are serialised: each message is one line;
    `send_many` writes several messages (their lines in order) with one write and one drain.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        data = (_encode(message) + "\n").encode("utf-8")
        async with self._lock:
            self._writer.write(data)
            await self._writer.drain()

    async def send_many(self, messages: list[dict[str, Any]]) -> None:
        """Send ``messages`` in order, one line each, in one write (a replay's page)."""
        if not messages:
            return
        data = "".join([_encode(message) + "\n" for message in messages]).encode("utf-8")
        async with self._lock:
            self._writer.write(data)
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if not line:
                return None
            message, error = check_line(line)
            if error is not None:
                logger.warning("answered a malformed message: %s", error["error"]["message"])
                await self.send(error)
            if message is not None:
                return message

    async def close(self) -> None:
        async with self._lock:
            self._writer.close()

    async def _read_line(self) -> bytes:
        """One line, however long (the reader's limit only bounds each piece read)."""
        chunks: list[bytes] = []
        try:
            while True:
                try:
                    chunks.append(await self._reader.readuntil(b"\n"))
                    return b"".join(chunks)
                except asyncio.LimitOverrunError as exc:
                    chunks.append(await self._reader.readexactly(exc.consumed))
        except asyncio.IncompleteReadError as exc:
            chunks.append(exc.partial)
            return b"".join(chunks)
