"""Ways to break a PostgreSQL connection on purpose, for the reconnect tests.

- `terminate_backends`: ``pg_terminate_backend`` of every other backend of a database (what an
  operator or a failover does).
- `TcpProxy`: a TCP proxy in front of the server; ``reset()`` cuts every connection through it
  (a network reset), ``stop()``/``start()`` make the server unreachable and reachable again,
  and ``refuse(n)`` answers the next ``n`` connections as a full server does (SQLSTATE 53300,
  "too many clients already") without passing them on.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import struct
from collections.abc import Awaitable, Callable

from sqlalchemy.engine import make_url


def asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def with_scratch_database(server_url: str, work: Callable[[str], Awaitable[None]]) -> None:
    """Run ``work(url)`` on a new database of the server, dropped afterwards (benchmarks)."""
    import asyncpg

    name = f"todo_sessions_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(asyncpg_dsn(server_url))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        url = make_url(server_url).set(drivername="postgresql+asyncpg", database=name)
        await work(url.render_as_string(hide_password=False))
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def terminate_backends(url: str) -> int:
    """Terminate every backend of ``url``'s database but this one; how many were."""
    import asyncpg

    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        return int(
            await conn.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )
    finally:
        await conn.close()


_CANCEL_REQUEST = struct.pack("!i", 80877102)
"""The code of a CancelRequest (a new connection that only asks to cancel a statement)."""


class TcpProxy:
    """Forwards 127.0.0.1:<port> to the PostgreSQL server of ``url``."""

    def __init__(self, url: str) -> None:
        parsed = make_url(url)
        self.target = (parsed.host or "127.0.0.1", parsed.port or 5432)
        self.url_in = url
        self.port = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.StreamWriter] = set()
        self.refusing = 0
        self.refused = 0
        self.accepted = 0
        """Connections accepted (refused ones included)."""
        self.startups = 0
        """Accepted connections that began as a client's session (not a cancel request)."""
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._refusal = ("53300", "sorry, too many clients already")

    def refuse(self, count: int, sqlstate: str = "53300", message: str = "") -> None:
        """Answer the next ``count`` connections with a FATAL ``sqlstate`` at start-up, as
        PostgreSQL does when it takes no new connection (53300: too many connections; 57P03:
        starting up, shutting down)."""
        self.refusing = count
        self._refusal = (sqlstate, message or "sorry, too many clients already")

    def url(self) -> str:
        return (
            make_url(self.url_in)
            .set(host="127.0.0.1", port=self.port)
            .render_as_string(hide_password=False)
        )

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.refusing > 0:
            self.refusing -= 1
            await self._refuse(reader, writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._pipes |= {writer, up_writer}

        first = True

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            nonlocal first
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    if first and src is reader:
                        first = False
                        if data[4:8] != _CANCEL_REQUEST:
                            self.startups += 1
                    await self._flowing.wait()  # frozen: held, as a stopped server holds it
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self._pipes -= {writer, up_writer}

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The server's side of a refused start-up: no to SSL (and GSS) encryption, then an
        ErrorResponse once the startup message is in, and the connection closed."""
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                (length,) = struct.unpack("!i", await reader.readexactly(4))
                body = await reader.readexactly(length - 4)
                if body[:4] in (struct.pack("!i", 80877103), struct.pack("!i", 80877104)):
                    writer.write(b"N")  # SSLRequest, GSSENCRequest: not here
                    continue
                sqlstate, message = self._refusal
                fields = b"".join(
                    code + text.encode() + b"\0"
                    for code, text in (
                        (b"S", "FATAL"),
                        (b"V", "FATAL"),
                        (b"C", sqlstate),
                        (b"M", message),
                    )
                )
                writer.write(b"E" + struct.pack("!i", len(fields) + 5) + fields + b"\0")
                await writer.drain()
                break
        self.refused += 1
        writer.close()

    def freeze(self) -> None:
        """Pass no byte either way, connections kept open and new ones accepted: a server
        whose processes are stopped (its kernel still answers TCP)."""
        self._flowing.clear()

    def thaw(self) -> None:
        """Pass what was held, and go on."""
        self._flowing.set()

    def reset(self) -> None:
        """Cut every connection through the proxy (as a network reset would)."""
        for writer in list(self._pipes):
            transport = writer.transport
            transport.abort()
        self._pipes.clear()

    async def stop(self) -> None:
        """Stop accepting (the server is unreachable) and cut what is open."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        self.reset()
        if server is not None:
            await server.wait_closed()
