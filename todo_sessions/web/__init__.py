"""The session viewer in the browser: ``todo-sessions serve`` (docs/web.md).

A Starlette application over the library's public API: the session list, a session's timeline
with the todo list and the derived messages at any seq, live updates over server-sent events,
export and (with ``allow_writes``) fork. Needs the ``[web]`` extra.
"""

from __future__ import annotations

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "the web viewer needs starlette, uvicorn and jinja2: pip install 'todo-sessions[web]'"
    ) from exc

from .app import create_app
from .server import serve

__all__ = ["create_app", "serve"]
