"""Real models for the agent loop: `OpenAIChatModel` (any OpenAI-compatible base URL),
`OpenAIResponsesModel` and `AnthropicModel`, on the official SDKs (the ``[models]`` extra).
See docs/providers.md.

Each adapter builds the request with `todo_sessions.harness.providers` from the derived
history, its system prompt and the tools, streams the response and yields the loop's deltas
as they arrive (text, reasoning with its provider data, whole tool calls, then `Finish`).
What they share (the stream, its retries, the errors) is `todo_sessions.harness.adapter_base`;
which key goes to which host, `todo_sessions.harness.api_keys`.

- **Retries**: a transient failure before the first streamed event (HTTP 408, 409, 429,
  500, 502, 503, 504, 529, a connection reset or timeout) is retried with exponential backoff
  and jitter (``Retry-After`` is honoured, up to ``RetryPolicy.max_delay``), up to
  ``RetryPolicy.attempts`` requests in all; each retry is logged (``todo_sessions.models``)
  and passed to ``on_retry``. The agent loop does not retry an adapter's calls again
  (`todo_sessions.harness.retry`). Once events have streamed, a failure is not retried (the
  loop has stored them): it is a `ModelRequestError`, and so is a stream that ends before the
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
- **Provider error text** is redacted (`todo_sessions._redact.redact`: the adapter's key, the
  default key variables, anything shaped like a token or key) before it goes into an
  exception, and the SDK's exception is not chained (its text may hold the key): the error
  keeps its type, the HTTP status and the redacted message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..core.messages import Message
from .adapter_base import StreamingModel, missing_extra
from .api_keys import ANTHROPIC_HOST, DEEPSEEK_HOST, OPENAI_HOST, host_of, resolve_key
from .retry import OnRetry, RetryPolicy

__all__ = [
    "AnthropicModel",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "RetryPolicy",
    "model_from_spec",
]


class OpenAIChatModel(StreamingModel):
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
            raise missing_extra(exc, "openai") from None
        self._sdk = openai
        self.provider = provider
        self.model = model
        self.system = system
        self.reasoning: Literal["current-turn", "all", "none"] = reasoning
        self.extra = dict(extra or {})
        key = resolve_key(
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


class OpenAIResponsesModel(StreamingModel):
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
            raise missing_extra(exc, "openai") from None
        self._sdk = openai
        self.provider = "openai"
        self.model = model
        self.system = system
        self.reasoning = dict(reasoning) if reasoning is not None else None
        self.extra = dict(extra or {})
        key = resolve_key(
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


class AnthropicModel(StreamingModel):
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
            raise missing_extra(exc, "anthropic") from None
        self._sdk = anthropic
        self.provider = "anthropic"
        self.model = model
        self.system = system
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self.extra = dict(extra or {})
        key = resolve_key(
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
    if env is None and base_url is not None and host_of(base_url) == DEEPSEEK_HOST:
        env = "DEEPSEEK_API_KEY" if os.environ.get("DEEPSEEK_API_KEY") else None
    label = "deepseek" if base_url is not None and "deepseek" in base_url else "openai"
    return OpenAIChatModel(
        name,
        base_url=base_url,
        api_key_env=env,
        system=system,
        provider=label,
    )
