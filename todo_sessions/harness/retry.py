"""Model calls retried in one place: `RetryPolicy` and `retry_stream`.

A model call is retried when it fails transiently (an exception whose ``retryable`` is true,
e.g. `ModelRequestError` for HTTP 408, 409, 429, 5xx, 529, a reset connection or a timeout)
before its stream produced anything; once something has streamed, nothing is retried (the
loop has stored it). A call costs at most ``RetryPolicy.attempts`` requests in all.

Exactly one policy applies to a call, never two stacked: the model adapters
(`todo_sessions.harness.adapters`) retry their own requests with their ``retry`` policy (they
know the provider's ``Retry-After``); `AgentLoop` retries, with its ``model_retries``, only a
model that has no policy of its own (`own_policy`). See docs/providers.md, "Retries".
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "RETRYABLE_STATUS",
    "OnRetry",
    "RetryPolicy",
    "own_policy",
    "retry_after",
    "retry_stream",
]

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""The HTTP statuses a request is retried on."""

OnRetry = Callable[[int, float, Any], None]
"""``on_retry(attempt, delay_seconds, error)``: called before each retry."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how soon a model call that failed transiently is tried again."""

    attempts: int = 4
    """Tries in all (1: never retry): the most requests one model call costs."""
    base_delay: float = 0.5
    """Seconds before the first retry; doubled for each next one."""
    max_delay: float = 20.0
    """The longest wait, ``Retry-After`` included."""
    jitter: float = 0.25
    """Each delay is multiplied by a random factor in ``[1 - jitter, 1 + jitter]``."""

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be >= 1")
        if self.base_delay < 0 or self.max_delay < 0 or not 0 <= self.jitter <= 1:
            raise ValueError("delays must be >= 0 and jitter in [0, 1]")

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait after failed try number ``attempt`` (``retry_after``: the
        provider's hint, honoured up to ``max_delay``)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        base = min(self.base_delay * 2 ** (attempt - 1), self.max_delay)
        return base * random.uniform(1 - self.jitter, 1 + self.jitter)


def own_policy(model: Any) -> RetryPolicy | None:
    """The policy a model retries its own calls with (its ``retry`` attribute), else None."""
    policy = getattr(model, "retry", None)
    return policy if isinstance(policy, RetryPolicy) else None


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a response's ``Retry-After`` (or ``retry-after-ms``) header asks for."""
    if not headers:
        return None
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(key)
        if value is not None:
            try:
                return float(value) * scale
            except ValueError:
                return None
    return None


def _retryable(exc: Exception) -> bool:
    return getattr(exc, "retryable", False) is True


async def retry_stream(
    attempt: Callable[[int], AsyncIterator[T]],
    policy: RetryPolicy,
    *,
    logger: logging.Logger,
    on_retry: OnRetry | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncGenerator[T, None]:
    """The items of ``attempt(n)`` (n = 1, 2, …), tried again while it fails transiently
    before its first item, up to ``policy.attempts`` tries in all.

    A retryable error's ``retry_after`` (seconds, or None) is passed to `RetryPolicy.delay`.
    Each retry is logged on ``logger`` and passed to ``on_retry``. The last error, an error
    that is not retryable, and any error after the first item are raised as they are.
    """
    tries = 0
    while True:
        tries += 1
        started = False
        items = attempt(tries)
        try:
            async for item in items:
                started = True
                yield item
            return
        except Exception as exc:
            if started or not _retryable(exc) or tries >= policy.attempts:
                raise
            delay = policy.delay(tries, getattr(exc, "retry_after", None))
            logger.warning(
                "%s (attempt %d of %d); retrying in %.1fs", exc, tries, policy.attempts, delay
            )
            if on_retry is not None:
                on_retry(tries, delay, exc)
        finally:
            await _close(items)
        await sleep(delay)


async def _close(items: AsyncIterator[Any]) -> None:
    """Close an async generator (a stream's HTTP response with it); a plain iterator has
    nothing to close."""
    aclose = getattr(items, "aclose", None)
    if aclose is not None:
        await aclose()
