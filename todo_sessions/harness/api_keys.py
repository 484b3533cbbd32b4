"""Which API key a model adapter sends, and to which hosts (docs/providers.md, "Adapters").

A key comes from the argument, else the variable ``api_key_env``, else the provider's
default variable. A default variable is sent only to the provider's own API host or to a
loopback base URL: another base URL needs ``api_key_env`` naming the variable.
"""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

from ..errors import ModelAuthError

__all__ = ["ANTHROPIC_HOST", "DEEPSEEK_HOST", "OPENAI_HOST", "host_of", "resolve_key"]

OPENAI_HOST = "api.openai.com"
ANTHROPIC_HOST = "api.anthropic.com"
DEEPSEEK_HOST = "api.deepseek.com"
"""The hosts the default key variables are sent to (besides loopback)."""

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def host_of(url: str) -> str:
    """The lower-cased host of ``url`` (a scheme is optional), "" when there is none."""
    try:
        return (urlsplit(url if "://" in url else f"//{url}").hostname or "").lower()
    except ValueError:
        return ""


def _loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_key(
    api_key: str | None,
    api_key_env: str | None,
    *,
    default_env: str,
    provider: str,
    required: bool,
    base_url: str | None,
    own_host: str,
    base_url_env: str,
) -> str | None:
    """The key to send: ``api_key``, else the variable ``api_key_env``, else ``default_env``,
    which goes only to ``own_host`` or a loopback host (the SDK's own base URL variable,
    ``base_url_env``, counts as a base URL); another host needs ``api_key_env``."""
    if api_key:
        return api_key
    env = api_key_env or default_env
    found = os.environ.get(env) or None
    target = base_url or os.environ.get(base_url_env) or None
    if found is not None and api_key_env is None and target is not None:
        host = host_of(target)
        if host != own_host and not _loopback(host):
            raise ModelAuthError(
                provider,
                f"{env} is sent only to {own_host} or a loopback base URL, not to "
                f"{host or target!r}; to send it there, name it with --api-key-env {env} "
                f"(api_key_env={env!r})",
            )
    if found is None and required:
        raise ModelAuthError(provider, f"no API key: set {env}")
    return found
