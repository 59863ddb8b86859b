"""Every cache rule on a real Redis server (the session ``redis_url`` fixture)."""

from __future__ import annotations

import json
import logging
import socket
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from engine.reasoning import ProviderRateLimitError, ReasoningTask, ReasoningVerifier
from engine.reasoning import cache as cache_module
from tests.stubs.providers import ScriptedProvider

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


@pytest.fixture
def namespace() -> str:
    return f"t-{uuid.uuid4().hex}"


def providers(*, model: str = "gpt-x") -> list[ScriptedProvider]:
    return [
        ScriptedProvider("anthropic", "claude-x", "https://a.example"),
        ScriptedProvider("openai", model, "https://o.example"),
    ]


def make(
    redis_url: str,
    namespace: str | None = None,
    providers_: list[ScriptedProvider] | None = None,
    **kwargs: object,
) -> ReasoningVerifier:
    chosen = providers_ if providers_ is not None else providers()
    return ReasoningVerifier(chosen, redis_url=redis_url, cache_namespace=namespace, **kwargs)  # type: ignore[arg-type]


def calls(verifier: ReasoningVerifier) -> int:
    return sum(len(p.requests) for p in verifier.providers)  # type: ignore[attr-defined]


def keys_in(client: redis.Redis, namespace: str) -> list[bytes]:
    return sorted(client.scan_iter(match=f"cournot:reasoning:v1:{namespace}:*"))


def test_redis_entries_carry_creation_time_and_a_real_expiry(
    redis_url: str, client: redis.Redis, namespace: str
) -> None:
    clock = Clock()
    verifier = make(redis_url, namespace, cache_ttl_seconds=120, clock=clock)
    verifier.verify_reasoning(QUERY, TASK)
    key = verifier.cache_key(QUERY, TASK)
    assert verifier.cache is not None
    redis_key = verifier.cache.redis_key(key)
    assert keys_in(client, namespace) == [redis_key.encode()]
    record = json.loads(client.get(redis_key))  # type: ignore[arg-type]
    assert record["created_at"] == clock.now and record["key"] == key
    assert record["result"]["is_valid"] is True and record["result"]["cached"] is False
    assert 0 < client.pttl(redis_key) <= 120_000


def test_explicit_namespace_shares_entries_between_instances(redis_url: str, namespace: str) -> None:
    first = make(redis_url, namespace)
    second = make(redis_url, namespace)
    original = first.verify_reasoning(QUERY, TASK)
    shared = second.verify_reasoning(QUERY, TASK)
    assert shared.cached is True and calls(second) == 0
    assert shared.result_hash() == original.result_hash()
    assert second.cache is not None and second.cache.redis_hits == 1


def test_instances_are_isolated_by_default_even_with_redis(redis_url: str, client: redis.Redis) -> None:
    first, second = make(redis_url), make(redis_url)
    assert first.verify_reasoning(QUERY, TASK).cached is False
    assert second.verify_reasoning(QUERY, TASK).cached is False
    assert calls(second) == 2
    assert first.cache is not None and second.cache is not None
    assert first.cache.namespace != second.cache.namespace
    assert (
        len(keys_in(client, first.cache.namespace)) == 1 and len(keys_in(client, second.cache.namespace)) == 1
    )


CHANGES = {
    "query": lambda: ("What do Alice and Bob have together, 10 and 5?", TASK, True, providers()),
    "query_whitespace": lambda: (QUERY + " ", TASK, True, providers()),
    "expression": lambda: (QUERY, ReasoningTask(expression="10+5"), True, providers()),
    "reasoning": lambda: (
        QUERY,
        ReasoningTask(expression="10 + 5", reasoning="1. Add 10 and 5"),
        True,
        providers(),
    ),
    "providers_reordered": lambda: (QUERY, TASK, True, list(reversed(providers()))),
    "provider_removed": lambda: (QUERY, TASK, True, providers()[:1]),
    "provider_added": lambda: (
        QUERY,
        TASK,
        True,
        [*providers(), ScriptedProvider("gemini", "g", "https://g.example")],
    ),
    "provider_model": lambda: (QUERY, TASK, True, providers(model="gpt-y")),
    "cross_validation": lambda: (QUERY, TASK, False, providers()),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_each_cache_key_component_invalidates_shared_redis_entries(
    redis_url: str, namespace: str, change: str
) -> None:
    make(redis_url, namespace).verify_reasoning(QUERY, TASK, enable_cross_validation=True)
    query, task, cross, changed_providers = CHANGES[change]()
    changed = make(redis_url, namespace, changed_providers)
    assert changed.verify_reasoning(query, task, enable_cross_validation=cross).cached is False
    assert make(redis_url, namespace).verify_reasoning(QUERY, TASK).cached is True


def test_verifier_version_invalidates_shared_redis_entries(
    redis_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make(redis_url, namespace).verify_reasoning(QUERY, TASK)
    monkeypatch.setattr(cache_module, "VERIFIER_VERSION", "reasoning-verifier/99.0.0")
    assert make(redis_url, namespace).verify_reasoning(QUERY, TASK).cached is False


def test_redis_ttl_is_enforced_by_the_stored_creation_time(
    redis_url: str, client: redis.Redis, namespace: str
) -> None:
    clock = Clock()
    writer = make(redis_url, namespace, cache_ttl_seconds=600, clock=clock)
    writer.verify_reasoning(QUERY, TASK)
    late = Clock(clock.now + 601)  # Redis still holds the key (its expiry is 600 s away)
    reader = make(redis_url, namespace, cache_ttl_seconds=600, clock=late)
    assert reader.verify_reasoning(QUERY, TASK).cached is False
    assert calls(reader) == 2
    assert reader.cache is not None and reader.cache.expirations == 1
    (redis_key,) = keys_in(client, namespace)
    assert json.loads(client.get(redis_key))["created_at"] == late.now  # type: ignore[arg-type]


def test_redis_ttl_also_expires_keys_for_real(redis_url: str, client: redis.Redis, namespace: str) -> None:
    writer = make(redis_url, namespace, cache_ttl_seconds=0.4)
    writer.verify_reasoning(QUERY, TASK)
    assert len(keys_in(client, namespace)) == 1
    time.sleep(0.6)
    assert keys_in(client, namespace) == []
    assert make(redis_url, namespace, cache_ttl_seconds=0.4).verify_reasoning(QUERY, TASK).cached is False
    time.sleep(0.6)
    assert writer.verify_reasoning(QUERY, TASK).cached is False  # its own LRU entry is stale too


def test_lru_and_redis_layers_both_expire_for_one_instance(redis_url: str, namespace: str) -> None:
    clock = Clock()
    verifier = make(redis_url, namespace, cache_ttl_seconds=60, clock=clock)
    verifier.verify_reasoning(QUERY, TASK)
    clock.now += 30
    assert verifier.verify_reasoning(QUERY, TASK).cached is True
    clock.now += 31
    assert verifier.verify_reasoning(QUERY, TASK).cached is False
    assert verifier.cache is not None and verifier.cache.expirations == 2  # LRU entry and Redis entry
    assert calls(verifier) == 4


def test_redis_hits_are_defensive_copies(redis_url: str, namespace: str) -> None:
    make(redis_url, namespace).verify_reasoning(QUERY, TASK)
    hit = make(redis_url, namespace).verify_reasoning(QUERY, TASK)
    hit.issues.append("tampered")
    hit.reasoning_trace.clear()
    again = make(redis_url, namespace).verify_reasoning(QUERY, TASK)
    assert again.cached and again.issues == [] and len(again.reasoning_trace) == 2


def test_transient_failures_are_not_written_to_redis(
    redis_url: str, client: redis.Redis, namespace: str
) -> None:
    failing = providers()
    failing[0].failures.append(ProviderRateLimitError("429"))
    verifier = make(redis_url, namespace, failing)
    assert not verifier.verify_reasoning(QUERY, TASK).is_valid
    assert keys_in(client, namespace) == []
    assert make(redis_url, namespace).verify_reasoning(QUERY, TASK).cached is False


def test_corrupt_redis_entries_are_discarded(redis_url: str, client: redis.Redis, namespace: str) -> None:
    verifier = make(redis_url, namespace)
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


async def test_async_twin_shares_through_redis_and_survives_an_outage(redis_url: str, namespace: str) -> None:
    await make(redis_url, namespace).averify_reasoning(QUERY, TASK)
    assert (await make(redis_url, namespace).averify_reasoning(QUERY, TASK)).cached is True
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
