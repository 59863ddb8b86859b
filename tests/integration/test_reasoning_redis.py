"""Every cache rule on a real Redis server (the session ``redis_url`` fixture)."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator

import pytest
import redis

from engine.reasoning import ProviderRateLimitError, ReasoningResult, ReasoningTask, ReasoningVerifier
from engine.reasoning import cache as cache_module
from tests.stubs.providers import ScriptedProvider, good_trace

pytestmark = pytest.mark.integration

QUERY = "Alice has 10 apples and Bob has 5. How many apples do they have together?"
TASK = ReasoningTask(expression="10 + 5")


class Clock:
    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


def providers(*, model: str = "gpt-x") -> list[ScriptedProvider]:
    return [
        ScriptedProvider("anthropic", "claude-x", "https://a.example"),
        ScriptedProvider("openai", model, "https://o.example"),
    ]


def make(
    redis_url: str, providers_: list[ScriptedProvider] | None = None, **kwargs: object
) -> ReasoningVerifier:
    chosen = providers_ if providers_ is not None else providers()
    return ReasoningVerifier(chosen, redis_url=redis_url, **kwargs)  # type: ignore[arg-type]


def calls(verifier: ReasoningVerifier) -> int:
    return sum(len(p.requests) for p in verifier.providers)  # type: ignore[attr-defined]


def keys_of(client: redis.Redis, verifier: ReasoningVerifier) -> list[bytes]:
    assert verifier.cache is not None
    return sorted(client.scan_iter(match=f"cournot:reasoning:v1:{verifier.cache.namespace}:*"))


def from_redis(verifier: ReasoningVerifier, task: ReasoningTask = TASK, **kwargs: bool) -> ReasoningResult:
    """Verify after dropping the instance's LRU, so only its Redis layer can serve a hit."""
    verifier.clear_cache()
    return verifier.verify_reasoning(QUERY, task, **kwargs)


def test_redis_entries_carry_creation_time_and_a_real_expiry(redis_url: str, client: redis.Redis) -> None:
    clock = Clock()
    verifier = make(redis_url, cache_ttl_seconds=120, clock=clock)
    verifier.verify_reasoning(QUERY, TASK)
    key = verifier.cache_key(QUERY, TASK)
    assert verifier.cache is not None
    redis_key = verifier.cache.redis_key(key)
    assert keys_of(client, verifier) == [redis_key.encode()]
    record = json.loads(client.get(redis_key))  # type: ignore[arg-type]
    assert record["created_at"] == clock.now and record["key"] == key
    assert record["result"]["is_valid"] is True and record["result"]["cached"] is False
    assert 0 < client.pttl(redis_key) <= 120_000


def test_redis_serves_the_instance_that_wrote_it_after_its_lru_is_dropped(redis_url: str) -> None:
    verifier = make(redis_url)
    original = verifier.verify_reasoning(QUERY, TASK)
    served = from_redis(verifier)
    assert served.cached is True and calls(verifier) == 2
    assert served.result_hash() == original.result_hash()
    assert verifier.cache is not None and verifier.cache.redis_hits == 1


def test_instances_with_identical_configuration_never_share_redis_entries(
    redis_url: str, client: redis.Redis
) -> None:
    shared = providers()
    first, second = make(redis_url, shared), make(redis_url, shared)
    assert first.verify_reasoning(QUERY, TASK).cached is False
    assert second.verify_reasoning(QUERY, TASK).cached is False
    assert from_redis(second).cached is True  # second's own entry, not first's
    assert calls(first) == 4  # two calls each: neither read the other's entry
    assert first.cache is not None and second.cache is not None
    assert first.cache.namespace != second.cache.namespace
    assert len(keys_of(client, first)) == 1 and len(keys_of(client, second)) == 1
    assert first.cache.redis_hits == 0 and second.cache.redis_hits == 1


def test_no_option_lets_two_instances_share_a_namespace(redis_url: str) -> None:
    with pytest.raises(TypeError):
        ReasoningVerifier(providers(), redis_url=redis_url, cache_namespace="ledger-reasoning")  # type: ignore[call-arg]
    namespaces = {make(redis_url).cache.namespace for _ in range(20)}  # type: ignore[union-attr]
    assert len(namespaces) == 20


CHANGES = {
    "query": lambda: ("What do Alice and Bob have together, 10 and 5?", TASK, True),
    "query_whitespace": lambda: (QUERY + " ", TASK, True),
    "expression": lambda: (QUERY, ReasoningTask(expression="10+5"), True),
    "reasoning": lambda: (QUERY, ReasoningTask(expression="10 + 5", reasoning="1. Add 10 and 5"), True),
    "cross_validation": lambda: (QUERY, TASK, False),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_each_cache_key_component_invalidates_redis_entries(redis_url: str, change: str) -> None:
    verifier = make(redis_url)
    verifier.verify_reasoning(QUERY, TASK, enable_cross_validation=True)
    query, task, cross = CHANGES[change]()
    verifier.clear_cache()
    assert verifier.verify_reasoning(query, task, enable_cross_validation=cross).cached is False
    assert from_redis(verifier).cached is True


def test_verifier_version_invalidates_redis_entries(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    verifier = make(redis_url)
    verifier.verify_reasoning(QUERY, TASK)
    monkeypatch.setattr(cache_module, "VERIFIER_VERSION", "reasoning-verifier/99.0.0")
    assert from_redis(verifier).cached is False


def test_redis_ttl_is_enforced_by_the_stored_creation_time(redis_url: str, client: redis.Redis) -> None:
    clock = Clock()
    verifier = make(redis_url, cache_ttl_seconds=600, clock=clock)
    verifier.verify_reasoning(QUERY, TASK)
    clock.now += 601  # Redis still holds the key (its expiry is 600 s away)
    assert from_redis(verifier).cached is False
    assert calls(verifier) == 4
    assert verifier.cache is not None and verifier.cache.expirations == 1
    (redis_key,) = keys_of(client, verifier)
    assert json.loads(client.get(redis_key))["created_at"] == clock.now  # type: ignore[arg-type]


def test_redis_ttl_also_expires_keys_for_real(redis_url: str, client: redis.Redis) -> None:
    verifier = make(redis_url, cache_ttl_seconds=0.4)
    verifier.verify_reasoning(QUERY, TASK)
    assert len(keys_of(client, verifier)) == 1
    time.sleep(0.6)
    assert keys_of(client, verifier) == []
    assert verifier.verify_reasoning(QUERY, TASK).cached is False  # its own LRU entry is stale too


def test_lru_and_redis_layers_both_expire_for_one_instance(redis_url: str) -> None:
    clock = Clock()
    verifier = make(redis_url, cache_ttl_seconds=60, clock=clock)
    verifier.verify_reasoning(QUERY, TASK)
    clock.now += 30
    assert verifier.verify_reasoning(QUERY, TASK).cached is True
    clock.now += 31
    assert verifier.verify_reasoning(QUERY, TASK).cached is False
    assert verifier.cache is not None and verifier.cache.expirations == 2  # LRU entry and Redis entry
    assert calls(verifier) == 4


def test_redis_hits_are_defensive_copies(redis_url: str) -> None:
    verifier = make(redis_url)
    verifier.verify_reasoning(QUERY, TASK)
    hit = from_redis(verifier)
    hit.issues.append("tampered")
    hit.reasoning_trace.clear()
    again = from_redis(verifier)
    assert again.cached and again.issues == [] and len(again.reasoning_trace) == 2


def test_transient_failures_are_not_written_to_redis(redis_url: str, client: redis.Redis) -> None:
    failing = providers()
    failing[0].failures.append(ProviderRateLimitError("429"))
    verifier = make(redis_url, failing)
    assert not verifier.verify_reasoning(QUERY, TASK).is_valid
    assert keys_of(client, verifier) == []
    assert from_redis(verifier).cached is False


def test_placeholder_answers_are_not_written_to_redis(redis_url: str, client: redis.Redis) -> None:
    answering = providers()
    answering[0].trace = "1. Rate limit exceeded"  # returned as text, not raised
    verifier = make(redis_url, answering)
    assert not verifier.verify_reasoning(QUERY, TASK).is_valid
    assert keys_of(client, verifier) == []
    answering[0].trace = good_trace()
    recovered = from_redis(verifier)
    assert recovered.cached is False and recovered.is_valid
    assert len(keys_of(client, verifier)) == 1


def test_corrupt_redis_entries_are_discarded(redis_url: str, client: redis.Redis) -> None:
    verifier = make(redis_url)
    assert verifier.cache is not None
    redis_key = verifier.cache.redis_key(verifier.cache_key(QUERY, TASK))
    client.set(redis_key, b"{not json", px=60_000)
    assert verifier.verify_reasoning(QUERY, TASK).cached is False
    assert json.loads(client.get(redis_key))["result"]["is_valid"] is True  # type: ignore[arg-type]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_redis_down_degrades_to_the_lru_with_a_counted_logged_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    url = f"redis://:hunter2-redis-password@127.0.0.1:{closed_port()}/0"
    verifier = ReasoningVerifier(providers(), redis_url=url)
    first = verifier.verify_reasoning(QUERY, TASK)
    second = verifier.verify_reasoning(QUERY, TASK)
    assert first.is_valid and first.cached is False
    assert second.cached is True  # served by the LRU
    assert verifier.redis_errors >= 1
    assert verifier.cache_stats()["redis_errors"] == verifier.redis_errors
    assert "Redis get failed (ConnectionError)" in caplog.text
    assert "hunter2" not in caplog.text


async def test_async_twin_uses_redis_and_survives_an_outage(redis_url: str) -> None:
    verifier = make(redis_url)
    await verifier.averify_reasoning(QUERY, TASK)
    verifier.clear_cache()
    assert (await verifier.averify_reasoning(QUERY, TASK)).cached is True
    assert verifier.cache is not None and verifier.cache.redis_hits == 1
    down = ReasoningVerifier(providers(), redis_url=f"redis://127.0.0.1:{closed_port()}/0")
    assert (await down.averify_reasoning(QUERY, TASK)).is_valid
    assert (await down.averify_reasoning(QUERY, TASK)).cached is True
    assert down.redis_errors >= 1


def test_a_down_redis_is_not_hammered_and_is_retried_after_a_cooldown() -> None:
    clock = Clock()
    verifier = ReasoningVerifier(providers(), redis_url=f"redis://127.0.0.1:{closed_port()}/0", clock=clock)
    verifier.verify_reasoning(QUERY, TASK)
    errors_after_first = verifier.redis_errors
    assert errors_after_first == 1  # the get failed; the put was skipped during the cool-down
    verifier.verify_reasoning(QUERY, ReasoningTask(expression="15"))
    assert verifier.redis_errors == errors_after_first
    clock.now += 10
    verifier.verify_reasoning(QUERY, ReasoningTask(expression="5 + 10"))
    assert verifier.redis_errors == errors_after_first + 1
