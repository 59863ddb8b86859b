"""The provider interface: the only way the verifier reaches a language model.

A provider is any object with

* ``identity`` — a :class:`ProviderIdentity` (vendor, model or deployment, endpoint). Two providers
  are *distinct* when their identities differ; object identity and ``__eq__`` play no part;
* ``decoding_policy`` — a :class:`DecodingPolicy` (temperature, seed, structured-output technique),
  recorded with every exchange and part of the cache key;
* ``complete(request) -> str`` — answer one :class:`CompletionRequest`. When
  ``request.json_schema`` is set the answer must be JSON text matching that schema. Failures
  raise :class:`~engine.reasoning.errors.ProviderError` subclasses (anything else is treated
  as a failure too).

Optionally ``async acomplete(request) -> str`` (:class:`AsyncProvider`); without it the async
verifier runs ``complete`` in a worker thread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from engine.reasoning.errors import ProviderError, ProviderUnavailableError
from engine.reasoning.models import CompletionRequest, DecodingPolicy, ProviderIdentity

__all__ = [
    "AsyncProvider",
    "Provider",
    "RetryPolicy",
    "UnavailableProvider",
    "call_with_retries",
    "call_with_retries_async",
    "is_available",
]

T = TypeVar("T")


@runtime_checkable
class Provider(Protocol):
    """A language-model backend (see the module docstring for the contract)."""

    @property
    def identity(self) -> ProviderIdentity:
        """Vendor, model and endpoint."""
        ...

    @property
    def decoding_policy(self) -> DecodingPolicy:
        """Temperature, seed and structured-output technique."""
        ...

    def complete(self, request: CompletionRequest) -> str:
        """Answer one request or raise a ProviderError."""
        ...


@runtime_checkable
class AsyncProvider(Provider, Protocol):
    """A provider that also answers without blocking the event loop."""

    async def acomplete(self, request: CompletionRequest) -> str:
        """Async twin of :meth:`Provider.complete`."""
        ...


class UnavailableProvider:
    """Placeholder for a configured provider that cannot run (e.g. no API key in the environment).

    It keeps its place in the configured list (and so in the cache key) but is never chosen as
    primary or secondary; calling it raises :class:`ProviderUnavailableError`.
    """

    def __init__(
        self,
        vendor: str,
        reason: str,
        *,
        model: str = "",
        endpoint: str = "",
        decoding_policy: DecodingPolicy | None = None,
    ) -> None:
        self.identity = ProviderIdentity(vendor=vendor, model=model, endpoint=endpoint)
        self.decoding_policy = decoding_policy or DecodingPolicy(temperature=None)
        self.reason = reason

    def complete(self, request: CompletionRequest) -> str:
        """Always fails: the provider is not configured."""
        raise ProviderUnavailableError(f"{self.identity.vendor} provider unavailable: {self.reason}")

    def __repr__(self) -> str:
        return f"UnavailableProvider({self.identity.vendor!r}, {self.reason!r})"


def is_available(provider: Provider) -> bool:
    """False only for :class:`UnavailableProvider` placeholders."""
    return not isinstance(provider, UnavailableProvider)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff for transient failures (429, 5xx, timeouts).

    ``max_retries`` extra attempts; the n-th wait is ``min(base_delay * 2**n, max_delay)`` unless
    the server sent ``Retry-After``, which is honoured up to ``max_retry_after`` seconds; a longer
    ``Retry-After`` stops retrying at once (fail closed rather than stall the caller).
    """

    max_retries: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 20.0

    def delay(self, attempt: int, error: ProviderError) -> float | None:
        """Seconds to wait before retry number ``attempt`` (0-based), or None to give up."""
        if not error.transient or attempt >= self.max_retries:
            return None
        if error.retry_after is not None and error.retry_after >= 0:
            return error.retry_after if error.retry_after <= self.max_retry_after else None
        return float(min(self.base_delay * 2**attempt, self.max_delay))


def call_with_retries(
    call: Callable[[], T], policy: RetryPolicy, sleep: Callable[[float], None] = time.sleep
) -> tuple[T, int]:
    """Run ``call`` under ``policy``; returns the value and the number of attempts made."""
    attempt = 0
    while True:
        try:
            return call(), attempt + 1
        except ProviderError as error:
            wait = policy.delay(attempt, error)
            if wait is None:
                raise
            sleep(wait)
            attempt += 1


async def call_with_retries_async(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> tuple[T, int]:
    """Async twin of :func:`call_with_retries`."""
    attempt = 0
    while True:
        try:
            return await call(), attempt + 1
        except ProviderError as error:
            wait = policy.delay(attempt, error)
            if wait is None:
                raise
            await sleep(wait)
            attempt += 1
