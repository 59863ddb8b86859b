"""Result cache: a true in-process LRU with an optional Redis second layer.

* **Key** (:func:`build_cache_key`): the full SHA-256 hex digest of the canonical JSON of a list
  ``[domain tag, key schema, verifier version, engine version, query, expression, reasoning,
  providers, cross-validation flag]``, where ``providers`` lists every configured provider in
  configured order with its vendor, model, endpoint, availability and decoding policy. A JSON
  list is unambiguous (no separator can be forged) and the digest is never truncated.
* **TTL**: every entry carries its creation time (from the injectable ``clock``) and is checked on
  every lookup in both layers; an entry older than the TTL (or dated in the future) is evicted
  and never returned. Redis entries also get a real expiry (``PX``).
* **Isolation**: every cache draws its own random namespace (128 bits) at construction and prefixes
  its Redis keys with it; the namespace cannot be chosen, so two caches (two verifiers, even with
  identical configuration, in one process or many) never read or write each other's entries.
  Redis only extends one instance's LRU (capacity, ``clear()``), it never shares results.
* **Immutability**: entries hold canonical JSON text, so every hit builds a fresh result object.
* **Degradation**: any Redis failure is logged, counted in :attr:`ResultCache.redis_errors` and
  puts Redis on a short cool-down; the LRU keeps working and no exception escapes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.canonical import canonical_bytes, dumps_canonical
from engine.reasoning.models import VERIFIER_VERSION, ProviderDescriptor, ReasoningResult
from engine.version import ENGINE_VERSION

__all__ = ["CACHE_KEY_SCHEMA", "ResultCache", "build_cache_key"]

log = logging.getLogger(__name__)

CACHE_KEY_SCHEMA = 1
_REDIS_PREFIX = "cournot:reasoning:v1"


def build_cache_key(
    *,
    query: str,
    expression: str,
    reasoning: str | None,
    providers: Sequence[ProviderDescriptor],
    cross_validation: bool,
) -> str:
    """Full SHA-256 (64 hex digits) of the canonical JSON list of every result-affecting input."""
    components: list[Any] = [
        "cournot.reasoning.cache",
        CACHE_KEY_SCHEMA,
        VERIFIER_VERSION,
        ENGINE_VERSION,
        query,
        expression,
        reasoning,
        list(providers),
        bool(cross_validation),
    ]
    return hashlib.sha256(canonical_bytes(components)).hexdigest()


@dataclass(frozen=True)
class _Entry:
    created_at: float
    payload: str


def _connect(url: str, timeout: float) -> Any:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0)
    )


class ResultCache:
    """LRU (+ optional Redis) store of serialised results; see the module docstring."""

    def __init__(
        self,
        *,
        ttl_seconds: float,
        max_size: int,
        clock: Callable[[], float] = time.time,
        redis_url: str | None = None,
        redis_timeout: float = 0.5,
        redis_cooldown: float = 5.0,
    ) -> None:
        if not (isinstance(ttl_seconds, (int, float)) and math.isfinite(ttl_seconds) and ttl_seconds > 0):
            raise ValueError("cache_ttl_seconds must be a positive finite number")
        if not isinstance(max_size, int) or max_size < 1:
            raise ValueError("cache_size must be a positive int")
        self.ttl_seconds = float(ttl_seconds)
        self.max_size = max_size
        self.namespace = secrets.token_hex(16)
        """Private to this instance (see the module docstring): never configurable, never shared."""
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._redis: Any = _connect(redis_url, redis_timeout) if redis_url else None
        self._redis_cooldown = redis_cooldown
        self._redis_retry_at = -math.inf
        self.hits = 0
        self.misses = 0
        self.expirations = 0
        self.evictions = 0
        self.redis_hits = 0
        self.redis_errors = 0
        """Redis operations that failed (each one logged); the LRU served alone meanwhile."""

    @property
    def uses_redis(self) -> bool:
        """True when a Redis layer is configured (it may be degraded)."""
        return self._redis is not None

    def redis_key(self, key: str) -> str:
        """The Redis key for a cache key: prefix, namespace, digest."""
        return f"{_REDIS_PREFIX}:{self.namespace}:{key}"

    def _bump(self, counter: str) -> None:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + 1)

    def _fresh(self, created_at: float, now: float) -> bool:
        age = now - created_at
        return 0.0 <= age <= self.ttl_seconds

    def get(self, key: str) -> ReasoningResult | None:
        """A fresh copy of the stored result (``cached=True``), or None."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and not self._fresh(entry.created_at, now):
                del self._entries[key]
                self.expirations += 1
                entry = None
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is None:
            entry = self._redis_get(key, now)
            if entry is not None:
                self._remember(key, entry)
        if entry is None:
            self._bump("misses")
            return None
        self._bump("hits")
        data = json.loads(entry.payload)
        data["cached"] = True
        return ReasoningResult.model_validate(data)

    def put(self, key: str, result: ReasoningResult) -> None:
        """Store an immutable serialised copy of ``result`` (with ``cached=False``)."""
        data = result.to_dict()
        data["cached"] = False
        entry = _Entry(created_at=self._clock(), payload=dumps_canonical(data))
        self._remember(key, entry)
        self._redis_put(key, entry)

    def _remember(self, key: str, entry: _Entry) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_size:
                self._entries.popitem(last=False)
                self.evictions += 1

    def clear(self) -> None:
        """Drop every in-process entry (Redis entries expire on their own)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        """Whether the LRU holds ``key`` (without TTL check or recency refresh)."""
        with self._lock:
            return key in self._entries

    def stats(self) -> dict[str, int | float | bool | str]:
        """Counters and settings (no URL, so no credentials)."""
        return {
            "size": len(self),
            "max_size": self.max_size,
            "ttl_seconds": self.ttl_seconds,
            "hits": self.hits,
            "misses": self.misses,
            "expirations": self.expirations,
            "evictions": self.evictions,
            "redis": self.uses_redis,
            "redis_hits": self.redis_hits,
            "redis_errors": self.redis_errors,
            "namespace": self.namespace,
        }

    # Redis layer -----------------------------------------------------------------------------

    def _redis_ready(self) -> bool:
        return self._redis is not None and self._clock() >= self._redis_retry_at

    def _redis_failed(self, operation: str, exc: BaseException) -> None:
        self._bump("redis_errors")
        self._redis_retry_at = self._clock() + self._redis_cooldown
        log.warning(
            "reasoning cache: Redis %s failed (%s); serving from the in-process LRU only",
            operation,
            type(exc).__name__,
        )

    def _redis_get(self, key: str, now: float) -> _Entry | None:
        if not self._redis_ready():
            return None
        redis_key = self.redis_key(key)
        try:
            raw = self._redis.get(redis_key)
            if raw is None:
                return None
            entry = self._decode(raw, key)
            if entry is None or not self._fresh(entry.created_at, now):
                self._redis.delete(redis_key)
                self._bump("expirations")
                return None
        except Exception as exc:  # any Redis or socket failure degrades to LRU-only
            self._redis_failed("get", exc)
            return None
        self._bump("redis_hits")
        return entry

    @staticmethod
    def _decode(raw: bytes | str, key: str) -> _Entry | None:
        try:
            record = json.loads(raw)
            created_at = record["created_at"]
            if record["key"] != key or not isinstance(created_at, (int, float)):
                return None
            return _Entry(created_at=float(created_at), payload=dumps_canonical(record["result"]))
        except (ValueError, KeyError, TypeError):
            return None

    def _redis_put(self, key: str, entry: _Entry) -> None:
        if not self._redis_ready():
            return
        record = f'{{"created_at":{entry.created_at!r},"key":"{key}","result":{entry.payload}}}'
        try:
            self._redis.set(
                self.redis_key(key), record.encode("utf-8"), px=max(1, math.ceil(self.ttl_seconds * 1000))
            )
        except Exception as exc:
            self._redis_failed("set", exc)

    def close(self) -> None:
        """Close the Redis connection pool, if any."""
        if self._redis is not None:
            try:
                self._redis.close()
            except Exception as exc:  # closing must never raise
                log.debug("reasoning cache: closing Redis failed (%s)", type(exc).__name__)
