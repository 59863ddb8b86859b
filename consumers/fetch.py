"""Forming one batch from polls: the consumer's batching policy, and the positions it fetches from.

A batch is closed when it holds ``max_records`` records or ``max_batch_bytes`` bytes of values,
or when ``batch_linger_ms`` have passed since its first poll answered: a backlog drains in large
batches (each poll returns a full one at once), light traffic commits after one short linger.
Records keep their per-partition order (later polls only append).

Positions: ``expected`` holds, per owned partition, the next offset after the last batch handed
over. Every seek bumps ``seek_generation`` (before and after); a batch fetched or audited across
a seek is stale: it is dropped and the partitions are sought back to ``expected``, so nothing
fetched is lost and nothing is skipped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from consumers.consumer_config import ConsumerConfig

__all__ = ["BatchFetcher", "value_bytes"]

Fetched = dict[TopicPartition, list[Any]]


def value_bytes(fetched: Fetched) -> int:
    """Bytes of record values in ``fetched``."""
    return sum(len(record.value or b"") for records in fetched.values() for record in records)


class BatchFetcher:
    """Polls ``consumer`` into batches under ``config``'s size and linger bounds."""

    def __init__(
        self, consumer: AIOKafkaConsumer, config: ConsumerConfig, expected: dict[TopicPartition, int]
    ):
        """``expected`` is shared with the consumer, which advances it as batches are handed over."""
        self.consumer = consumer
        self.config = config
        self.expected = expected
        self.seek_generation = 0  # bumped around every seek
        self.batch_generation = 0  # the seek generation the current batch was fetched in

    @property
    def stale(self) -> bool:
        """True once a seek happened after the current batch's first poll."""
        return self.seek_generation != self.batch_generation

    async def fetch(self, stopping: Callable[[], bool]) -> Fetched:
        """One batch: a poll, then more polls for up to ``batch_linger_ms`` while it is not full.

        ``max_batch_bytes`` is a soft bound: a poll's records are kept whole. Small batches cost a
        transaction each, so lingering a few milliseconds raises throughput.
        """
        consumer, cfg = self.consumer, self.config
        generation = self.batch_generation = self.seek_generation
        fetched: Fetched = await consumer.getmany(timeout_ms=cfg.poll_timeout_ms, max_records=cfg.max_records)
        if self.seek_generation != generation:
            return self.refetch()  # a seek happened while polling: records may come from the old position
        count = sum(len(records) for records in fetched.values())
        size = value_bytes(fetched)
        if count == 0 or count >= cfg.max_records or size >= cfg.max_batch_bytes or cfg.batch_linger_ms <= 0:
            return fetched
        merged = {tp: list(records) for tp, records in fetched.items()}
        deadline = time.monotonic() + cfg.batch_linger_ms / 1000
        while count < cfg.max_records and size < cfg.max_batch_bytes and not stopping():
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                break
            more = await consumer.getmany(timeout_ms=remaining_ms, max_records=cfg.max_records - count)
            if self.seek_generation != generation:
                return self.refetch()  # re-sought while lingering: drop the whole batch
            for tp, records in more.items():
                merged.setdefault(tp, []).extend(records)
                count += len(records)
            size += value_bytes(more)
        return merged

    def refetch(self) -> Fetched:
        """Drop what was fetched and seek back to the expected offsets, so nothing fetched is lost."""
        for tp in self.consumer.assignment():
            if tp in self.expected:
                self.consumer.seek(tp, self.expected[tp])
        return {}

    def positioned(self, batch: Fetched) -> Fetched:
        """Only records at or after this member's position of partitions it has sought.

        aiokafka may start fetching from Kafka's (advisory) position before the assignment
        callback has sought to the Postgres offsets; such records are dropped and fetched again.
        """
        positioned = {}
        for tp, records in batch.items():
            expected = self.expected.get(tp)
            if expected is not None:
                kept = [record for record in records if record.offset >= expected]
                if kept:
                    positioned[tp] = kept
        return positioned
