"""The library's errors as the JSON-RPC errors an ACP client is answered with."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..errors import InvalidEventError, SessionLeasedError, SessionNotFoundError
from . import _sdk
from .listing import iso_time

__all__ = ["client_errors", "leased"]


@contextlib.contextmanager
def client_errors(session_id: str | None = None) -> Iterator[None]:
    """Bad input from the client (an invalid id, cwd or prompt) is ``invalid_params``; with
    ``session_id``, an unknown session is ``resource_not_found`` and one held by another live
    service an ``invalid_request`` naming the holder."""
    try:
        yield
    except InvalidEventError as exc:
        raise _sdk.RequestError.invalid_params({"message": str(exc)}) from None
    except SessionNotFoundError:
        if session_id is None:
            raise
        raise _sdk.RequestError.resource_not_found(session_id) from None
    except SessionLeasedError as exc:
        raise leased(exc) from None


def leased(exc: SessionLeasedError) -> _sdk.RequestError:
    """``invalid_request``: the session is held by another live service (who, until when)."""
    return _sdk.RequestError(
        -32600,
        f"session {exc.session_id!r} is held by {exc.owner} (lease until "
        f"{iso_time(exc.expires_at)}); close it there first",
        {"sessionId": exc.session_id, "holder": exc.owner, "expiresAt": iso_time(exc.expires_at)},
    )
