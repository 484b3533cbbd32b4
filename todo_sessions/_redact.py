"""Keeping secrets out of what is shown, logged and stored: API keys in provider error text,
passwords in database URLs.

- `redact` replaces the keys it is given, and anything shaped like a bearer token or an API
  key, with ``[redacted]``: the model adapters pass every provider error message through it
  before the message goes into an exception (and from there into a ``turn/end`` event, a log
  record, an ACP error or stderr).
- `mask_url` masks every password in a URL, wherever it sits: in the userinfo (also one with
  an unencoded ``@``) and in the query (``?password=…``, which libpq and asyncpg honour). The
  command line, the ``serve`` banner and the viewer's page header show URLs through it.

This module imports nothing from the package, so every layer can use it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from urllib.parse import unquote_plus

__all__ = ["KEY_ENVIRONMENT", "REDACTED", "mask_url", "mask_urls", "redact"]

REDACTED = "[redacted]"

KEY_ENVIRONMENT = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DEEPSEEK_API_KEY")
"""The variables the adapters read keys from by default: their values are always redacted."""

_MIN_SECRET = 6
"""A known key shorter than this is not searched for (it would match ordinary words)."""

_SHAPES = re.compile(
    r"""
    (?P<bearer>\b(?:Bearer|Basic|Token)\s+)[A-Za-z0-9._~+/=:-]{6,}   # an Authorization value
    | \b(?:sk|pk|rk)-[A-Za-z0-9_-]{6,}[A-Za-z0-9_*.-]*                # sk-…, sk-ant-…, sk-proj-…
    | \b(?:AIza|xox[abprs]-|gh[pousr]_|glpat-|gsk_|xai-|hf_|pplx-|r8_)[A-Za-z0-9_-]{10,}
    | (?P<named>\b(?:api[_-]?key|x-api-key|access[_-]?token|auth[_-]?token|secret|password)
         ["']?\s*[:=]\s*["']?)[^\s"',;&}]{4,}                           # key=…, "api_key": "…"
    """,
    re.VERBOSE | re.IGNORECASE,
)
"""What a secret looks like, whoever's it is: an ``Authorization`` value, the prefixes of
the common providers' keys, a value named as a key or password. (Not any long run of letters
and digits: that would hide session ids and request ids; a key of another shape is redacted
by value, as one the adapter knows.)"""


def _replace(match: re.Match[str]) -> str:
    prefix = match.group("bearer") or match.group("named") or ""
    return prefix + REDACTED


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with each of ``secrets`` (the keys an adapter knows), the values of the
    default key variables (`KEY_ENVIRONMENT`) and anything shaped like a token or a key
    replaced by ``[redacted]``."""
    known = {s for s in secrets if s and len(s) >= _MIN_SECRET}
    known.update(
        value
        for name in KEY_ENVIRONMENT
        if (value := os.environ.get(name)) is not None and len(value) >= _MIN_SECRET
    )
    for secret in sorted(known, key=len, reverse=True):  # a key inside a longer one
        text = text.replace(secret, REDACTED)
    return _SHAPES.sub(_replace, text)


_SECRET_PARAMETERS = frozenset({"password", "passwd", "pwd", "sslpassword", "secret", "token"})
_PARAMETER = re.compile(r"([?&;])([^=&;?#]*)=([^&;]*)")
_MASK = "***"


def _userinfo_end(rest: str) -> int:
    """Where the userinfo of ``rest`` (a URL after ``://``) ends: the index of its ``@``, or
    -1. A password may hold any character, ``@ / ? #`` unencoded included, so the userinfo
    runs to the last ``@`` before the first ``/`` that follows an ``@``. Where that is
    ambiguous (``host:5432/db?a=b@c``) it masks: too much shown is worse than too little."""
    first = rest.find("@")
    if first < 0:
        return -1
    slash = rest.find("/", first)
    return rest.rfind("@", 0, slash if slash >= 0 else len(rest))


def _masked_parameter(found: re.Match[str]) -> str:
    if unquote_plus(found.group(2)).lower() not in _SECRET_PARAMETERS:
        return found.group(0)
    return f"{found.group(1)}{found.group(2)}={_MASK}"


def mask_url(url: str) -> str:
    """``url`` with every password masked as ``***``: the userinfo's (whatever an unencoded
    password holds, ``@ / ? #`` included: `_userinfo_end`) and the query's (``password``,
    ``passwd``, ``pwd``, ``sslpassword``, ``secret``, ``token``, their names percent-encoded
    or not). Anything that is not a URL (a file path) is returned as it is."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme or "/" in scheme:
        return url
    at = _userinfo_end(rest)
    if at >= 0:
        user, colon, _ = rest[:at].partition(":")
        if colon and "/" not in user:
            rest = f"{user}:{_MASK}{rest[at:]}"
    return f"{scheme}://{_PARAMETER.sub(_masked_parameter, rest)}"


_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,:;)]")
"""A URL in a message, without the punctuation that follows it."""


def mask_urls(text: str) -> str:
    """Every URL in ``text`` (a message) through `mask_url`."""
    return _URL.sub(lambda m: mask_url(m.group()), text)
