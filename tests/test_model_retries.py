"""Model calls are retried by one policy, never two stacked (docs/providers.md, "Retries").

An adapter retries its own requests with its `RetryPolicy`; the agent loop retries, with
``model_retries``, only a model without a policy of its own. So one model call costs at most
the policy's ``attempts`` requests: a 503 through the loop and an adapter is 4 requests with
the defaults, not 4 x 3.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from test_model_adapters import KEY, FakeServer, Reply, new_session
from test_providers_stream import CHAT_TEXT

from todo_sessions.errors import ModelRequestError
from todo_sessions.harness import AgentLoop, OpenAIChatModel, RetryPolicy, ToolRegistry
from todo_sessions.harness.model import Finish, TextDelta
from todo_sessions.harness.retry import retry_stream

NO_WAIT = RetryPolicy(attempts=4, base_delay=0.0, max_delay=0.0)


def adapter(server: FakeServer, policy: RetryPolicy = NO_WAIT) -> OpenAIChatModel:
    return OpenAIChatModel("m", base_url=f"{server.url}/v1", api_key=KEY, retry=policy)


def turn_error(session: Any) -> dict[str, Any]:
    end = session.events[-1]
    assert end.type == "turn/end"
    return dict(end.data["reason"]["error"])


# -- through the loop and an adapter: the adapter's policy only ----------------------------------


async def test_a_503_through_the_loop_costs_the_adapters_attempts_not_their_product() -> None:
    async with FakeServer(*[Reply(status=503)] * 12) as server:
        model = adapter(server)
        session = new_session()
        loop = AgentLoop(session, model, ToolRegistry(), model_retries=2, retry_delay=0)
        outcome = await loop.run_turn("hi")
        await model.aclose()
    assert len(server.requests) == 4  # RetryPolicy.attempts; the loop adds none (was 12)
    assert outcome.reason == "error"
    error = turn_error(session)
    assert (error["code"], error["status"]) == ("ModelRequestError", 503)


async def test_503s_then_a_stream_complete_the_turn_on_the_third_request() -> None:
    async with FakeServer(Reply(status=503), Reply(status=503), Reply(events=CHAT_TEXT)) as server:
        model = adapter(server)
        session = new_session()
        outcome = await AgentLoop(session, model, ToolRegistry()).run_turn("hi")
        await model.aclose()
    assert len(server.requests) == 3
    assert (outcome.reason, outcome.text) == ("completed", "Hello, world")


async def test_a_request_error_that_is_not_retryable_is_sent_once() -> None:
    async with FakeServer(*[Reply(status=400)] * 4) as server:
        model = adapter(server)
        session = new_session()
        outcome = await AgentLoop(session, model, ToolRegistry()).run_turn("hi")
        await model.aclose()
    assert len(server.requests) == 1 and outcome.reason == "error"
    assert turn_error(session)["status"] == 400


async def test_retry_after_is_the_delay_up_to_the_policys_longest() -> None:
    delays: list[float] = []
    replies = [Reply(status=429, headers={"Retry-After": "0"}), Reply(status=429)]
    async with FakeServer(*replies, Reply(events=CHAT_TEXT)) as server:
        policy = RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0)
        model = OpenAIChatModel(
            "m",
            base_url=f"{server.url}/v1",
            api_key=KEY,
            retry=policy,
            on_retry=lambda attempt, delay, error: delays.append(delay),
        )
        deltas = [d async for d in model.stream([], [])]
        await model.aclose()
    assert len(server.requests) == 3 and isinstance(deltas[-1], Finish)
    assert delays == [0.0, 0.0]


# -- a model without a policy of its own: the loop's -----------------------------------------------


class Failing:
    """A model whose first ``failures`` calls raise before streaming anything."""

    provider = "test"
    model = "failing-1"

    def __init__(self, failures: int, *, status: int = 503, retryable: bool = True) -> None:
        self.failures = failures
        self.status = status
        self.retryable = retryable
        self.calls = 0

    async def stream(self, messages: Any, tools: Any) -> AsyncIterator[Any]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ModelRequestError(
                "test", f"HTTP {self.status}", status=self.status, retryable=self.retryable
            )
        yield TextDelta("fine")
        yield Finish()


@pytest.mark.parametrize(("retries", "failures"), [(0, 5), (1, 5), (3, 5), (4, 2)])
async def test_the_loop_calls_a_plain_model_model_retries_plus_one_times_at_most(
    retries: int, failures: int
) -> None:
    model = Failing(failures)
    loop = AgentLoop(new_session(), model, ToolRegistry(), model_retries=retries, retry_delay=0)
    outcome = await loop.run_turn("hi")
    assert model.calls == min(failures + 1, retries + 1)
    assert outcome.reason == ("completed" if failures <= retries else "error")


async def test_the_loop_does_not_retry_an_error_that_is_not_retryable() -> None:
    model = Failing(5, status=400, retryable=False)
    loop = AgentLoop(new_session(), model, ToolRegistry(), model_retries=3, retry_delay=0)
    outcome = await loop.run_turn("hi")
    assert model.calls == 1 and outcome.reason == "error"


async def test_the_loop_leaves_a_model_with_its_own_policy_to_retry_itself() -> None:
    model = Failing(5)
    model.retry = RetryPolicy(attempts=2)  # type: ignore[attr-defined]
    loop = AgentLoop(new_session(), model, ToolRegistry(), model_retries=3, retry_delay=0)
    outcome = await loop.run_turn("hi")
    assert model.calls == 1 and outcome.reason == "error"  # this model chose not to retry


# -- retry_stream itself ---------------------------------------------------------------------------


async def test_retry_stream_tries_again_only_before_the_first_item() -> None:
    tries: list[int] = []
    slept: list[float] = []

    async def attempt(n: int) -> AsyncIterator[str]:
        tries.append(n)
        if n == 1:
            raise ModelRequestError("x", "HTTP 503", status=503, retryable=True, retry_after=7)
        yield "a"
        raise ModelRequestError("x", "dropped", retryable=True)

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    policy = RetryPolicy(attempts=5, max_delay=5.0)
    seen: list[str] = []
    with pytest.raises(ModelRequestError, match="dropped"):
        async for item in retry_stream(
            attempt, policy, logger=logging.getLogger("test"), sleep=sleep
        ):
            seen.append(item)
    assert (tries, seen, slept) == ([1, 2], ["a"], [5.0])  # Retry-After 7, capped at 5


def test_a_policy_needs_one_attempt_at_least() -> None:
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=0)
