"""Data types of the reasoning verifier: tasks, provider descriptors, exchanges and results.

Everything here is a frozen pydantic model that serialises through :mod:`engine.canonical`, so a
result, and every provider exchange it records, has one canonical JSON form and one hash.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from engine.canonical import dumps_canonical, hash_canonical, to_hex
from engine.version import ENGINE_VERSION

__all__ = [
    "VERIFIER_VERSION",
    "CompletionRequest",
    "DecodingPolicy",
    "Exchange",
    "NumberFact",
    "ProviderDescriptor",
    "ProviderIdentity",
    "PublicEndpoint",
    "ReasoningResult",
    "ReasoningTask",
    "RequestPurpose",
    "SemanticFacts",
    "public_endpoint",
    "request_fingerprint",
]

VERIFIER_VERSION = "reasoning-verifier/1.1.0"
"""Bump whenever prompts, heuristics, bounds or result shape change: it is part of every cache key."""

RequestPurpose = Literal["reasoning_trace", "formula_translation"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


def public_endpoint(url: str) -> str:
    """``url`` as it may be recorded: no ``user:password@``, no query, no fragment, no trailing ``/``.

    Endpoints end up in hash-committed ledger entries that can never be erased, and a base URL
    may carry a credential (``https://user:key@host/``, ``https://host/v1?key=sk-...``), so
    everything but scheme, host, port and path is dropped. Raises ValueError for an unparseable URL.
    """
    parts = urlsplit(url.strip())
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", "")).rstrip("/")


PublicEndpoint = Annotated[str, AfterValidator(public_endpoint)]
"""A ``str`` field holding an endpoint; validation strips credentials (:func:`public_endpoint`)."""


class ReasoningTask(BaseModel):
    """What is verified: the primary formula (``expression``) and optional reasoning text."""

    model_config = _FROZEN

    expression: str
    reasoning: str | None = None


class ProviderIdentity(BaseModel):
    """Who answers: vendor, model (or Azure deployment) and endpoint. Distinctness compares this."""

    model_config = _FROZEN

    vendor: str
    model: str
    endpoint: PublicEndpoint


class DecodingPolicy(BaseModel):
    """How a provider decodes: recorded with every exchange and part of the cache key."""

    model_config = _FROZEN

    temperature: float | None = None
    """``None`` means "not set"; it must be the default so a stored policy (canonical JSON drops
    None) validates back to the same value and the result hash round-trips."""
    seed: int | None = None
    structured_output: str = "none"
    """How schema-locked JSON is requested (e.g. ``openai.response_format.json_schema``)."""


class ProviderDescriptor(BaseModel):
    """A configured provider as recorded on a result, in configured order."""

    model_config = _FROZEN

    identity: ProviderIdentity
    decoding_policy: DecodingPolicy
    available: bool = True


class CompletionRequest(BaseModel):
    """One provider call. ``json_schema`` set means the reply must be JSON matching it."""

    model_config = _FROZEN

    purpose: RequestPurpose
    system: str
    prompt: str
    max_tokens: int = Field(gt=0)
    schema_name: str | None = None
    json_schema: dict[str, Any] | None = None


class Exchange(BaseModel):
    """A recorded provider call: enough to replay it without the network.

    ``request_fingerprint`` is ``0x`` + SHA-256 of the canonical JSON of the request, the provider
    identity and the decoding policy. Exactly one of ``response_text`` / ``error_class`` is set.
    """

    model_config = _FROZEN

    request_fingerprint: str
    purpose: RequestPurpose
    vendor: str
    model: str
    endpoint: PublicEndpoint
    decoding_policy: DecodingPolicy
    request: CompletionRequest
    response_text: str | None = None
    error_class: str | None = None
    error_code: str | None = None

    @property
    def identity(self) -> ProviderIdentity:
        """The provider identity that answered."""
        return ProviderIdentity(vendor=self.vendor, model=self.model, endpoint=self.endpoint)

    @property
    def failed(self) -> bool:
        """True when the call raised instead of answering."""
        return self.error_class is not None


def request_fingerprint(
    request: CompletionRequest, identity: ProviderIdentity, policy: DecodingPolicy
) -> str:
    """``0x`` + SHA-256 of the canonical (request, identity, policy) triple."""
    return to_hex(
        hash_canonical(
            ["cournot.reasoning.request", request, identity, policy],
        )
    )


class NumberFact(BaseModel):
    """A number found in the query: its text, exact value (a decimal string) and percent flag.

    For percentages ``value`` is the fraction (``"5%"`` → ``"0.05"``).
    """

    model_config = _FROZEN

    text: str
    value: str
    is_percentage: bool = False


class SemanticFacts(BaseModel):
    """Verifiable claims found in the query; every list is in a deterministic order."""

    model_config = _FROZEN

    numbers: list[NumberFact] = Field(default_factory=list)
    operations: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)
    entities: list[str] = Field(default_factory=list)
    question_type: str | None = None
    unit: str | None = None


class ReasoningResult(BaseModel):
    """The verifier's verdict. ``is_valid`` holds only when no issue was raised.

    ``cached`` is an operational fact (was this served from a cache) and is excluded from
    :meth:`result_hash`; everything else is deterministic for the same inputs and exchanges.
    """

    model_config = ConfigDict(extra="forbid")

    is_valid: bool
    confidence: float
    reasoning_trace: list[str]
    issues: list[str]
    primary_formula: str
    alternative_formula: str | None = None
    semantic_facts: SemanticFacts
    provider_agreement: bool | None = None
    cached: bool = False
    cross_validation_requested: bool = True
    providers: list[ProviderDescriptor] = Field(default_factory=list)
    primary_provider: ProviderIdentity | None = None
    secondary_provider: ProviderIdentity | None = None
    exchanges: list[Exchange] = Field(default_factory=list)
    query_sha256: str = ""
    verifier_version: str = VERIFIER_VERSION
    engine_version: str = ENGINE_VERSION

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (``None`` fields dropped by the canonical rules)."""
        dumped: dict[str, Any] = self.model_dump(mode="json", exclude_none=True)
        return dumped

    def canonical_json(self, *, include_cached: bool = True) -> str:
        """Canonical JSON text of the result."""
        data = self.to_dict()
        if not include_cached:
            data.pop("cached", None)
        return dumps_canonical(data)

    def result_hash(self) -> str:
        """``0x`` + SHA-256 of the canonical JSON without the operational ``cached`` flag."""
        data = self.to_dict()
        data.pop("cached", None)
        return to_hex(hash_canonical(data))
