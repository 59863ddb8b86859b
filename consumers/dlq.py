"""The dead-letter producer: send refused records and wait until the broker has them."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence

from aiokafka import AIOKafkaProducer

from consumers.processing import Rejection
from ledger.store.records import DeadLetterCoordinates, OperationalInfo

__all__ = ["DeadLetterSender"]

log = logging.getLogger("consumers.dlq")


class DeadLetterSender:
    """Sends :class:`~consumers.processing.Rejection` dead letters to one topic (acks=all)."""

    def __init__(self, bootstrap: str, topic: str, *, client_id: str, max_message_bytes: int) -> None:
        """Configure; the producer connects on :meth:`start`."""
        self.topic = topic
        # No idempotence: the embedded tansu broker refuses aiokafka's InitProducerId. A retried
        # send may duplicate a dead letter; the ledger's rejection key keeps the count exact.
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            client_id=client_id,
            acks="all",
            linger_ms=0,
            max_request_size=max(2 * 1_048_576, 2 * max_message_bytes),
        )

    async def start(self) -> None:
        """Connect."""
        await self._producer.start()

    async def stop(self) -> None:
        """Flush and disconnect."""
        await self._producer.stop()

    async def send(self, rejections: Sequence[Rejection]) -> list[Rejection]:
        """Send every dead letter and wait for every acknowledgement (raises if any failed).

        Returns the rejections with their drafts carrying where the broker stored each copy
        (``operational.dead_letter``), which the ledger records with the rejection.
        """
        if not rejections:
            return []
        futures = []
        for rejection in rejections:
            letter = rejection.dead_letter
            futures.append(
                await self._producer.send(
                    self.topic, value=letter.value, key=letter.key, headers=list(letter.headers)
                )
            )
        stored = await asyncio.gather(*futures)
        placed = [
            with_coordinates(r, self.topic, meta.partition, meta.offset)
            for r, meta in zip(rejections, stored, strict=True)
        ]
        for rejection, meta in zip(rejections, stored, strict=True):
            ctx = rejection.context
            log.warning(
                "record dead-lettered",
                extra={
                    "topic": ctx.topic,
                    "partition": ctx.partition,
                    "offset": ctx.offset,
                    "reason": rejection.error.reason.value,
                    "path": rejection.error.path,
                    "detail": rejection.error.message,
                    "dlq_topic": self.topic,
                    "dlq_partition": meta.partition,
                    "dlq_offset": meta.offset,
                },
            )
        return placed


def with_coordinates(rejection: Rejection, topic: str, partition: int, offset: int) -> Rejection:
    """``rejection`` whose draft records where its dead-letter copy landed (operational, never hashed)."""
    draft = rejection.draft
    operational = dataclasses.replace(
        draft.operational or OperationalInfo(), dead_letter=DeadLetterCoordinates(topic, partition, offset)
    )
    return dataclasses.replace(rejection, draft=dataclasses.replace(draft, operational=operational))
