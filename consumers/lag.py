"""Per-partition lag from the offsets stored in Postgres and the broker's high watermarks."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.client import AIOKafkaClient

from consumers.source_log import SourceIdentity, observe_source

__all__ = ["PartitionLag", "broker_source_identity", "partition_lag"]


@dataclass(frozen=True)
class PartitionLag:
    """``lag = highwater - next_offset`` (records not yet committed to the ledger)."""

    partition: int
    next_offset: int
    highwater: int

    @property
    def lag(self) -> int:
        """Records behind; never negative."""
        return max(0, self.highwater - self.next_offset)


async def partition_lag(
    bootstrap: str, topic: str, stored: Mapping[int, int], *, timeout: float = 10.0
) -> list[PartitionLag]:
    """Lag of every partition of ``topic``; an unknown topic has no partitions.

    The high watermark is read from a fetch response, not only from ``end_offsets``: the embedded
    tansu broker's ListOffsets answers the last batch's base offset + 1 (reference §1d).
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        request_timeout_ms=int(timeout * 1000),
        max_partition_fetch_bytes=1024,
    )
    try:  # stopped even when start fails (no "Unclosed AIOKafkaConsumer" at exit)
        await asyncio.wait_for(consumer.start(), timeout)
        if topic not in await asyncio.wait_for(consumer.topics(), timeout):
            return []
        numbers = sorted(consumer.partitions_for_topic(topic) or ())
        if not numbers:
            return []
        tps = [TopicPartition(topic, number) for number in numbers]
        consumer.assign(tps)
        ends = await asyncio.wait_for(consumer.end_offsets(tps), timeout)
        for tp in tps:
            consumer.seek(tp, max(0, ends[tp] - 1))
        deadline = asyncio.get_running_loop().time() + timeout
        while any(consumer.highwater(tp) is None for tp in tps if ends[tp] > 0):
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            await consumer.getmany(timeout_ms=int(min(remaining, 0.5) * 1000), max_records=len(tps))
        result = []
        for tp in tps:
            highwater = consumer.highwater(tp)
            highwater = ends[tp] if highwater is None else max(highwater, ends[tp])
            result.append(PartitionLag(tp.partition, stored.get(tp.partition, 0), highwater))
        return result
    finally:
        await consumer.stop()


async def broker_source_identity(bootstrap: str, topic: str, *, timeout: float = 10.0) -> SourceIdentity:
    """The cluster id and topic id of ``topic`` on the broker (raises when it has none to give)."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000))
    try:
        await asyncio.wait_for(client.bootstrap(), timeout)
        return await asyncio.wait_for(observe_source(client, topic), timeout)
    finally:
        await client.close()
