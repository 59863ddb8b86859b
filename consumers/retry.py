"""Retry a step of a batch with exponential backoff until it succeeds or shutdown is requested."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiokafka.errors import KafkaError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from ledger.errors import LedgerUnavailableError

__all__ = ["BatchAbandoned", "retry_until_stopped"]

log = logging.getLogger("consumers.retry")

T = TypeVar("T")


class BatchAbandoned(Exception):
    """Shutdown was requested while a step kept failing; nothing of the batch was committed."""


def is_retryable(exc: BaseException) -> bool:
    """Database unavailable, a retriable broker error, or a socket error."""
    if isinstance(exc, LedgerUnavailableError | OSError):
        return True
    return isinstance(exc, KafkaError) and bool(getattr(exc, "retriable", False))


async def retry_until_stopped(
    what: str,
    attempt: Callable[[], Awaitable[T]],
    stop: asyncio.Event,
    *,
    initial: float = 0.2,
    maximum: float = 10.0,
    on_retry: Callable[[BaseException], None] | None = None,
) -> T:
    """``await attempt()`` until it succeeds; non-retryable errors propagate at once.

    Between attempts waits ``initial * 2**n`` seconds (jittered, capped at ``maximum``); raises
    :class:`BatchAbandoned` if ``stop`` is set while failing. The loop is ``tenacity``'s.
    """

    def delay(state: RetryCallState) -> float:
        return float(min(initial * 2.0 ** (state.attempt_number - 1), maximum))

    def after_failure(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            on_retry(state.outcome.exception() or RuntimeError(what))

    def abandon(state: RetryCallState) -> T:
        # shutdown while failing: the batch is given up, nothing of it was committed (fail closed)
        raise BatchAbandoned(what) from (state.outcome.exception() if state.outcome else None)

    def log_retry(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning(
            f"{what} failed, retrying",
            extra={
                "attempt": state.attempt_number,
                "retry_in": round(delay(state), 3),
                "error": f"{type(exc).__name__}: {exc}",
            },
        )

    async def sleep_unless_stopped(seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=seconds)

    retrying = AsyncRetrying(
        retry=retry_if_exception(is_retryable),  # anything else propagates at once
        stop=lambda _state: stop.is_set(),
        wait=lambda state: delay(state) * (0.5 + random.random() / 2),
        after=after_failure,
        before_sleep=log_retry,
        retry_error_callback=abandon,
        sleep=sleep_unless_stopped,
        reraise=True,
    )

    async def call() -> T:  # ``attempt`` may be a lambda returning an awaitable, not a coroutine function
        return await attempt()

    result: T = await retrying(call)
    return result
