"""Cache rules on the in-process LRU layer (the Redis layer has its own integration tests)."""

from __future__ import annotations

import hashlib

import pytest

from engine.canonical import canonical_bytes
from engine.reasoning import (
    DecodingPolicy,
    ProviderDescriptor,
    ProviderIdentity,
    ProviderRateLimitError,
    ReasoningTask,
    ReasoningVerifier,
    build_cache_key,
    is_fail_closed,
)
from engine.reasoning import cache as cache_module
from engine.reasoning.errors import ProviderServerError
from tests.stubs.providers import ScriptedProvider, good_trace

QUERY = "Alice has 10 apples and Bob has 5. How many apples do they have together?"
TASK = ReasoningTask(expression="10 + 5")


class Clock:
    """A settable clock: TTL tests advance it instead of sleeping."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def providers() -> list[ScriptedProvider]:
    return [
        ScriptedProvider("anthropic", "claude-x", "https://a.example"),
        ScriptedProvider("openai", "gpt-x", "https://o.example"),
    ]


def make(providers_: list[ScriptedProvider] | None = None, **kwargs: object) -> ReasoningVerifier:
    return ReasoningVerifier(providers_ if providers_ is not None else providers(), **kwargs)  # type: ignore[arg-type]


def calls(verifier: ReasoningVerifier) -> int:
    return sum(len(p.requests) for p in verifier.providers)  # type: ignore[attr-defined]


def test_second_identical_call_is_served_from_cache_without_provider_calls() -> None:
    verifier = make()
    first = verifier.verify_reasoning(QUERY, TASK)
    assert first.cached is False and calls(verifier) == 2
    second = verifier.verify_reasoning(QUERY, TASK)
    assert second.cached is True and calls(verifier) == 2
    assert second.result_hash() == first.result_hash()


# --- key composition ----------------------------------------------------------------------


def test_cache_key_changes_when_the_query_changes_byte_for_byte() -> None:
    verifier = make()
    verifier.verify_reasoning("What is 12/3?", ReasoningTask(expression="12/3"))
    assert verifier.verify_reasoning("What is 12 / 3?", ReasoningTask(expression="12/3")).cached is False
    assert verifier.verify_reasoning("what is 12/3?", ReasoningTask(expression="12/3")).cached is False


def test_cache_key_changes_when_the_primary_formula_changes() -> None:
    verifier = make()
    verifier.verify_reasoning(QUERY, ReasoningTask(expression="10 + 5"))
    assert verifier.verify_reasoning(QUERY, ReasoningTask(expression="10+5")).cached is False


def test_cache_key_changes_when_the_task_reasoning_changes() -> None:
    verifier = make()
    query = "What is 10 plus 5?"
    good = verifier.verify_reasoning(query, ReasoningTask(expression="10 + 5", reasoning="1. Add 10 and 5"))
    assert good.is_valid
    changed = verifier.verify_reasoning(
        query, ReasoningTask(expression="10 + 5", reasoning="1. Take 10 and 5")
    )
    assert changed.cached is False  # a stale hit would wrongly report the first, valid result
    assert changed.issues == ["Expected operations not in reasoning: add"]
    assert verifier.verify_reasoning(query, ReasoningTask(expression="10 + 5")).cached is False


def test_cache_key_changes_when_cross_validation_is_toggled() -> None:
    verifier = make()
    assert verifier.verify_reasoning(QUERY, TASK, enable_cross_validation=False).cached is False
    assert verifier.verify_reasoning(QUERY, TASK, enable_cross_validation=True).cached is False
    assert verifier.verify_reasoning(QUERY, TASK, enable_cross_validation=False).cached is True


def key_for(descriptors: list[ProviderDescriptor], **overrides: object) -> str:
    fields: dict[str, object] = {
        "query": QUERY,
        "expression": "10 + 5",
        "reasoning": None,
        "providers": descriptors,
        "cross_validation": True,
    }
    fields.update(overrides)
    return build_cache_key(**fields)  # type: ignore[arg-type]


def descriptor(
    vendor: str, model: str = "m", endpoint: str = "https://e", **policy: object
) -> ProviderDescriptor:
    return ProviderDescriptor(
        identity=ProviderIdentity(vendor=vendor, model=model, endpoint=endpoint),
        decoding_policy=DecodingPolicy(**policy),  # type: ignore[arg-type]
    )


def test_cache_key_changes_when_providers_are_reordered() -> None:
    a, b = descriptor("anthropic"), descriptor("openai")
    assert key_for([a, b]) != key_for([b, a])
    first, second = providers()
    swapped = make([second, first])
    assert swapped.cache_key(QUERY, TASK) != make([first, second]).cache_key(QUERY, TASK)


def test_cache_key_changes_when_a_provider_is_added_or_removed() -> None:
    a, b = descriptor("anthropic"), descriptor("openai")
    keys = {key_for([a]), key_for([a, b]), key_for([a, b, b]), key_for([])}
    assert len(keys) == 4


def test_cache_key_changes_when_a_provider_model_endpoint_or_decoding_policy_changes() -> None:
    base = key_for([descriptor("openai")])
    assert key_for([descriptor("openai", model="other")]) != base
    assert key_for([descriptor("openai", endpoint="https://proxy")]) != base
    assert key_for([descriptor("openai", seed=1)]) != base
    unavailable = descriptor("openai").model_copy(update={"available": False})
    assert key_for([unavailable]) != base


def test_cache_key_changes_with_the_verifier_version(monkeypatch: pytest.MonkeyPatch) -> None:
    base = key_for([descriptor("openai")])
    monkeypatch.setattr(cache_module, "VERIFIER_VERSION", "reasoning-verifier/9.9.9")
    assert key_for([descriptor("openai")]) != base


def test_cache_key_is_an_unambiguous_full_sha256() -> None:
    key = key_for([descriptor("a")], query="a||b", expression="c")
    assert len(key) == 64 and int(key, 16) >= 0
    assert key != key_for([descriptor("a")], query="a", expression="b||c")
    assert key_for([descriptor("a,b")]) != key_for([descriptor("a"), descriptor("b")])
    assert key_for([descriptor("a")], reasoning="") != key_for([descriptor("a")], reasoning=None)
    components = [
        "cournot.reasoning.cache",
        cache_module.CACHE_KEY_SCHEMA,
        cache_module.VERIFIER_VERSION,
        cache_module.ENGINE_VERSION,
        "a||b",
        "c",
        None,
        [descriptor("a")],
        True,
    ]
    assert key == hashlib.sha256(canonical_bytes(components)).hexdigest()


# --- TTL, LRU, isolation, copies ----------------------------------------------------------


def test_entries_older_than_the_ttl_are_evicted_and_recomputed() -> None:
    clock = Clock()
    verifier = make(cache_ttl_seconds=60, clock=clock)
    verifier.verify_reasoning(QUERY, TASK)
    clock.now += 60
    assert verifier.verify_reasoning(QUERY, TASK).cached is True  # exactly the TTL old: still fresh
    clock.now += 0.001
    assert verifier.verify_reasoning(QUERY, TASK).cached is False
    assert verifier.cache is not None and verifier.cache.expirations == 1
    assert calls(verifier) == 4


def test_stale_entries_are_never_returned_even_inside_the_lru_window() -> None:
    clock = Clock()
    verifier = make(cache_ttl_seconds=1, cache_size=1000, clock=clock)
    verifier.verify_reasoning(QUERY, TASK)
    clock.now += 5
    assert verifier.verify_reasoning(QUERY, TASK).cached is False


def test_entries_dated_in_the_future_are_treated_as_stale() -> None:
    clock = Clock()
    verifier = make(clock=clock)
    verifier.verify_reasoning(QUERY, TASK)
    clock.now -= 10  # the clock went backwards
    assert verifier.verify_reasoning(QUERY, TASK).cached is False


def test_lru_hits_refresh_recency() -> None:
    verifier = make(cache_size=2)
    tasks = [ReasoningTask(expression=e) for e in ("10 + 5", "5 + 10", "15")]
    verifier.verify_reasoning(QUERY, tasks[0])
    verifier.verify_reasoning(QUERY, tasks[1])
    assert verifier.verify_reasoning(QUERY, tasks[0]).cached is True  # refresh tasks[0]
    verifier.verify_reasoning(QUERY, tasks[2])  # evicts the least recently used: tasks[1]
    assert verifier.verify_reasoning(QUERY, tasks[0]).cached is True
    assert verifier.verify_reasoning(QUERY, tasks[1]).cached is False
    assert verifier.cache is not None and verifier.cache.evictions == 2


def test_instances_with_identical_configuration_never_share_entries() -> None:
    shared = providers()
    one, two = make(shared), make(shared)
    assert one.verify_reasoning(QUERY, TASK).cached is False
    assert two.verify_reasoning(QUERY, TASK).cached is False
    assert one.cache is not None and two.cache is not None
    assert one.cache.namespace != two.cache.namespace


def test_cached_results_are_defensive_copies() -> None:
    verifier = make()
    first = verifier.verify_reasoning(QUERY, TASK)
    first.issues.append("mutated")
    first.reasoning_trace.clear()
    first.semantic_facts.entities.append("Mallory")
    second = verifier.verify_reasoning(QUERY, TASK)
    assert second.cached and second.issues == [] and len(second.reasoning_trace) == 2
    assert second.semantic_facts.entities == ["Alice", "Bob"]
    second.issues.append("again")
    second.exchanges.clear()
    third = verifier.verify_reasoning(QUERY, TASK)
    assert third.issues == [] and len(third.exchanges) == 2
    assert third is not second


@pytest.mark.parametrize(
    "error", [ProviderRateLimitError("429"), ProviderServerError("500"), RuntimeError("x")]
)
def test_results_caused_by_provider_failures_are_not_cached(error: BaseException) -> None:
    first, second = providers()
    first.failures.append(error)
    verifier = make([first, second])
    failed = verifier.verify_reasoning(QUERY, TASK)
    assert not failed.is_valid
    recovered = verifier.verify_reasoning(QUERY, TASK)
    assert recovered.cached is False and recovered.is_valid
    assert verifier.verify_reasoning(QUERY, TASK).cached is True


def test_failed_cross_validation_is_not_cached() -> None:
    first, second = providers()
    second.failures.append(ProviderRateLimitError("429"))
    verifier = make([first, second])
    assert verifier.verify_reasoning(QUERY, TASK).issues == ["Cross-validation failed: rate_limited"]
    assert verifier.verify_reasoning(QUERY, TASK).cached is False


@pytest.mark.parametrize("placeholder", ["1. Rate limit exceeded", "1. N/A", "", "   \n", "no list at all"])
def test_placeholder_answers_a_provider_returns_are_never_cached(placeholder: str) -> None:
    primary, secondary = providers()
    primary.trace = placeholder  # returned, not raised: the call itself succeeds
    verifier = make([primary, secondary])
    failed = verifier.verify_reasoning(QUERY, TASK)
    assert not failed.is_valid and "Reasoning trace unavailable or non-substantive" in failed.issues
    assert is_fail_closed(failed) and not any(exchange.failed for exchange in failed.exchanges)
    primary.trace = good_trace()  # the provider recovers: its answer must be used, not the cache
    recovered = verifier.verify_reasoning(QUERY, TASK)
    assert recovered.cached is False and recovered.is_valid
    assert verifier.verify_reasoning(QUERY, TASK).cached is True
    assert verifier.cache is not None and len(verifier.cache) == 1


def test_results_without_any_provider_are_not_cached() -> None:
    verifier = make([])
    assert verifier.verify_reasoning(QUERY, TASK).issues[0] == "Reasoning trace missing"
    assert verifier.verify_reasoning(QUERY, TASK).cached is False


def test_deterministic_negative_results_are_cached() -> None:
    verifier = make([ScriptedProvider(trace=good_trace(), formula="10 * 5"), providers()[1]])
    verifier.verify_reasoning(QUERY, ReasoningTask(expression="10 * 5"))
    second = verifier.verify_reasoning(QUERY, ReasoningTask(expression="10 * 5"))
    assert second.cached is True and not second.is_valid and not is_fail_closed(second)


def test_cache_can_be_disabled_and_cleared() -> None:
    off = make(enable_cache=False)
    off.verify_reasoning(QUERY, TASK)
    assert off.verify_reasoning(QUERY, TASK).cached is False and off.cache_stats() == {}
    on = make()
    on.verify_reasoning(QUERY, TASK)
    on.clear_cache()
    assert on.verify_reasoning(QUERY, TASK).cached is False
    stats = on.cache_stats()
    assert stats["size"] == 1 and stats["misses"] == 2 and stats["redis"] is False


@pytest.mark.parametrize(
    "kwargs",
    [
        {"cache_ttl_seconds": 0},
        {"cache_ttl_seconds": -1},
        {"cache_ttl_seconds": float("inf")},
        {"cache_size": 0},
        {"cache_namespace": "shared"},
    ],
)
def test_invalid_cache_settings_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises((ValueError, TypeError)):
        make(**kwargs)
