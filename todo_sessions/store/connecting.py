"""Connecting to one of several PostgreSQL hosts, each within a bounded time.

asyncpg's ``connect`` applies its ``timeout`` to the whole host list and stays on a host that
accepted the TCP connection but never answers (a primary whose processes are stopped, a host
cut off behind a live TCP stack): with that host first, no connection reaches the new primary
behind it until the timeout ends the whole attempt. libpq applies ``connect_timeout`` per host;
so does `connect_each_host`, asyncpg's ``connect`` tried on one host at a time, each checked
against ``target_session_attrs`` (the new connection's own check: a demoted primary is passed
over), the next host tried on a timeout, a refused connection, a server that takes no new
connection for now (too many connections, SQLSTATE 53300; starting up or shutting down, 57P03)
or a host that is not what the URL asks for. docs/design.md, "PostgreSQL under Patroni".
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, MutableMapping
from typing import Any

__all__ = [
    "COMMAND_TIMEOUT",
    "HOST_CONNECT_TIMEOUT",
    "HOST_KEY",
    "UNRESPONSIVE_FOR",
    "Unresponsive",
    "connect_each_host",
    "tries_each_host",
]

HOST_CONNECT_TIMEOUT = 5.0
"""Seconds for one host of a multi-host URL to accept a connection and answer its start-up
(``connect_timeout=`` in the URL overrides it, per host as with libpq)."""

COMMAND_TIMEOUT = 15.0
"""Seconds a statement on a multi-host URL's connection may go unanswered before the connection
is given up as lost (``command_timeout=`` in the URL overrides it, ``0`` for none: say so for
a migration that rewrites a large table): a frozen primary's
connections are dropped and the call goes on on the new primary (an append in flight is then
settled by reading it back, as after any lost connection)."""


UNRESPONSIVE_FOR = 60.0
"""Seconds a host that let a statement or a connection time out is tried after the others."""

HOST_KEY = "todo_sessions_host"
"""The ``(host, port)`` of a pooled connection, in its pool record's ``info``."""

Host = tuple[str, Any]


class Unresponsive:
    """One engine's memory of the hosts that timed out lately (a frozen primary): new
    connections try them last for `UNRESPONSIVE_FOR` seconds, so that a reconnection after a
    statement timed out on one does not first wait out its connect timeout there."""

    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until: dict[Host, float] = {}

    def mark(self, host: Host) -> None:
        self._until[host] = time.monotonic() + UNRESPONSIVE_FOR

    def arrange(self, cparams: dict[str, Any]) -> None:
        """Put the hosts marked lately after the others, each keeping its port (the order
        among them, and among the others, kept)."""
        hosts, ports = cparams.get("host"), cparams.get("port")
        if not self._until or not isinstance(hosts, list):
            return
        now = time.monotonic()
        for host, until in list(self._until.items()):
            if until <= now:
                del self._until[host]
        ports = ports if isinstance(ports, list) else [ports] * len(hosts)
        pairs = sorted(zip(hosts, ports, strict=True), key=lambda pair: pair in self._until)
        cparams["host"], cparams["port"] = [h for h, _ in pairs], [p for _, p in pairs]

    def connector(self, info: MutableMapping[Any, Any] | None) -> Callable[..., Any]:
        """`connect_each_host` that marks a host that timed out, and notes in ``info`` (the
        pool record's) which host the connection it makes is to."""
        return functools.partial(connect_each_host, unresponsive=self, info=info)


def tries_each_host(cparams: dict[str, Any]) -> bool:
    """Whether `connect_each_host` serves these connect arguments: several hosts, and a
    target that one host can be checked against alone (``prefer-standby`` needs them all)."""
    hosts = cparams.get("host")
    return (
        isinstance(hosts, list)
        and len(hosts) > 1
        and cparams.get("target_session_attrs") != "prefer-standby"
    )


async def connect_each_host(
    *args: Any,
    unresponsive: Unresponsive | None = None,
    info: MutableMapping[Any, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """asyncpg's ``connect`` on each host of ``host``/``port`` in turn, ``timeout`` each; the
    first that is what ``target_session_attrs`` asks for. Otherwise the error of a server that
    refused a connection for now (too many connections, starting up: it says the most, and the
    store tries again), else the last host's. A host that timed out is marked in
    ``unresponsive``; the host connected to is noted in ``info`` (`HOST_KEY`)."""
    import asyncpg

    hosts, ports = kwargs.pop("host"), kwargs.pop("port")
    if not isinstance(ports, list):
        ports = [ports] * len(hosts)
    last: BaseException | None = None
    refused: BaseException | None = None
    for host, port in zip(hosts, ports, strict=True):
        try:
            conn = await asyncpg.connect(*args, host=host, port=port, **kwargs)
        except (OSError, asyncpg.TargetServerAttributeNotMatched) as exc:  # TimeoutError too
            if isinstance(exc, TimeoutError) and unresponsive is not None:
                unresponsive.mark((host, port))
            last = exc
        except (asyncpg.TooManyConnectionsError, asyncpg.CannotConnectNowError) as exc:
            last = exc
            refused = refused or exc
        else:
            if info is not None:
                info[HOST_KEY] = (host, port)
            return conn
    assert last is not None
    raise refused or last
