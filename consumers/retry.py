"""Retry a step of a batch with exponential backoff until it succeeds or shutdown is requested."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiokafka.errors import KafkaError

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
    :class:`BatchAbandoned` if ``stop`` is set while failing.
    """
    delay = initial
    failures = 0
    while True:
        try:
            return await attempt()
        except Exception as exc:
            if not is_retryable(exc):
                raise
            failures += 1
            if on_retry is not None:
                on_retry(exc)
            if stop.is_set():
                raise BatchAbandoned(what) from exc
            log.warning(
                f"{what} failed, retrying",
                extra={
                    "attempt": failures,
                    "retry_in": round(delay, 3),
                    "error": f"{type(exc).__name__}: {exc}",
                },
            )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay * (0.5 + random.random() / 2))
            delay = min(delay * 2, maximum)
