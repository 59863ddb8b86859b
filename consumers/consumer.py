"""``ledger consume``: a consumer-group member that audits records into the ledger, batch by batch.

One batch = one ``getmany``. Per batch, in this order:

1. decode, validate and audit every record (in a worker thread, so heartbeats keep flowing);
2. send the dead-letter copies of refused records and wait until the broker acknowledged them;
3. ONE Postgres transaction: every submission (audited and ``submission.rejected``) plus the
   forward-only partition offsets (``OffsetAdvance(from_offset=stored, next_offset=last + 1)``).

A crash between 2 and 3 re-delivers the batch: the dead-letter topic may get a duplicate, the
ledger never does (idempotency keys, also for rejections). If Postgres is unavailable the same
batch is retried with backoff and nothing advances. If another member advanced an offset first
(``StaleOffsetError``: this member is a zombie after a rebalance), the whole batch was rolled
back and the partitions are re-sought from Postgres. On assignment every partition seeks to the
offset stored in Postgres; Kafka's own commits are advisory (lag dashboards only).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError

from consumers.dlq import DeadLetterSender
from consumers.envelope import EnvelopeError, Reason
from consumers.metrics import ConsumerMetrics
from consumers.processing import Auditor, Outcome, Rejection, build_rejection, process_batch
from consumers.retry import BatchAbandoned, retry_until_stopped
from ledger.errors import (
    AppendOnlyViolationError,
    LedgerError,
    LedgerPermissionError,
    SchemaNotReadyError,
    StaleOffsetError,
)
from ledger.records import AppendResult, OffsetAdvance, SubmissionDraft

__all__ = ["ConsumerConfig", "LedgerConsumer", "LedgerPort"]

log = logging.getLogger("consumers.consumer")

T = TypeVar("T")
# Errors that mean "misconfigured", not "this record is bad": stop instead of dead-lettering.
_FATAL = (SchemaNotReadyError, LedgerPermissionError, AppendOnlyViolationError)


class LedgerPort(Protocol):
    """The part of :class:`ledger.store.LedgerStore` the consumer uses."""

    def append_batch(
        self, submissions: Sequence[SubmissionDraft], offsets: Sequence[OffsetAdvance] = ()
    ) -> list[AppendResult]: ...

    def load_offsets(self, group: str, topic: str) -> dict[int, int]: ...


@dataclass
class ConsumerConfig:
    """Everything ``ledger consume`` can tune."""

    bootstrap: str
    topic: str
    dlq_topic: str
    group_id: str
    host: str
    max_records: int = 500
    poll_timeout_ms: int = 500
    fetch_max_wait_ms: int = 100
    max_message_bytes: int = 1_048_576
    raw_inline_limit: int = 65_536
    until_idle: float | None = None
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    group_instance_id: str | None = None
    client_id: str = "ledger-consumer"
    retry_initial: float = 0.2
    retry_max: float = 10.0
    kafka_commit_interval: float = 2.0


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, owner: LedgerConsumer) -> None:
        self.owner = owner

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self.owner.partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        await self.owner.partitions_assigned(assigned)


class LedgerConsumer:
    """Consumes ``config.topic`` into ``store``; :meth:`run` returns when stopped or idle."""

    def __init__(
        self,
        config: ConsumerConfig,
        store: LedgerPort,
        auditor: Auditor,
        metrics: ConsumerMetrics | None = None,
    ) -> None:
        """Wire the parts; nothing connects before :meth:`run`."""
        self.config = config
        self.store = store
        self.auditor = auditor
        self.metrics = metrics or ConsumerMetrics()
        self.stored: dict[TopicPartition, int] = {}  # next offset committed in Postgres, per owned partition
        self._stop = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._last_activity: float | None = None
        self._last_kafka_commit = 0.0
        self._consumer: AIOKafkaConsumer | None = None
        self._dlq: DeadLetterSender | None = None

    def request_stop(self) -> None:
        """Finish (or cleanly abandon) the current batch, leave the group and return from run()."""
        if not self._stop.is_set():
            log.info("stop requested")
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """True once a stop was requested."""
        return self._stop.is_set()

    async def run(self) -> None:
        """Join the group and process batches until stopped or idle for ``until_idle`` seconds."""
        cfg = self.config
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=cfg.bootstrap,
            group_id=cfg.group_id,
            client_id=cfg.client_id,
            group_instance_id=cfg.group_instance_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=cfg.session_timeout_ms,
            heartbeat_interval_ms=cfg.heartbeat_interval_ms,
            max_poll_interval_ms=cfg.max_poll_interval_ms,
            max_partition_fetch_bytes=max(1_048_576, cfg.max_message_bytes + 65_536),
            fetch_max_bytes=max(52_428_800, 4 * cfg.max_message_bytes),
            metadata_max_age_ms=30_000,
            fetch_max_wait_ms=cfg.fetch_max_wait_ms,
        )
        self._dlq = DeadLetterSender(
            cfg.bootstrap,
            cfg.dlq_topic,
            client_id=f"{cfg.client_id}-dlq",
            max_message_bytes=cfg.max_message_bytes,
        )
        try:
            await self._dlq.start()
            await self._consumer.start()
            self._consumer.subscribe([cfg.topic], listener=_Rebalance(self))
            log.info(
                "consuming", extra={"topic": cfg.topic, "group": cfg.group_id, "bootstrap": cfg.bootstrap}
            )
            await self._loop()
        finally:
            with contextlib.suppress(Exception):
                await self._commit_kafka(force=True)
            await self._consumer.stop()  # leaves the group: the partitions move on at once
            await self._dlq.stop()
        log.info("stopped", extra={"topic": cfg.topic, "group": cfg.group_id})

    async def _loop(self) -> None:
        assert self._consumer is not None
        while not self.stopping:
            fetched = await self._consumer.getmany(
                timeout_ms=self.config.poll_timeout_ms, max_records=self.config.max_records
            )
            batch = self._positioned(fetched)
            if batch:
                self._idle.clear()
                try:
                    await self._handle_batch(batch)
                except BatchAbandoned:
                    log.warning("batch abandoned at shutdown; it will be re-delivered")
                    return
                finally:
                    self._idle.set()
                self._last_activity = time.monotonic()
            self._update_lag()
            await self._commit_kafka()
            if await self._idle_expired():
                log.info("idle, exiting", extra={"until_idle": self.config.until_idle})
                return

    def _positioned(self, batch: dict[TopicPartition, list[Any]]) -> dict[TopicPartition, list[Any]]:
        """Only records at or after the Postgres position of partitions this member has sought.

        aiokafka may start fetching from Kafka's (advisory) position before the assignment
        callback has sought to the Postgres offsets; such records are dropped and fetched again.
        """
        positioned = {}
        for tp, records in batch.items():
            stored = self.stored.get(tp)
            if stored is not None:
                kept = [record for record in records if record.offset >= stored]
                if kept:
                    positioned[tp] = kept
        return positioned

    async def _idle_expired(self) -> bool:
        """``until_idle`` seconds without records, and every owned partition caught up.

        Caught up: the fetch position has reached the high watermark (the position, not the
        stored offset, so transaction markers at the end of a partition do not keep it busy). A
        partition whose high watermark is still unknown (no fetch answered yet) counts as caught
        up only after five idle periods, so a slow first fetch cannot end a batch job early.
        """
        consumer = self._consumer
        if self.config.until_idle is None or self._last_activity is None or consumer is None:
            return False
        idle_for = time.monotonic() - self._last_activity
        if idle_for < self.config.until_idle:
            return False
        for tp in consumer.assignment():
            highwater = consumer.highwater(tp)
            if highwater is None:
                if idle_for < 5 * self.config.until_idle:
                    return False
                continue
            try:
                position = await asyncio.wait_for(consumer.position(tp), timeout=1)
            except (TimeoutError, KafkaError):
                return False
            if highwater > position:
                return False
        return True

    async def _retrying(self, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        def on_retry(exc: BaseException) -> None:
            if what == "ledger append":
                self.metrics.db_retries.inc()

        return await retry_until_stopped(
            what,
            attempt,
            self._stop,
            initial=self.config.retry_initial,
            maximum=self.config.retry_max,
            on_retry=on_retry,
        )

    # --- one batch -----------------------------------------------------------------------

    async def _handle_batch(self, batch: dict[TopicPartition, list[Any]]) -> None:
        cfg = self.config
        started = time.monotonic()
        records = [record for tp in sorted(batch, key=lambda tp: tp.partition) for record in batch[tp]]
        self.metrics.consumed.labels(cfg.topic).inc(len(records))
        outcomes = await asyncio.to_thread(
            process_batch,
            records,
            self.auditor,
            group=cfg.group_id,
            host=cfg.host,
            dlq_topic=cfg.dlq_topic,
            max_bytes=cfg.max_message_bytes,
            inline_limit=cfg.raw_inline_limit,
        )
        rejections = [outcome for outcome in outcomes if isinstance(outcome, Rejection)]
        await self._send_dead_letters(rejections)
        offsets = [
            OffsetAdvance(
                cfg.group_id, tp.topic, tp.partition, self.stored.get(tp, 0), tp_records[-1].offset + 1
            )
            for tp, tp_records in batch.items()
        ]
        try:
            results = await self._append(_unique_drafts(outcomes), offsets)
        except StaleOffsetError as exc:
            self._fenced(exc)
            await self._reseek(list(batch))
            return
        except _FATAL:
            raise
        except LedgerError as exc:  # one draft the database refuses must not block the partition
            log.error(
                "ledger refused the batch; committing record by record",
                extra={"code": exc.code, "error": exc.message, "records": len(records)},
            )
            await self._commit_one_by_one(outcomes)
            return
        self._advanced(offsets)
        self.metrics.record_outcomes(cfg.topic, outcomes, results)
        elapsed = time.monotonic() - started
        self.metrics.batches.inc()
        self.metrics.batch_seconds.observe(elapsed)
        self.metrics.batch_records.observe(len(records))
        created = sum(result.status == "created" for result in results)
        conflicts = sum(result.status == "conflict" for result in results)
        log.info(
            "batch committed",
            extra={
                "records": len(records),
                "new": created,
                "existing": len(outcomes) - created - conflicts,
                "conflicts": conflicts,
                "rejected": len(rejections),
                "next_offsets": {tp.partition: self.stored[tp] for tp in batch},
                "seconds": round(elapsed, 4),
            },
        )

    async def _send_dead_letters(self, rejections: Sequence[Rejection]) -> None:
        dlq = self._dlq
        assert dlq is not None
        if rejections:
            await self._retrying("dead-letter send", lambda: dlq.send(rejections))

    async def _append(
        self, drafts: Sequence[SubmissionDraft], offsets: Sequence[OffsetAdvance]
    ) -> list[AppendResult]:
        return await self._retrying(
            "ledger append", lambda: asyncio.to_thread(self.store.append_batch, drafts, offsets)
        )

    def _advanced(self, offsets: Sequence[OffsetAdvance]) -> None:
        for advance in offsets:
            self.stored[TopicPartition(advance.topic, advance.partition)] = advance.next_offset

    def _fenced(self, exc: StaleOffsetError) -> None:
        self.metrics.stale_batches.inc()
        log.warning(
            "offsets advanced by another member; batch rolled back, re-seeking from Postgres",
            extra={"partition": exc.partition, "from_offset": exc.from_offset},
        )

    async def _commit_one_by_one(self, outcomes: Sequence[Outcome]) -> None:
        """Commit each record in its own transaction; one the database refuses is dead-lettered."""
        cfg = self.config
        for outcome in outcomes:
            ctx = outcome.context
            tp = TopicPartition(ctx.topic, ctx.partition)
            stored = self.stored.get(tp, 0)
            if ctx.offset < stored:
                continue
            advance = OffsetAdvance(cfg.group_id, ctx.topic, ctx.partition, stored, ctx.offset + 1)
            try:
                try:
                    results = await self._append([outcome.draft], [advance])
                except (StaleOffsetError, *_FATAL):
                    raise
                except LedgerError as exc:
                    refused = EnvelopeError(Reason.LEDGER_REFUSED, f"{exc.code}: {exc.message}")
                    outcome = build_rejection(
                        refused,
                        ctx,
                        dlq_topic=cfg.dlq_topic,
                        inline_limit=cfg.raw_inline_limit,
                        dlq_value_limit=cfg.max_message_bytes,
                    )
                    await self._send_dead_letters([outcome])
                    results = await self._append([outcome.draft], [advance])
            except StaleOffsetError as exc:
                self._fenced(exc)
                await self._reseek([tp])
                return
            self._advanced([advance])
            self.metrics.record_outcomes(cfg.topic, [outcome], results)

    # --- partitions ----------------------------------------------------------------------

    async def partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        """Seek every newly assigned partition to the offset stored in Postgres."""
        try:
            await self._reseek(assigned)
        except BatchAbandoned:
            return  # stopping while Postgres is unreachable: run() is about to return
        self.metrics.assigned.set(len(self._consumer.assignment()) if self._consumer else len(assigned))
        self._last_activity = time.monotonic()
        log.info("partitions assigned", extra={"partitions": sorted(tp.partition for tp in assigned)})

    async def partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        """Let the batch in flight finish (bounded) before the partitions move to another member."""
        if not revoked:
            return
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=max(1.0, self.config.session_timeout_ms / 1000))
        except TimeoutError:
            log.warning("batch still in flight at revocation; its commit will be fenced if it is stale")
        for tp in revoked:
            self.stored.pop(tp, None)
            self.metrics.forget_partition(tp.topic, tp.partition)
        log.info("partitions revoked", extra={"partitions": sorted(tp.partition for tp in revoked)})

    async def _reseek(self, partitions: Sequence[TopicPartition]) -> None:
        consumer = self._consumer
        assert consumer is not None
        if not partitions:
            return
        group, topic = self.config.group_id, self.config.topic
        stored = await self._retrying(
            "offset load", lambda: asyncio.to_thread(self.store.load_offsets, group, topic)
        )
        owned = consumer.assignment()
        for tp in partitions:
            if tp in owned:
                self.stored[tp] = stored.get(tp.partition, 0)
                consumer.seek(tp, self.stored[tp])

    def _update_lag(self) -> None:
        assert self._consumer is not None
        for tp in self._consumer.assignment():
            highwater = self._consumer.highwater(tp)
            if highwater is not None and tp in self.stored:
                self.metrics.lag.labels(tp.topic, str(tp.partition)).set(max(0, highwater - self.stored[tp]))

    async def _commit_kafka(self, *, force: bool = False) -> None:
        """Advisory: mirror the Postgres offsets into Kafka so standard lag tools see them."""
        if self._consumer is None or not self.stored:
            return
        now = time.monotonic()
        if not force and now - self._last_kafka_commit < self.config.kafka_commit_interval:
            return
        self._last_kafka_commit = now
        owned = self._consumer.assignment()
        offsets = {tp: offset for tp, offset in self.stored.items() if tp in owned}
        if not offsets:
            return
        try:
            await asyncio.wait_for(self._consumer.commit(offsets), timeout=5)
        except (TimeoutError, KafkaError) as exc:
            log.debug("advisory Kafka commit failed", extra={"error": str(exc)})


def _unique_drafts(outcomes: Sequence[Outcome]) -> list[SubmissionDraft]:
    """One draft per idempotency key: a bundle sent twice in one batch is written once."""
    seen: set[str] = set()
    drafts = []
    for outcome in outcomes:
        if outcome.draft.idempotency_key not in seen:
            seen.add(outcome.draft.idempotency_key)
            drafts.append(outcome.draft)
    return drafts
