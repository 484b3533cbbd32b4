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

from typing import Any

__all__ = ["COMMAND_TIMEOUT", "HOST_CONNECT_TIMEOUT", "connect_each_host", "tries_each_host"]

HOST_CONNECT_TIMEOUT = 5.0
"""Seconds for one host of a multi-host URL to accept a connection and answer its start-up
(``connect_timeout=`` in the URL overrides it, per host as with libpq)."""

COMMAND_TIMEOUT = 15.0
"""Seconds a statement on a multi-host URL's connection may go unanswered before the connection
is given up as lost (``command_timeout=`` in the URL overrides it, ``0`` for none: say so for
a migration that rewrites a large table): a frozen primary's
connections are dropped and the call goes on on the new primary (an append in flight is then
settled by reading it back, as after any lost connection)."""


def tries_each_host(cparams: dict[str, Any]) -> bool:
    """Whether `connect_each_host` serves these connect arguments: several hosts, and a
    target that one host can be checked against alone (``prefer-standby`` needs them all)."""
    hosts = cparams.get("host")
    return (
        isinstance(hosts, list)
        and len(hosts) > 1
        and cparams.get("target_session_attrs") != "prefer-standby"
    )


async def connect_each_host(*args: Any, **kwargs: Any) -> Any:
    """asyncpg's ``connect`` on each host of ``host``/``port`` in turn, ``timeout`` each; the
    first that is what ``target_session_attrs`` asks for. Otherwise the error of a server that
    refused a connection for now (too many connections, starting up: it says the most, and the
    store tries again), else the last host's."""
    import asyncpg

    hosts, ports = kwargs.pop("host"), kwargs.pop("port")
    if not isinstance(ports, list):
        ports = [ports] * len(hosts)
    last: BaseException | None = None
    refused: BaseException | None = None
    for host, port in zip(hosts, ports, strict=True):
        try:
            return await asyncpg.connect(*args, host=host, port=port, **kwargs)
        except (OSError, asyncpg.TargetServerAttributeNotMatched) as exc:  # TimeoutError too
            last = exc
        except (asyncpg.TooManyConnectionsError, asyncpg.CannotConnectNowError) as exc:
            last = exc
            refused = refused or exc
    assert last is not None
    raise refused or last
