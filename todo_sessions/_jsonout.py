"""JSON text for output: DEL and the C1 controls (U+007F to U+009F) escaped as ``\\u009b``.

`json.dumps(..., ensure_ascii=False)` and the stored JSON of an event write them raw; a
terminal takes U+009B (CSI) as the start of an escape sequence, so printed output could move
the cursor or change colours. Those characters can only stand inside JSON strings, so the
escaped text parses to the same values. Every JSON the command line prints or writes (``--json``,
``show --json``, ``export``) and every JSON the web viewer sends goes through `escape_controls`.

This module imports nothing from the package, so every layer can use it.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["dumps", "escape_controls"]

_CONTROLS = {code: f"\\u{code:04x}" for code in range(0x7F, 0xA0)}


def escape_controls(text: str) -> str:
    """``text`` (JSON) with DEL and every C1 control written as a ``\\uXXXX`` escape."""
    return text.translate(_CONTROLS)


def dumps(value: Any, **options: Any) -> str:
    """`json.dumps` without ASCII escapes, but with DEL and the C1 controls escaped."""
    return escape_controls(json.dumps(value, ensure_ascii=False, **options))
