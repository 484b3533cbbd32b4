"""What the model adapters share (`todo_sessions.harness.adapters`): the stream itself (the
provider's events through its decoder, and the check that it reached its end), its retries
(`todo_sessions.harness.retry`, the adapter's `RetryPolicy`), and the translation of SDK and
HTTP errors into `ModelError` types with the key redacted. See docs/providers.md.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

from .._redact import redact
from ..core.messages import Message
from ..errors import ModelAuthError, ModelError, ModelRequestError, ProviderResponseError
from .model import ModelDelta
from .retry import RETRYABLE_STATUS, OnRetry, RetryPolicy, retry_after, retry_stream

__all__ = ["StreamingModel", "missing_extra"]

logger = logging.getLogger("todo_sessions.models")


def missing_extra(exc: ImportError, package: str) -> ModelError:
    """The error of an adapter whose SDK is not installed (it names the extra)."""
    error = ModelError(
        package, f"the {package} SDK is not installed: pip install 'todo-sessions[models]'"
    )
    error.__cause__ = exc
    return error


class StreamingModel:
    """The base of the adapters. An adapter says how to open a request (`_open`,
    `_prepare`) and what ends its stream (`_ends`, `_end_name`, `_decoder_ends`)."""

    provider: str
    model: str
    _name: str  # the provider as errors name it
    _client: Any
    _sdk: Any  # the provider's SDK module: its exception types

    _end_name: str
    """What a stream that stops early lacks, for its error: ``"before message_stop"``."""

    _decoder_ends = False
    """True: no event marks the end, the decoder's `end` refuses a stream that stopped early."""

    def __init__(self, retry: RetryPolicy | None, on_retry: OnRetry | None) -> None:
        self.retry = retry or RetryPolicy()
        """How this adapter's requests are retried (the loop then retries none of them)."""
        self.on_retry = on_retry
        self._secrets: tuple[str, ...] = ()

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(provider={self.provider!r}, model={self.model!r})"

    async def aclose(self) -> None:
        """Close the HTTP client (its connection pool)."""
        await self._client.close()

    # -- what an adapter says ---------------------------------------------------------------

    async def _open(self, params: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _prepare(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> tuple[dict[str, Any], Any]:
        """The request parameters and a fresh stream decoder of the provider module."""
        raise NotImplementedError

    def _ends(self, event: dict[str, Any]) -> bool:
        """Whether ``event`` marks the end of the stream."""
        return False

    # -- the stream ---------------------------------------------------------------------------

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
        events = retry_stream(
            lambda attempt: self._attempt(params, attempt),
            self.retry,
            logger=logger,
            on_retry=self.on_retry,
        )
        async with contextlib.aclosing(events):
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

    async def _attempt(
        self, params: dict[str, Any], attempt: int
    ) -> AsyncGenerator[dict[str, Any], None]:
        """One request's events as dicts (try number ``attempt``; `retry_stream` tries again).

        A failure is raised outside the ``except`` block that caught the SDK's exception, so
        it is not chained to it (that text may hold the key; `_translate` redacted ours)."""
        failure: ModelError | None = None
        try:
            stream = await self._open(params)
        except Exception as exc:
            failure = self._translate(exc, attempt)
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
            failure = self._translate(exc, attempt)
            if received:  # never retried: the caller has the events
                failure = ModelRequestError(
                    self._name,
                    f"the stream broke after {received} event(s): {failure}",
                    status=getattr(failure, "status", None),
                    retryable=True,
                    attempts=attempt,
                )
        finally:
            await stream.close()
        raise failure

    # -- errors ---------------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        """``text`` with this adapter's key and anything shaped like a key redacted."""
        return redact(text, self._secrets)

    def _scrub(self, error: ModelError) -> ModelError:
        """``error`` with its message redacted (in place: its type and fields stay)."""
        error.args = tuple(self._redact(a) if isinstance(a, str) else a for a in error.args)
        return error

    def _status_error(
        self, status: int, message: str, attempt: int, wait: float | None = None
    ) -> ModelRequestError:
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
            retry_after=wait,
        )

    def _failed(self, message: str, attempt: int, *, retryable: bool) -> ModelRequestError:
        return ModelRequestError(
            self._name, self._redact(message), retryable=retryable, attempts=attempt
        )

    def _translate(self, exc: BaseException, attempt: int) -> ModelError:
        """An SDK or HTTP exception as a `ModelError` (never with the key in it)."""
        sdk = self._sdk
        if isinstance(exc, ModelError):
            return exc
        if isinstance(exc, sdk.APIStatusError):
            headers = getattr(getattr(exc, "response", None), "headers", None)
            return self._status_error(
                exc.status_code, _status_message(exc), attempt, retry_after(headers)
            )
        if isinstance(exc, sdk.APIConnectionError):  # includes timeouts
            kind = "timed out" if isinstance(exc, sdk.APITimeoutError) else "connection failed"
            return self._failed(f"{kind}: {exc}", attempt, retryable=True)
        if isinstance(exc, sdk.APIError):  # e.g. an error event inside the stream
            return self._failed(_status_message(exc), attempt, retryable=False)
        import httpx

        if isinstance(exc, httpx.TransportError):  # the connection dropped mid-stream
            message = f"connection lost: {type(exc).__name__}: {exc}"
            return self._failed(message, attempt, retryable=True)
        if isinstance(exc, ProviderResponseError):
            return self._scrub(exc)
        return ProviderResponseError(self._name, self._redact(f"{type(exc).__name__}: {exc}"))


def _status_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return str(getattr(exc, "message", None) or exc)
