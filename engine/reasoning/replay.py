"""Replay recorded provider exchanges without the network.

A :class:`ReplayProvider` has the identity and decoding policy of a recorded provider and answers
each request from the recorded exchange with the same request fingerprint: the recorded text, or
the recorded failure re-raised as a :class:`RecordedProviderError` with the same class name and
code. Anything not recorded raises :class:`~engine.reasoning.errors.ReplayMissError`, which the
verifier never swallows: a replay either reproduces the recording or stops loudly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from engine.reasoning.errors import ProviderError, ReplayMissError
from engine.reasoning.models import (
    CompletionRequest,
    DecodingPolicy,
    Exchange,
    ProviderDescriptor,
    ProviderIdentity,
    ReasoningResult,
    request_fingerprint,
)
from engine.reasoning.provider import Provider, UnavailableProvider

__all__ = ["RecordedProviderError", "RecordedProviders", "ReplayProvider"]


class RecordedProviderError(ProviderError):
    """A failure replayed from a recording; reports the original class name and code."""

    def __init__(self, error_class: str, code: str) -> None:
        super().__init__(f"recorded provider failure: {code}")
        self._error_class = error_class
        self.code = code

    @property
    def error_class(self) -> str:
        """The class name of the original failure."""
        return self._error_class


class ReplayProvider:
    """A provider that answers only from recorded exchanges (matched by request fingerprint)."""

    def __init__(
        self, identity: ProviderIdentity, decoding_policy: DecodingPolicy, exchanges: Iterable[Exchange]
    ) -> None:
        self.identity = identity
        self.decoding_policy = decoding_policy
        self._by_fingerprint: dict[str, Exchange] = {}
        for exchange in exchanges:
            if exchange.identity == identity:
                self._by_fingerprint.setdefault(exchange.request_fingerprint, exchange)
        self.calls = 0

    def __repr__(self) -> str:
        return f"ReplayProvider({self.identity.vendor!r}, {self.identity.model!r}, {len(self._by_fingerprint)} exchanges)"

    def complete(self, request: CompletionRequest) -> str:
        """The recorded answer for ``request``; ReplayMissError when there is none."""
        self.calls += 1
        fingerprint = request_fingerprint(request, self.identity, self.decoding_policy)
        exchange = self._by_fingerprint.get(fingerprint)
        if exchange is None:
            raise ReplayMissError(fingerprint, self.identity.vendor, self.identity.model, request.purpose)
        if exchange.error_class is not None:
            raise RecordedProviderError(exchange.error_class, exchange.error_code or "provider_error")
        return exchange.response_text or ""

    async def acomplete(self, request: CompletionRequest) -> str:
        """Async twin of :meth:`complete` (no I/O)."""
        return self.complete(request)


class RecordedProviders:
    """Builds the replay provider list for a recorded result (or a list of exchanges)."""

    @staticmethod
    def from_descriptors(
        descriptors: Sequence[ProviderDescriptor], exchanges: Sequence[Exchange]
    ) -> list[Provider]:
        """One replay provider per configured descriptor, in configured order."""
        providers: list[Provider] = []
        for descriptor in descriptors:
            if not descriptor.available:
                ident = descriptor.identity
                providers.append(
                    UnavailableProvider(
                        ident.vendor,
                        "unavailable when recorded",
                        model=ident.model,
                        endpoint=ident.endpoint,
                        decoding_policy=descriptor.decoding_policy,
                    )
                )
            else:
                providers.append(ReplayProvider(descriptor.identity, descriptor.decoding_policy, exchanges))
        return providers

    @classmethod
    def from_result(cls, result: ReasoningResult) -> list[Provider]:
        """Providers that reproduce ``result`` when given to a fresh ReasoningVerifier."""
        return cls.from_descriptors(result.providers, result.exchanges)

    @staticmethod
    def from_exchanges(exchanges: Sequence[Exchange]) -> list[Provider]:
        """One replay provider per distinct recorded identity, in order of first appearance."""
        seen: list[tuple[ProviderIdentity, DecodingPolicy]] = []
        for exchange in exchanges:
            pair = (exchange.identity, exchange.decoding_policy)
            if pair not in seen:
                seen.append(pair)
        return [ReplayProvider(identity, policy, exchanges) for identity, policy in seen]
