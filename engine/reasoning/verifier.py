"""The ReasoningVerifier: chain-of-thought, trace, formula and cross-validation checks, fail-closed.

Pipeline of :meth:`ReasoningVerifier.verify_reasoning` (issues are appended in this order):

1. cache lookup (key: :func:`~engine.reasoning.cache.build_cache_key`);
2. semantic facts of the query; the task's chain of thought must cover the operations the query
   asks for explicitly;
3. the primary provider (first *available* configured provider) writes a numbered reasoning
   trace; no provider, a failed call or an empty answer gives ``Reasoning trace missing`` and
   ``Reasoning trace unavailable or non-substantive``; an answer without a substantive entry
   gives the latter alone;
4. formula heuristics (query numbers present, explicit operations have their operator), and
   the safe evaluator must accept the primary formula (only numeric literals and ``+ - * / **``);
   a refused formula gives ``Primary formula refused by the safe evaluator: <why>``;
5. with ``enable_cross_validation`` the secondary (first available provider whose identity
   differs from the primary's) translates the query into a formula under a JSON schema, and the
   two formulas must be equivalent (safe evaluator; a refused formula is never equivalent to
   anything, itself included); with no such provider the issue is
   ``Cross-validation requested but no distinct secondary provider is available``.

``is_valid`` holds only when no issue was raised. Every provider call is recorded as an
:class:`~engine.reasoning.models.Exchange` on the result. Fail-closed results
(:func:`is_fail_closed`: missing evidence, including an empty or placeholder answer a provider
returned) are never cached. Each verifier owns a private cache namespace (random per instance),
so no two verifiers ever read or write each other's entries, in the LRU or in Redis.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from engine.reasoning.cache import ResultCache, build_cache_key
from engine.reasoning.env import build_provider_from_env
from engine.reasoning.errors import ProviderError, ProviderResponseError, ReplayMissError
from engine.reasoning.evaluator import formula_refusal, formulas_equivalent
from engine.reasoning.facts import check_formula_semantics, expected_operations, extract_semantic_facts
from engine.reasoning.models import (
    CompletionRequest,
    Exchange,
    ProviderDescriptor,
    ReasoningResult,
    ReasoningTask,
    request_fingerprint,
)
from engine.reasoning.prompts import formula_request, parse_formula_response, trace_request
from engine.reasoning.provider import AsyncProvider, Provider, is_available
from engine.reasoning.trace import (
    ISSUE_TRACE_MISSING,
    ISSUE_TRACE_NON_SUBSTANTIVE,
    check_chain_of_thought,
    is_substantive,
    parse_chain_of_thought,
    parse_entries,
    trace_issues,
)

__all__ = [
    "ISSUE_FORMULA_REFUSED",
    "ISSUE_NO_SECONDARY",
    "ISSUE_SECONDARY_FORMULA_REFUSED",
    "MAX_QUERY_LENGTH",
    "ReasoningVerifier",
    "is_fail_closed",
]

log = logging.getLogger(__name__)

ISSUE_NO_SECONDARY = "Cross-validation requested but no distinct secondary provider is available"
ISSUE_FORMULA_REFUSED = "Primary formula refused by the safe evaluator"
ISSUE_SECONDARY_FORMULA_REFUSED = "Secondary formula refused by the safe evaluator"
MAX_QUERY_LENGTH = 32_768

ISSUE_CROSS_VALIDATION_FAILED = "Cross-validation failed"
_EVIDENCE_MISSING_ISSUES = frozenset({ISSUE_TRACE_MISSING, ISSUE_TRACE_NON_SUBSTANTIVE, ISSUE_NO_SECONDARY})

_Call = tuple[Provider, CompletionRequest]
_Pipeline = Generator[_Call, Exchange, ReasoningResult]


def is_fail_closed(result: ReasoningResult) -> bool:
    """True when ``result`` is invalid because evidence was missing, not because a check failed.

    That is: no available primary provider, a provider call that failed, an empty or placeholder
    trace (``Reasoning trace missing`` / ``... unavailable or non-substantive``), no distinct
    secondary, or a cross-validation answer that could not be used. Such a result may change when
    the providers recover, so it is never cached (and the reasoning stage may retry it).
    """
    if result.is_valid:
        return False
    if result.primary_provider is None or any(exchange.failed for exchange in result.exchanges):
        return True
    return any(
        issue in _EVIDENCE_MISSING_ISSUES or issue.startswith(f"{ISSUE_CROSS_VALIDATION_FAILED}:")
        for issue in result.issues
    )


def _coerce_task(task: object) -> ReasoningTask:
    if isinstance(task, ReasoningTask):
        return task
    if isinstance(task, Mapping):
        fields = {"expression": task.get("expression"), "reasoning": task.get("reasoning")}
    elif hasattr(task, "expression"):
        fields = {"expression": task.expression, "reasoning": getattr(task, "reasoning", None)}
    else:
        raise TypeError("task must have an 'expression' (str) and optionally 'reasoning' (str)")
    if not isinstance(fields["expression"], str):
        raise TypeError("task.expression must be a str")
    if fields["reasoning"] is not None and not isinstance(fields["reasoning"], str):
        raise TypeError("task.reasoning must be a str or None")
    try:
        return ReasoningTask.model_validate(fields)
    except ValidationError as exc:  # pragma: no cover - types were checked above
        raise TypeError(str(exc)) from None


def _check_text(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if len(value) > MAX_QUERY_LENGTH:
        raise ValueError(f"{name} is longer than {MAX_QUERY_LENGTH} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} is not valid Unicode (lone surrogate)") from None


def _confidence(issues: list[str], substantive_entries: int, has_steps: bool, has_operations: bool) -> float:
    """1.0 without issues; otherwise fixed deductions in whole points, floored at 0."""
    if not issues:
        return 1.0
    points = 100
    for issue in issues:
        lowered = issue.lower()
        if "missing numbers" in lowered:
            points -= 40
        elif "disagreement" in lowered:
            points -= 50
        elif "operation" in lowered or "formula" in lowered or "reasoning" in lowered:
            points -= 30
        else:
            points -= 15
    if substantive_entries < 2:
        points -= 20
    if not has_steps and has_operations:
        points -= 10
    return max(points, 0) / 100


def _resolve(providers: Sequence[str | Provider], environ: Mapping[str, str] | None) -> tuple[Provider, ...]:
    if isinstance(providers, str) or not isinstance(providers, Sequence):
        raise TypeError("providers must be a list of provider names or Provider objects")
    resolved: list[Provider] = []
    for item in providers:
        if isinstance(item, str):
            resolved.append(build_provider_from_env(item, environ=environ))
        elif isinstance(item, Provider):
            resolved.append(item)
        else:
            raise TypeError(f"{type(item).__name__} is neither a provider name nor a Provider")
    return tuple(resolved)


class ReasoningVerifier:
    """Verify that a formula faithfully answers a query, failing closed on missing evidence.

    ``providers`` is an ordered list of names (``anthropic``, ``openai``, ``azure``, ``gemini``,
    built from the environment) or :class:`~engine.reasoning.provider.Provider` objects. The list
    is fixed at construction. ``clock`` returns seconds and dates cache entries. The cache (LRU,
    plus Redis with ``redis_url``) belongs to this instance alone: its namespace is random and
    cannot be chosen, so two verifiers never share entries.
    """

    def __init__(
        self,
        providers: Sequence[str | Provider],
        *,
        enable_cache: bool = True,
        cache_ttl_seconds: float = 3600,
        cache_size: int = 1024,
        redis_url: str | None = None,
        clock: Callable[[], float] = time.time,
        environ: Mapping[str, str] | None = None,
        redis_timeout: float = 0.5,
    ) -> None:
        self.providers: tuple[Provider, ...] = _resolve(providers, environ)
        self.descriptors: tuple[ProviderDescriptor, ...] = tuple(
            ProviderDescriptor(
                identity=p.identity, decoding_policy=p.decoding_policy, available=is_available(p)
            )
            for p in self.providers
        )
        available = [p for p in self.providers if is_available(p)]
        self.primary_provider: Provider | None = available[0] if available else None
        self.secondary_provider: Provider | None = None
        if self.primary_provider is not None:
            primary_identity = self.primary_provider.identity
            self.secondary_provider = next((p for p in available[1:] if p.identity != primary_identity), None)
        self.enable_cache = bool(enable_cache)
        self.cache: ResultCache | None = None
        if self.enable_cache:
            self.cache = ResultCache(
                ttl_seconds=cache_ttl_seconds,
                max_size=cache_size,
                clock=clock,
                redis_url=redis_url,
                redis_timeout=redis_timeout,
            )

    # Public API ------------------------------------------------------------------------------

    def cache_key(self, query: str, task: object, *, enable_cross_validation: bool = True) -> str:
        """The cache key a call with these arguments uses (64 hex digits)."""
        checked = _coerce_task(task)
        return build_cache_key(
            query=query,
            expression=checked.expression,
            reasoning=checked.reasoning,
            providers=self.descriptors,
            cross_validation=enable_cross_validation,
        )

    def verify_reasoning(
        self, query: str, task: object, *, enable_cross_validation: bool = True
    ) -> ReasoningResult:
        """Verify ``task`` (``expression`` + optional ``reasoning``) against ``query``."""
        checked, key = self._prepare(query, task, enable_cross_validation)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return hit
        pipeline = self._pipeline(query, checked, enable_cross_validation)
        try:
            call = next(pipeline)
            while True:
                call = pipeline.send(self._invoke(*call))
        except StopIteration as done:
            result: ReasoningResult = done.value
        if self.cache is not None and not is_fail_closed(result):
            self.cache.put(key, result)
        return result

    async def averify_reasoning(
        self, query: str, task: object, *, enable_cross_validation: bool = True
    ) -> ReasoningResult:
        """Async twin of :meth:`verify_reasoning` (same pipeline, same results)."""
        checked, key = self._prepare(query, task, enable_cross_validation)
        cache = self.cache
        if cache is not None:
            hit = await asyncio.to_thread(cache.get, key) if cache.uses_redis else cache.get(key)
            if hit is not None:
                return hit
        pipeline = self._pipeline(query, checked, enable_cross_validation)
        try:
            call = next(pipeline)
            while True:
                call = pipeline.send(await self._ainvoke(*call))
        except StopIteration as done:
            result: ReasoningResult = done.value
        if cache is not None and not is_fail_closed(result):
            if cache.uses_redis:
                await asyncio.to_thread(cache.put, key, result)
            else:
                cache.put(key, result)
        return result

    def clear_cache(self) -> None:
        """Drop this instance's in-process entries."""
        if self.cache is not None:
            self.cache.clear()

    def cache_stats(self) -> dict[str, int | float | bool | str]:
        """Cache counters (``{}`` when caching is off)."""
        return self.cache.stats() if self.cache is not None else {}

    @property
    def redis_errors(self) -> int:
        """How many Redis operations failed and were served by the LRU alone."""
        return self.cache.redis_errors if self.cache is not None else 0

    def close(self) -> None:
        """Release provider and Redis connections."""
        if self.cache is not None:
            self.cache.close()
        for provider in self.providers:
            close: Any = getattr(provider, "close", None)
            if callable(close):
                close()

    # Internals -------------------------------------------------------------------------------

    def _prepare(self, query: str, task: object, cross: bool) -> tuple[ReasoningTask, str]:
        _check_text("query", query)
        checked = _coerce_task(task)
        _check_text("task.expression", checked.expression)
        if checked.reasoning is not None:
            _check_text("task.reasoning", checked.reasoning)
        key = build_cache_key(
            query=query,
            expression=checked.expression,
            reasoning=checked.reasoning,
            providers=self.descriptors,
            cross_validation=bool(cross),
        )
        return checked, key

    def _exchange(
        self, provider: Provider, request: CompletionRequest, text: object, error: BaseException | None
    ) -> Exchange:
        identity = provider.identity
        policy = provider.decoding_policy
        fields: dict[str, Any] = {
            "request_fingerprint": request_fingerprint(request, identity, policy),
            "purpose": request.purpose,
            "vendor": identity.vendor,
            "model": identity.model,
            "endpoint": identity.endpoint,
            "decoding_policy": policy,
            "request": request,
        }
        if error is None and not isinstance(text, str):
            error = ProviderResponseError(f"{identity.vendor} returned a non-text answer")
        if error is None:
            return Exchange(**fields, response_text=text)
        if isinstance(error, ProviderError):
            error_class, code = error.error_class, error.code
        else:
            error_class, code = type(error).__name__, "provider_exception"
        log.warning("%s/%s %s failed: %s", identity.vendor, identity.model, request.purpose, code)
        return Exchange(**fields, error_class=error_class, error_code=code)

    def _invoke(self, provider: Provider, request: CompletionRequest) -> Exchange:
        try:
            text = provider.complete(request)
        except ReplayMissError:
            raise
        except Exception as exc:  # fail closed on any provider failure; recorded, never raised
            return self._exchange(provider, request, None, exc)
        return self._exchange(provider, request, text, None)

    async def _ainvoke(self, provider: Provider, request: CompletionRequest) -> Exchange:
        try:
            if isinstance(provider, AsyncProvider):
                text = await provider.acomplete(request)
            else:
                text = await asyncio.to_thread(provider.complete, request)
        except ReplayMissError:
            raise
        except Exception as exc:
            return self._exchange(provider, request, None, exc)
        return self._exchange(provider, request, text, None)

    def _pipeline(self, query: str, task: ReasoningTask, cross: bool) -> _Pipeline:
        facts = extract_semantic_facts(query)
        steps = parse_chain_of_thought(task.reasoning, task.expression)
        issues = check_chain_of_thought(steps, expected_operations(query))
        exchanges: list[Exchange] = []
        trace: list[str] = []
        obtained = False
        primary = self.primary_provider
        if primary is not None:
            exchange = yield primary, trace_request(query, task.expression)
            exchanges.append(exchange)
            if exchange.response_text is not None and exchange.response_text.strip():
                obtained = True
                trace = parse_entries(exchange.response_text)
        issues += trace_issues(trace, obtained=obtained)
        issues += check_formula_semantics(facts, query, task.expression)
        refusal = formula_refusal(task.expression)
        if refusal is not None:
            issues.append(f"{ISSUE_FORMULA_REFUSED}: {refusal}")
        alternative: str | None = None
        agreement: bool | None = None
        secondary = self.secondary_provider if cross else None
        if cross and secondary is None:
            issues.append(ISSUE_NO_SECONDARY)
        elif secondary is not None:
            exchange = yield secondary, formula_request(query)
            exchanges.append(exchange)
            try:
                if exchange.failed:
                    raise ProviderResponseError(exchange.error_code or "provider_error")
                alternative = parse_formula_response(exchange.response_text or "")
            except ProviderResponseError as error:
                code = exchange.error_code if exchange.failed else error.code
                issues.append(f"{ISSUE_CROSS_VALIDATION_FAILED}: {code}")
            else:
                agreement = formulas_equivalent(task.expression, alternative).equivalent
                if not agreement:
                    issues.append(
                        f"LLM disagreement: Primary='{task.expression}' vs Secondary='{alternative}'"
                    )
                alternative_refusal = formula_refusal(alternative)
                if alternative_refusal is not None:
                    issues.append(f"{ISSUE_SECONDARY_FORMULA_REFUSED}: {alternative_refusal}")
        substantive = sum(1 for entry in trace if is_substantive(entry))
        result = ReasoningResult(
            is_valid=not issues,
            confidence=_confidence(issues, substantive, bool(steps), bool(facts.operations)),
            reasoning_trace=trace,
            issues=issues,
            primary_formula=task.expression,
            alternative_formula=alternative,
            semantic_facts=facts,
            provider_agreement=agreement,
            cross_validation_requested=cross,
            providers=list(self.descriptors),
            primary_provider=primary.identity if primary is not None else None,
            secondary_provider=secondary.identity if secondary is not None else None,
            exchanges=exchanges,
            query_sha256=hashlib.sha256(query.encode("utf-8")).hexdigest(),
        )
        return result
