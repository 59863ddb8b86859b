"""Helpers shared by the fault tests (no tests here).

Builds on the consumer integration helpers (``tests/helpers/consumer.py``) and
the independent chain check (``tests/integration/ledger_factories.py``); adds what the faults
need: the published coordinates of every bundle, a full ledger audit, keyed raw sends, a topic
with a chosen partition count. (The Redis server they kill and restart on the same port is
``devstack.redis_server.EmbeddedRedis`` with a fixed port.)
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import os
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from consumers.publisher import SentRecord, publish_documents
from ledger.connect import libpq_url
from ledger.translog.tree import root_at, tree_size
from tests.helpers.consumer import (
    GROUP_TIMING,
    ConsumerProcess,
    consumer_env,
    make_inputs,
    read_topic,
    read_until,
    run_consumer,
    stored_offsets,
    submission_count,
    wait_until,
)
from tests.helpers.database import chain_problems, query

__all__ = [
    "GROUP_TIMING",
    "ROOT",
    "SAMPLE",
    "ConsumerProcess",
    "assert_ledger_matches",
    "consumer_env",
    "create_topic",
    "dead_letter_sources",
    "make_inputs",
    "new_seed",
    "publish_bundles",
    "read_topic",
    "read_until",
    "run_consumer",
    "sample",
    "send_keyed",
    "stored_offsets",
    "submission_count",
    "tree_problems",
    "wait_until",
]

ROOT = Path(__file__).resolve().parents[2]
SAMPLE: dict[str, Any] = json.loads((ROOT / "tests" / "data" / "cournot_minimal.json").read_text())
SEED_ENV = "LEDGER_FAULT_SEED"


def sample() -> dict[str, Any]:
    """A fresh copy of the minimal valid ``{"prompt_spec", "evidence_bundle"}`` pair."""
    return copy.deepcopy(SAMPLE)


def new_seed() -> int:
    """``LEDGER_FAULT_SEED`` if set (to replay a failure), else a fresh one; always printed."""
    seed = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(2**32))
    print(f"fault seed: {SEED_ENV}={seed}")
    return seed


def publish_bundles(
    bootstrap: str, topic: str, first: int, count: int, *, markets: int = 16
) -> list[SentRecord]:
    """Publish bundles ``first .. first + count - 1`` (validated); return where each one landed."""
    documents = [make_inputs(index, markets=markets) for index in range(first, first + count)]
    return publish_documents(bootstrap, documents, topic=topic)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` with ``partitions`` partitions (the broker's auto-create would give 4)."""

    async def create() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, partitions, 1)])
        finally:
            await admin.close()

    asyncio.run(create())


def send_keyed(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]],
) -> list[tuple[int, int]]:
    """Send ``(key, value, headers)`` unvalidated, in order; return each record's (partition, offset)."""

    async def send() -> list[tuple[int, int]]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=8 * 1_048_576)
        await producer.start()
        try:
            landed = []
            for key, value, headers in records:
                metadata = await producer.send_and_wait(topic, value=value, key=key, headers=headers)
                landed.append((metadata.partition, metadata.offset))
            return landed
        finally:
            await producer.stop()

    return asyncio.run(send())


def assert_ledger_matches(
    url: str,
    group: str,
    topic: str,
    sent: Iterable[SentRecord],
    *,
    context: str,
    poison: Mapping[tuple[int, int], str] | None = None,
) -> None:
    """The ledger holds exactly the sent submissions, once each, where Kafka put them, and is sound.

    Checks: one audited submission per published idempotency key, stored with the partition and
    offset the broker acknowledged; one ``submission.rejected`` per ``poison`` record
    (``{(partition, offset): reason_code}``) and no other; ``global_seq`` is exactly ``1..N``;
    every per-submission hash chain recomputes; no idempotency conflict; the stored offsets are
    the end of every partition (nothing skipped, nothing pending).
    """
    poison = dict(poison or {})
    expected: dict[str, tuple[int, int]] = {}
    for record in sent:
        assert record.record.idempotency_key is not None, "only validated records have a ledger key"
        expected[record.record.idempotency_key] = (record.partition, record.offset)
    rows = query(
        url,
        "SELECT idempotency_key, kafka_partition, kafka_offset, entry_count, step_count "
        "FROM ledger.submissions WHERE status = 'audited'",
    )
    keys: Counter[str] = Counter(str(row[0]) for row in rows)
    twice = sorted(key for key, count in keys.items() if count > 1)
    assert not twice, f"{context}: stored more than once: {twice[:5]}"
    missing = sorted(set(expected) - set(keys))
    assert not missing, (
        f"{context}: {len(missing)} published bundles are not in the ledger, e.g. "
        f"{[(key, expected[key]) for key in missing[:5]]}; stored offsets {stored_offsets(url, group, topic)}"
    )
    unexpected = sorted(set(keys) - set(expected))
    assert not unexpected, f"{context}: unexpected submissions {unexpected[:5]}"
    for key, partition, offset, entry_count, step_count in rows:
        assert (partition, offset) == expected[key], f"{context}: {key} stored at the wrong coordinates"
        assert step_count > 0 and entry_count == step_count + 3, f"{context}: {key} is incomplete"
    rejections = query(url, "SELECT kafka_partition, kafka_offset, reason_code FROM ledger.rejections")
    found = Counter((int(partition), int(offset)) for partition, offset, _ in rejections)
    assert all(count == 1 for count in found.values()), f"{context}: a rejection was stored twice"
    assert {(int(p), int(o)): reason for p, o, reason in rejections} == poison, (
        f"{context}: rejections differ"
    )
    problems = chain_problems(url)  # also: global_seq is gapless
    assert not problems, f"{context}: hash chains broken: {problems[:5]}"
    assert tree_problems(url) == [], f"{context}: {tree_problems(url)}"
    [(conflicts,)] = query(url, "SELECT count(*) FROM ledger.idempotency_conflicts")
    assert conflicts == 0, f"{context}: {conflicts} idempotency conflicts"
    ends: dict[int, int] = {}
    for partition, offset in [*expected.values(), *poison]:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    assert stored_offsets(url, group, topic) == ends, f"{context}: stored offsets are not the partition ends"


def rfc6962_root(leaves: Sequence[bytes]) -> bytes:
    """Merkle Tree Hash of RFC 6962 §2.1 over leaf inputs (written out here, independent of ledger/)."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    split = 1 << ((len(leaves) - 1).bit_length() - 1)  # the largest power of two below n
    return hashlib.sha256(b"\x01" + rfc6962_root(leaves[:split]) + rfc6962_root(leaves[split:])).digest()


def tree_problems(url: str) -> list[str]:
    """The stored transparency-log tree covers every entry and its root is the RFC 6962 root."""
    with psycopg.connect(libpq_url(url)) as conn:
        hashes = [
            row[0] for row in conn.execute("SELECT entry_hash FROM ledger_store.entries ORDER BY global_seq")
        ]
        size = tree_size(conn)
        if size != len(hashes):
            return [f"the tree holds {size} leaves for {len(hashes)} entries"]
        if hashes and root_at(conn, size) != rfc6962_root([bytes.fromhex(h[2:]) for h in hashes]):
            return [f"the stored tree's root at size {size} is not the RFC 6962 root of the entries"]
    return []


def dead_letter_sources(letters: Iterable[Any]) -> Counter[tuple[int, int]]:
    """How many dead letters each source (partition, offset) has."""
    sources: Counter[tuple[int, int]] = Counter()
    for letter in letters:
        headers = {name: value.decode() for name, value in letter.headers}
        sources[(int(headers["ledger.dlq.source.partition"]), int(headers["ledger.dlq.source.offset"]))] += 1
    return sources
