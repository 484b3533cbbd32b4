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

A line longer than ``max_line`` bytes (`MAX_LINE_BYTES`, 64 MiB, by default) is not held in
memory: what is read past the limit is dropped up to the line's end, and the line is answered
``-32600``, id ``null``, data ``{"reason": "the line is longer than N bytes"}``.

A response (``id`` and ``result`` or ``error``, no ``method``) from the client to one of our
requests is passed on; one with an unusable id or a malformed ``error`` is logged and dropped
or made well-formed, never allowed to crash the reader.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

__all__ = ["MAX_LINE_BYTES", "GuardedStdioTransport", "check_line"]

logger = logging.getLogger("todo_sessions.acp")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest stdin line `GuardedStdioTransport` reads by default (64 MiB)."""


class _LineTooLong(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


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

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        max_line: int = MAX_LINE_BYTES,
    ) -> None:
        if max_line < 1:
            raise ValueError(f"max_line must be >= 1, got {max_line}")
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()
        self.max_line = max_line

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
            try:
                line = await self._read_line()
            except _LineTooLong as exc:
                reason = f"the line is longer than {exc.limit} bytes"
                logger.warning("answered a line longer than %d bytes", exc.limit)
                await self.send(_error(INVALID_REQUEST, "Invalid Request", data={"reason": reason}))
                continue
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
        """One line of up to ``max_line`` bytes (the reader's limit only bounds each piece
        read); a longer one is read to its end and dropped, raising `_LineTooLong`."""
        chunks: list[bytes] = []
        size = 0
        too_long = False
        try:
            while True:
                try:
                    piece = await self._reader.readuntil(b"\n")
                    ended = True
                except asyncio.LimitOverrunError as exc:
                    piece = await self._reader.readexactly(exc.consumed)
                    ended = False
                size += len(piece.rstrip(b"\r\n") if ended else piece)
                if size > self.max_line:
                    too_long = True
                    chunks.clear()  # keep reading to the line's end, holding nothing
                elif not too_long:
                    chunks.append(piece)
                if ended:
                    break
        except asyncio.IncompleteReadError as exc:
            size += len(exc.partial)
            if size > self.max_line:
                too_long = True
            elif not too_long:
                chunks.append(exc.partial)
            if too_long and not exc.partial:
                raise _LineTooLong(self.max_line) from None
        if too_long:
            raise _LineTooLong(self.max_line)
        return b"".join(chunks)
