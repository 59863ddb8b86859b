"""Reasoning verification (seed 000): LLM-backed chain-of-thought and formula cross-validation.

Public API::

    from engine.reasoning import ReasoningVerifier, ReasoningTask, build_providers_from_env

    verifier = ReasoningVerifier(["anthropic", "openai"])          # or Provider objects
    result = verifier.verify_reasoning(query, ReasoningTask(expression="10 + 5"))
    result.is_valid, result.issues, result.exchanges, result.canonical_json()

Fail-closed: without a substantive reasoning trace from the primary provider, without a
distinct secondary provider when cross-validation is requested, or with a formula the safe
evaluator refuses, ``is_valid`` is False and the issues say why. Recorded exchanges replay through :class:`RecordedProviders`.
"""

from engine.reasoning.cache import ResultCache, build_cache_key
from engine.reasoning.env import build_provider_from_env, build_providers_from_env
from engine.reasoning.errors import (
    ProviderConfigError,
    ProviderError,
    ProviderRateLimitError,
    ProviderResponseError,
    ReplayMissError,
)
from engine.reasoning.evaluator import Equivalence, FormulaError, evaluate_formula, formulas_equivalent
from engine.reasoning.models import (
    VERIFIER_VERSION,
    CompletionRequest,
    DecodingPolicy,
    Exchange,
    ProviderDescriptor,
    ProviderIdentity,
    ReasoningResult,
    ReasoningTask,
    SemanticFacts,
)
from engine.reasoning.provider import AsyncProvider, Provider, RetryPolicy, UnavailableProvider
from engine.reasoning.replay import RecordedProviders, ReplayProvider
from engine.reasoning.sdk_providers import (
    AnthropicProvider,
    AzureOpenAIProvider,
    GeminiProvider,
    OpenAIProvider,
)
from engine.reasoning.trace import ISSUE_TRACE_MISSING, ISSUE_TRACE_NON_SUBSTANTIVE, NON_SUBSTANTIVE_MARKERS
from engine.reasoning.verifier import (
    ISSUE_FORMULA_REFUSED,
    ISSUE_NO_SECONDARY,
    ISSUE_SECONDARY_FORMULA_REFUSED,
    ReasoningVerifier,
    is_fail_closed,
)

ReasoningValidation = ReasoningResult
"""Alias: the result type under the name the seed's implementation uses."""

__all__ = [
    "ISSUE_FORMULA_REFUSED",
    "ISSUE_NO_SECONDARY",
    "ISSUE_SECONDARY_FORMULA_REFUSED",
    "ISSUE_TRACE_MISSING",
    "ISSUE_TRACE_NON_SUBSTANTIVE",
    "NON_SUBSTANTIVE_MARKERS",
    "VERIFIER_VERSION",
    "AnthropicProvider",
    "AsyncProvider",
    "AzureOpenAIProvider",
    "CompletionRequest",
    "DecodingPolicy",
    "Equivalence",
    "Exchange",
    "FormulaError",
    "GeminiProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderConfigError",
    "ProviderDescriptor",
    "ProviderError",
    "ProviderIdentity",
    "ProviderRateLimitError",
    "ProviderResponseError",
    "ReasoningResult",
    "ReasoningTask",
    "ReasoningValidation",
    "ReasoningVerifier",
    "RecordedProviders",
    "ReplayMissError",
    "ReplayProvider",
    "ResultCache",
    "RetryPolicy",
    "SemanticFacts",
    "UnavailableProvider",
    "build_cache_key",
    "build_provider_from_env",
    "build_providers_from_env",
    "evaluate_formula",
    "formulas_equivalent",
    "is_fail_closed",
]
