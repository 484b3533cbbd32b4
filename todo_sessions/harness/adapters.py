"""Real models for the agent loop: `OpenAIChatModel` (any OpenAI-compatible base URL) and
`AnthropicModel`, on the official SDKs (the ``[models]`` extra). See docs/providers.md.

Each adapter builds the request with `todo_sessions.harness.providers` from the derived history, its
system prompt and the tools, streams the response and yields the loop's deltas as they
arrive (text, reasoning with its provider data, whole tool calls, then `Finish`).

- **Retries**: a transient failure before the first streamed event (HTTP 408, 409, 429,
  500, 502, 503, 504, 529, a connection reset or timeout) is retried with exponential backoff
  and jitter (``Retry-After`` is honoured, up to ``RetryPolicy.max_delay``), up to
  ``RetryPolicy.attempts`` tries; each retry is logged (``todo_sessions.models``) and
  passed to ``on_retry``. Once events have streamed, a failure is not retried (the loop has
  stored them): it is a `ModelRequestError`, and so is a stream that ends before the
  provider's end marker.
- **Errors** are typed: `ModelAuthError` (no key, 401/403), `ModelRequestError` (``status``,
  ``retryable``, ``attempts``), `ProviderResponseError` (a malformed stream). SDK and HTTP
  exceptions never escape raw.
- **Cancellation**: closing the generator (the loop does, when a turn is cancelled) closes
  the HTTP stream.
- **Keys** come from the argument or the environment (``OPENAI_API_KEY``,
  ``ANTHROPIC_API_KEY``, or ``api_key_env``); they are never logged, stored in events, or
  shown in a repr. A provider's default variable is sent only to that provider's own API
  host (or a ``base_url`` on loopback): another base URL needs ``api_key_env`` naming the
  variable (the CLI's ``--api-key-env``), else `ModelAuthError`.
- **Provider error text** is redacted (`todo_sessions.redact.redact`: the adapter's key, the
  default key variables, anything shaped like a token or key) before it goes into an
  exception, and the SDK's exception is not chained (its text may hold the key): the error
  keeps its type, the HTTP status and the redacted message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..core.messages import Message
from ..errors import ModelAuthError, ModelError, ModelRequestError, ProviderResponseError
from ..redact import redact
from .model import ModelDelta

__all__ = [
    "AnthropicModel",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "RetryPolicy",
    "model_from_spec",
]

logger = logging.getLogger("todo_sessions.models")

OPENAI_HOST = "api.openai.com"
ANTHROPIC_HOST = "api.anthropic.com"
DEEPSEEK_HOST = "api.deepseek.com"
"""The hosts the default key variables are sent to (besides loopback)."""

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})

OnRetry = Callable[[int, float, ModelRequestError], None]
"""``on_retry(attempt, delay_seconds, error)``: called before each retry."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 4
    """Tries in all (1: never retry)."""
    base_delay: float = 0.5
    max_delay: float = 20.0
    jitter: float = 0.25
    """Each delay is multiplied by a random factor in ``[1 - jitter, 1 + jitter]``."""

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        base = min(self.base_delay * 2 ** (attempt - 1), self.max_delay)
        return base * random.uniform(1 - self.jitter, 1 + self.jitter)


def _missing_extra(exc: ImportError, package: str) -> ModelError:
    error = ModelError(
        package, f"the {package} SDK is not installed: pip install 'todo-sessions[models]'"
    )
    error.__cause__ = exc
    return error


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
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


class _StreamingModel:
    """What the adapters share: the stream itself (events through the provider's decoder,
    and the check that it reached its end), the retry loop around opening it, and the
    translation of SDK and HTTP errors into `ModelError` types. An adapter says how to open
    a request (`_open`, `_prepare`) and what ends its stream (`_ends`, `_end_name`)."""

    provider: str
    model: str
    _name: str  # the provider as errors name it

    def __init__(self, retry: RetryPolicy | None, on_retry: OnRetry | None) -> None:
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry
        self._secrets: tuple[str, ...] = ()

    def _redact(self, text: str) -> str:
        """``text`` with this adapter's key and anything shaped like a key redacted."""
        return redact(text, self._secrets)

    def _scrub(self, error: ModelError) -> ModelError:
        """``error`` with its message redacted (in place: its type and fields stay)."""
        error.args = tuple(self._redact(a) if isinstance(a, str) else a for a in error.args)
        return error

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(provider={self.provider!r}, model={self.model!r})"

    _client: Any
    _sdk: Any  # the provider's SDK module: its exception types

    async def aclose(self) -> None:
        """Close the HTTP client (its connection pool)."""
        await self._client.close()

    async def _open(self, params: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _translate(self, exc: BaseException, attempt: int) -> ModelError:
        return _translate(self, self._sdk, exc, attempt)

    _end_name: str
    """What a stream that stops early lacks, for its error: ``"before message_stop"``."""

    def _prepare(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> tuple[dict[str, Any], Any]:
        """The request parameters and a fresh stream decoder of the provider module."""
        raise NotImplementedError

    _decoder_ends = False
    """True: no event marks the end, the decoder's `end` refuses a stream that stopped early."""

    def _ends(self, event: dict[str, Any]) -> bool:
        """Whether ``event`` marks the end of the stream."""
        return False

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> AsyncIterator[ModelDelta]:
        """The deltas of one model call: the stream's events through the provider's decoder,
        then what it holds at the end. A stream that stops before its end is a retryable
        `ModelRequestError`."""
        try:
            async for delta in self._stream(messages, tools):
                yield delta
        except ModelError as exc:  # a decoder's error may quote the provider
            self._scrub(exc)
            raise

    async def _stream(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> AsyncIterator[ModelDelta]:
        params, decoder = self._prepare(messages, tools)
        ended = False
        async with contextlib.aclosing(self._events(params)) as events:
            async for event in events:
                ended = ended or self._ends(event)
                for delta in decoder.feed(event):
                    yield delta
        stopped_early = ModelRequestError(
            self._name, f"the stream ended {self._end_name}", retryable=True
        )
        if not ended and not self._decoder_ends:
            raise stopped_early
        try:
            end = decoder.end()
        except ProviderResponseError:
            if self._decoder_ends:
                raise stopped_early from None
            raise
        for delta in end:
            yield delta

    async def _events(self, params: dict[str, Any]) -> AsyncGenerator[dict[str, Any], None]:
        """The stream's events as dicts, retrying transient failures before the first one.

        A failure is raised outside the ``except`` block that caught the SDK's exception, so
        it is not chained to it (that text may hold the key; `_translate` redacted ours)."""
        attempt = 0
        while True:
            attempt += 1
            failure: ModelError | None = None
            try:
                stream = await self._open(params)
            except Exception as exc:
                failure = self._translate(exc, attempt)
                if await self._should_retry(failure, attempt, exc):
                    continue
            if failure is not None:
                raise failure
            received = 0
            try:
                async for item in stream:
                    received += 1
                    yield item.model_dump(mode="json", exclude_none=True, warnings=False)
                return
            except ModelError as exc:
                failure = self._scrub(exc)
            except Exception as exc:
                error = self._translate(exc, attempt)
                if received == 0 and await self._should_retry(error, attempt, exc):
                    continue
                if received:
                    error = ModelRequestError(
                        self._name,
                        f"the stream broke after {received} event(s): {error}",
                        status=getattr(error, "status", None),
                        retryable=True,
                        attempts=attempt,
                    )
                failure = error
            finally:
                await stream.close()
            raise failure

    async def _should_retry(self, error: ModelError, attempt: int, exc: BaseException) -> bool:
        if not isinstance(error, ModelRequestError) or not error.retryable:
            return False
        if attempt >= self.retry.attempts:
            return False
        response = getattr(exc, "response", None)
        delay = self.retry.delay(attempt, _retry_after(getattr(response, "headers", None)))
        logger.warning(
            "%s (attempt %d of %d); retrying in %.1fs", error, attempt, self.retry.attempts, delay
        )
        if self.on_retry is not None:
            self.on_retry(attempt, delay, error)
        await asyncio.sleep(delay)
        return True

    def _status_error(self, status: int, message: str, attempt: int) -> ModelRequestError:
        message = self._redact(message)
        if status in (401, 403):
            return ModelAuthError(
                self._name, f"HTTP {status}: {message}", status=status, attempts=attempt
            )
        return ModelRequestError(
            self._name,
            f"HTTP {status}: {message}",
            status=status,
            retryable=status in RETRYABLE_STATUS,
            attempts=attempt,
        )


_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    try:
        return (urlsplit(url if "://" in url else f"//{url}").hostname or "").lower()
    except ValueError:
        return ""


def _loopback(host: str) -> bool:
    import ipaddress

    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _key(
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
    key = os.environ.get(env) or None
    target = base_url or os.environ.get(base_url_env) or None
    if key is not None and api_key_env is None and target is not None:
        host = _host(target)
        if host != own_host and not _loopback(host):
            raise ModelAuthError(
                provider,
                f"{env} is sent only to {own_host} or a loopback base URL, not to "
                f"{host or target!r}; to send it there, name it with --api-key-env {env} "
                f"(api_key_env={env!r})",
            )
    if key is None and required:
        raise ModelAuthError(provider, f"no API key: set {env}")
    return key


def _status_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return str(getattr(exc, "message", None) or exc)


class OpenAIChatModel(_StreamingModel):
    """An OpenAI Chat Completions model at any OpenAI-compatible ``base_url`` (OpenAI,
    DeepSeek, OpenRouter, vLLM, Ollama …), streaming.

    Without ``base_url`` the key is required (``OPENAI_API_KEY``); with one, a missing key is
    allowed (local servers need none). ``reasoning`` says which assistant messages get their
    ``reasoning_content`` back (see `todo_sessions.harness.providers.openai_chat`).
    """

    _name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        system: str | None = None,
        provider: str = "openai",
        reasoning: Literal["current-turn", "all", "none"] = "current-turn",
        extra: Mapping[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        on_retry: OnRetry | None = None,
        timeout: float = 600.0,
    ) -> None:
        super().__init__(retry, on_retry)
        try:
            import openai
        except ImportError as exc:
            raise _missing_extra(exc, "openai") from None
        self._sdk = openai
        self.provider = provider
        self.model = model
        self.system = system
        self.reasoning: Literal["current-turn", "all", "none"] = reasoning
        self.extra = dict(extra or {})
        key = _key(
            api_key,
            api_key_env,
            default_env="OPENAI_API_KEY",
            provider=provider,
            required=base_url is None,
            base_url=base_url,
            own_host=OPENAI_HOST,
            base_url_env="OPENAI_BASE_URL",
        )
        self._secrets = tuple(k for k in (key,) if k)
        self._client = openai.AsyncOpenAI(
            api_key=key or "unused", base_url=base_url, max_retries=0, timeout=timeout
        )

    async def _open(self, params: dict[str, Any]) -> Any:
        return await self._client.chat.completions.create(**params)

    _end_name = "without a finish reason"

    def _prepare(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> tuple[dict[str, Any], Any]:
        from .providers import openai_chat

        params = openai_chat.to_request(
            messages,
            model=self.model,
            system=self.system,
            tools=tools,
            reasoning=self.reasoning,
            reasoning_from=self.provider,
            extra=self.extra,
        )
        return params, openai_chat.ChatStreamDecoder()

    def _ends(self, event: dict[str, Any]) -> bool:
        return any(c.get("finish_reason") for c in event.get("choices", []))


class OpenAIResponsesModel(_StreamingModel):
    """An OpenAI model through the Responses API, stateless (``store: false``), streaming.

    ``reasoning`` (e.g. ``{"effort": "medium", "summary": "auto"}``) is passed on and asks for
    the encrypted reasoning items, which are stored and sent back on the next requests.
    """

    _name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        system: str | None = None,
        reasoning: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        on_retry: OnRetry | None = None,
        timeout: float = 600.0,
    ) -> None:
        super().__init__(retry, on_retry)
        try:
            import openai
        except ImportError as exc:
            raise _missing_extra(exc, "openai") from None
        self._sdk = openai
        self.provider = "openai"
        self.model = model
        self.system = system
        self.reasoning = dict(reasoning) if reasoning is not None else None
        self.extra = dict(extra or {})
        key = _key(
            api_key,
            api_key_env,
            default_env="OPENAI_API_KEY",
            provider="openai",
            required=base_url is None,
            base_url=base_url,
            own_host=OPENAI_HOST,
            base_url_env="OPENAI_BASE_URL",
        )
        self._secrets = tuple(k for k in (key,) if k)
        self._client = openai.AsyncOpenAI(
            api_key=key or "unused", base_url=base_url, max_retries=0, timeout=timeout
        )

    async def _open(self, params: dict[str, Any]) -> Any:
        return await self._client.responses.create(**params)

    _end_name = "before response.completed"
    _decoder_ends = True  # the decoder knows whether response.completed came

    def _prepare(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> tuple[dict[str, Any], Any]:
        from .providers import openai_responses

        params = openai_responses.to_request(
            messages,
            model=self.model,
            system=self.system,
            tools=tools,
            reasoning=self.reasoning,
            reasoning_from=self.provider,
            extra=self.extra,
        )
        return params, openai_responses.ResponsesStreamDecoder()


class AnthropicModel(_StreamingModel):
    """An Anthropic Messages model, streaming; ``thinking_budget`` turns extended thinking on
    (its signed thinking blocks are stored and sent back)."""

    _name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        system: str | None = None,
        max_tokens: int = 8192,
        thinking_budget: int | None = None,
        extra: Mapping[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        on_retry: OnRetry | None = None,
        timeout: float = 600.0,
    ) -> None:
        super().__init__(retry, on_retry)
        try:
            import anthropic
        except ImportError as exc:
            raise _missing_extra(exc, "anthropic") from None
        self._sdk = anthropic
        self.provider = "anthropic"
        self.model = model
        self.system = system
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self.extra = dict(extra or {})
        key = _key(
            api_key,
            api_key_env,
            default_env="ANTHROPIC_API_KEY",
            provider="anthropic",
            required=True,
            base_url=base_url,
            own_host=ANTHROPIC_HOST,
            base_url_env="ANTHROPIC_BASE_URL",
        )
        self._secrets = tuple(k for k in (key,) if k)
        self._client = anthropic.AsyncAnthropic(
            api_key=key, base_url=base_url, max_retries=0, timeout=timeout
        )

    async def _open(self, params: dict[str, Any]) -> Any:
        return await self._client.messages.create(**params)

    _end_name = "before message_stop"

    def _prepare(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> tuple[dict[str, Any], Any]:
        from .providers import anthropic

        params = anthropic.to_request(
            messages,
            model=self.model,
            max_tokens=self.max_tokens,
            system=self.system,
            tools=tools,
            thinking_budget=self.thinking_budget,
            reasoning_from=self.provider,
            extra=self.extra,
        )
        return params, anthropic.AnthropicStreamDecoder()

    def _ends(self, event: dict[str, Any]) -> bool:
        return event.get("type") == "message_stop"


def _translate(model: _StreamingModel, sdk: Any, exc: BaseException, attempt: int) -> ModelError:
    """An SDK or HTTP exception as a `ModelError` (never with the key in it)."""
    if isinstance(exc, ModelError):
        return exc
    if isinstance(exc, sdk.APIStatusError):
        return model._status_error(exc.status_code, _status_message(exc), attempt)
    if isinstance(exc, sdk.APIConnectionError):  # includes timeouts
        kind = "timed out" if isinstance(exc, sdk.APITimeoutError) else "connection failed"
        return ModelRequestError(
            model._name,
            model._redact(f"{kind}: {exc}"),
            status=None,
            retryable=True,
            attempts=attempt,
        )
    if isinstance(exc, sdk.APIError):  # e.g. an error event inside the stream
        return ModelRequestError(
            model._name,
            model._redact(_status_message(exc)),
            status=None,
            retryable=False,
            attempts=attempt,
        )
    import httpx

    if isinstance(exc, httpx.TransportError):  # the connection dropped mid-stream
        return ModelRequestError(
            model._name,
            model._redact(f"connection lost: {type(exc).__name__}: {exc}"),
            status=None,
            retryable=True,
            attempts=attempt,
        )
    if isinstance(exc, ProviderResponseError):
        return model._scrub(exc)
    return ProviderResponseError(model._name, model._redact(f"{type(exc).__name__}: {exc}"))


def model_from_spec(
    spec: str,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
    system: str | None = None,
) -> OpenAIChatModel | OpenAIResponsesModel | AnthropicModel:
    """``openai:MODEL``, ``openai-responses:MODEL`` or ``anthropic:MODEL`` as an adapter (the
    CLI's ``--model``).

    ``openai:`` with a DeepSeek base URL reads ``DEEPSEEK_API_KEY`` when it is set; raises
    ``ValueError`` for a spec of another form.
    """
    provider, _, name = spec.partition(":")
    if not name or provider not in ("openai", "openai-responses", "anthropic"):
        raise ValueError(
            f"model {spec!r}: expected openai:MODEL, openai-responses:MODEL or "
            "anthropic:MODEL (e.g. openai:gpt-4.1, openai:deepseek-chat with --base-url "
            "https://api.deepseek.com, anthropic:claude-sonnet-4-5)"
        )
    if provider == "anthropic":
        return AnthropicModel(name, base_url=base_url, api_key_env=api_key_env, system=system)
    if provider == "openai-responses":
        return OpenAIResponsesModel(name, base_url=base_url, api_key_env=api_key_env, system=system)
    env = api_key_env
    if env is None and base_url is not None and _host(base_url) == DEEPSEEK_HOST:
        env = "DEEPSEEK_API_KEY" if os.environ.get("DEEPSEEK_API_KEY") else None
    label = "deepseek" if base_url is not None and "deepseek" in base_url else "openai"
    return OpenAIChatModel(
        name,
        base_url=base_url,
        api_key_env=env,
        system=system,
        provider=label,
    )
