"""Redis killed under a ReasoningVerifier: the LRU serves, failures are counted and logged, Redis returns.

``tests/integration/test_reasoning_redis.py`` covers a Redis that is down from the start (a closed
port). Here a real server (our own: the session's may be the machine's shared Redis) is
SIGKILLed while verifications run, also from several threads, and restarted on the same port: no
exception escapes, LRU entries keep serving, every Redis failure is counted in ``redis_errors`` and
logged, a down Redis is left alone during its cool-down, and after the cool-down the Redis layer
is written and read again.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from devstack.redis_server import EmbeddedRedis
from devstack.server import free_loopback_port
from engine.reasoning import ReasoningResult, ReasoningTask, ReasoningVerifier
from tests.stubs.providers import ScriptedProvider

pytestmark = pytest.mark.integration

QUERY = "Alice has 10 apples and Bob has 5. How many apples do they have together?"
COOLDOWN = 5.0  # ResultCache's default redis_cooldown


class Clock:
    """A settable clock (the cache dates entries and times the Redis cool-down with it)."""

    def __init__(self) -> None:
        self.now = time.time()
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


def task(index: int) -> ReasoningTask:
    """Distinct tasks (distinct cache keys) that all verify: ``10 + 5`` written ``index`` ways."""
    return ReasoningTask(expression="10 + 5" + " + 0" * index)


def providers() -> list[ScriptedProvider]:
    return [
        ScriptedProvider("anthropic", "claude-x", "https://a.example"),
        ScriptedProvider("openai", "gpt-x", "https://o.example"),
    ]


def provider_calls(verifier: ReasoningVerifier) -> int:
    return sum(
        len(provider.requests) for provider in verifier.providers if isinstance(provider, ScriptedProvider)
    )


@pytest.fixture
def server() -> Iterator[EmbeddedRedis]:
    redis_server = EmbeddedRedis(free_loopback_port())
    try:
        redis_server.start()
        yield redis_server
    finally:
        redis_server.stop()


def stored_keys(server: EmbeddedRedis, namespace: str) -> set[bytes]:
    client = redis.Redis.from_url(server.url, socket_connect_timeout=1)
    try:
        return set(client.scan_iter(match=f"cournot:reasoning:v1:{namespace}:*"))
    finally:
        client.close()


def test_redis_killed_and_restarted_degrades_to_the_lru_and_recovers_after_the_cooldown(
    server: EmbeddedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="engine.reasoning.cache")
    clock = Clock()
    main = ReasoningVerifier(providers(), redis_url=server.url, clock=clock, redis_timeout=0.5)
    assert main.cache is not None
    namespace = main.cache.namespace
    # Redis up: results go to Redis and, once the LRU is dropped, are read back from there
    warm = [main.verify_reasoning(QUERY, task(i)) for i in range(3)]
    assert all(result.is_valid and not result.cached for result in warm)
    assert len(stored_keys(server, namespace)) == 3
    main.clear_cache()
    calls = provider_calls(main)
    assert all(main.verify_reasoning(QUERY, task(i)).cached for i in range(3))
    assert provider_calls(main) == calls and main.cache.redis_hits == 3
    assert main.redis_errors == 0

    server.kill()
    calls = provider_calls(main)
    # the LRU still serves what it holds, without asking a provider
    assert all(main.verify_reasoning(QUERY, task(i)).cached for i in range(3))
    assert provider_calls(main) == calls
    # a miss goes to Redis, fails, is counted and logged, and is answered by the providers
    fresh = main.verify_reasoning(QUERY, task(3))
    assert fresh.is_valid and not fresh.cached
    assert main.redis_errors == 1
    assert "Redis get failed" in caplog.text
    # ... and then served from the LRU; during the cool-down Redis is not tried again
    again = main.verify_reasoning(QUERY, task(3))
    assert again.cached and again.result_hash() == fresh.result_hash()
    main.verify_reasoning(QUERY, task(4))
    assert main.redis_errors == 1

    server.start()  # same port, empty
    clock.advance(COOLDOWN / 2)
    main.verify_reasoning(QUERY, task(5))
    assert stored_keys(server, namespace) == set(), "Redis was used again inside its cool-down"
    clock.advance(COOLDOWN)
    recovered = main.verify_reasoning(QUERY, task(6))
    assert recovered.is_valid and not recovered.cached
    assert main.redis_errors == 1, "the restarted Redis still failed"
    assert stored_keys(server, namespace) == {main.cache.redis_key(main.cache_key(QUERY, task(6))).encode()}
    main.clear_cache()
    calls = provider_calls(main)
    assert main.verify_reasoning(QUERY, task(6)).cached and provider_calls(main) == calls
    main.close()


def test_redis_killed_during_concurrent_verifications_never_raises(
    server: EmbeddedRedis, caplog: pytest.LogCaptureFixture, seed: int
) -> None:
    caplog.set_level(logging.WARNING, logger="engine.reasoning.cache")
    rng = random.Random(seed)
    clock = Clock()
    verifier = ReasoningVerifier(  # an LRU smaller than the working set: Redis is read all along
        providers(),
        redis_url=server.url,
        clock=clock,
        redis_timeout=0.5,
        cache_size=4,
    )
    assert verifier.cache is not None
    tasks = [task(i) for i in range(12)]
    expected = {i: verifier.verify_reasoning(QUERY, tasks[i]).result_hash() for i in range(len(tasks))}
    stop = threading.Event()
    killed = threading.Event()
    seen: list[tuple[int, ReasoningResult]] = []
    after_kill: dict[int, int] = {}
    lock = threading.Lock()

    def worker(worker_seed: int) -> int:
        local = random.Random(worker_seed)
        done = 0
        while not stop.is_set():
            index = local.randrange(len(tasks))
            result = verifier.verify_reasoning(QUERY, tasks[index])  # must never raise
            with lock:
                seen.append((index, result))
                if killed.is_set():
                    after_kill[worker_seed] = after_kill.get(worker_seed, 0) + 1
            done += 1
        return done

    with ThreadPoolExecutor(max_workers=4) as pool:
        seeds = [rng.randrange(2**32) for _ in range(4)]
        futures = [pool.submit(worker, worker_seed) for worker_seed in seeds]
        time.sleep(rng.uniform(0.1, 0.6))
        server.kill()
        killed.set()
        deadline = time.monotonic() + 30  # a loaded machine may starve a thread for a while
        while time.monotonic() < deadline:
            with lock:
                every_worker_ran = all(after_kill.get(worker_seed, 0) >= 2 for worker_seed in seeds)
            if every_worker_ran and verifier.redis_errors >= 1:
                break
            time.sleep(0.05)
        stop.set()
        counts = [future.result(timeout=30) for future in futures]  # re-raises a worker's exception
    assert all(counts), f"seed {seed}: a worker made no progress"
    assert all(after_kill.get(worker_seed, 0) >= 2 for worker_seed in seeds), f"seed {seed}: {after_kill}"
    assert all(result.is_valid for _, result in seen), f"seed {seed}"
    assert all(result.result_hash() == expected[index] for index, result in seen), f"seed {seed}"
    assert verifier.redis_errors >= 1, f"seed {seed}: the outage was not noticed"
    assert "serving from the in-process LRU only" in caplog.text
    verifier.close()
