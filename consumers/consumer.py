"""``ledger consume``: a consumer-group member that audits records into the ledger, batch by batch.

A batch is what :class:`consumers.fetch.BatchFetcher` polls (its size and linger bounds are the
batching policy). Per batch, in this order:

1. decode, validate and audit every record (in a worker thread, so heartbeats keep flowing);
2. send the dead-letter copies of refused records and wait until the broker acknowledged them;
3. ONE Postgres transaction: every submission (audited and ``submission.rejected``) plus the
   forward-only partition offsets (``OffsetAdvance(from_offset, next_offset=last + 1)``).

Steps 2–3 of batch *k* run while step 1 audits the batches after it: up to ``max_in_flight``
audited batches are committed or wait their turn (commits stay strictly in order, each after the
one before), so the process keeps auditing during a commit round trip, and a slow database still
slows polling down instead of piling up work. With ``max_commit_records`` set, a batch audited while
the previous one still waits its turn joins it (group commit): under load the commit stage writes
fewer, larger transactions and the audit stage does not wait for room.

A crash between 2 and 3 re-delivers the batch: the dead-letter topic may get a duplicate, the
ledger never does (idempotency keys, also for rejections). If Postgres is unavailable the same
batch is retried with backoff and nothing advances. If another member advanced an offset first
(``StaleOffsetError``: this member is a zombie after a rebalance), the whole batch was rolled
back; the audited batch behind it is dropped and every partition re-seeks from Postgres. On
assignment every partition seeks to the offset stored in Postgres; Kafka's own commits are
advisory (lag dashboards only).

Offsets belong to one incarnation of the source log (cluster id + topic id, docs/event-store.md
§4), checked on assignment, with every batch and when a log end falls below a stored offset: a new
log is recorded and consumed from its start; an undecidable one stops the member (never a skip).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaError

from consumers.batch import BatchWriter, CommitChain, LedgerPort, PreparedBatch, process_cpu
from consumers.consumer_config import ConsumerConfig
from consumers.dlq import DeadLetterSender
from consumers.fetch import BatchFetcher
from consumers.metrics import ConsumerMetrics
from consumers.processing import Auditor, process_batch
from consumers.retry import BatchAbandoned, retry_until_stopped
from consumers.source_log import SourceIdentity, SourceTracker, ends_below
from ledger.collection import tuned_gc
from ledger.store.records import OffsetAdvance

__all__ = ["ConsumerConfig", "LedgerConsumer", "LedgerPort"]

log = logging.getLogger("consumers.consumer")

T = TypeVar("T")


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
        self.expected: dict[TopicPartition, int] = {}  # next offset after the last batch handed to the writer
        self._fatal: Exception | None = None  # raised in a rebalance callback, re-raised by the loop
        self._source: SourceTracker | None = None  # the incarnation the stored offsets belong to
        self._stop = asyncio.Event()
        self._not_auditing = asyncio.Event()
        self._not_auditing.set()
        self._commits: CommitChain | None = None  # commits of audited batches, in order
        self._last_activity: float | None = None
        self._last_kafka_commit = 0.0
        self._consumer: AIOKafkaConsumer | None = None
        self._fetcher: BatchFetcher | None = None  # forms batches; tracks seeks (consumers/fetch.py)
        self._writer: BatchWriter | None = None

    def request_stop(self) -> None:
        """Finish (or cleanly abandon) the current batch, leave the group and return from run()."""
        if not self._stop.is_set():
            log.info("stop requested")
        self._stop.set()

    @property
    def incarnation(self) -> int | None:
        """The source-log incarnation this member consumes (None before its first assignment)."""
        return self._source.incarnation if self._source is not None else None

    @property
    def stopping(self) -> bool:
        """True once a stop was requested."""
        return self._stop.is_set()

    async def run(self) -> None:
        """Join the group and process batches until stopped or idle for ``until_idle`` seconds.

        The collector is tuned for batches while it runs (:mod:`ledger.collection`).
        """
        with tuned_gc(self.config.tune_gc):
            await self._run()

    async def _run(self) -> None:
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
            fetch_max_wait_ms=cfg.fetch_max_wait_ms,
            metadata_max_age_ms=30_000,
        )
        self._fetcher = BatchFetcher(self._consumer, cfg, self.expected)
        dlq = DeadLetterSender(
            cfg.bootstrap,
            cfg.dlq_topic,
            client_id=f"{cfg.client_id}-dlq",
            max_message_bytes=cfg.max_message_bytes,
        )
        self._writer = BatchWriter(
            store=self.store,
            dlq=dlq,
            metrics=self.metrics,
            retrying=self._retrying,
            stored=self.stored,
            topic=cfg.topic,
            group=cfg.group_id,
            raw_inline_limit=cfg.raw_inline_limit,
            max_message_bytes=cfg.max_message_bytes,
        )
        self._commits = CommitChain(self._writer, cfg.max_in_flight, cfg.max_commit_records)
        source_client = AIOKafkaClient(
            bootstrap_servers=cfg.bootstrap, client_id=f"{cfg.client_id}-source", request_timeout_ms=10_000
        )
        self._source = SourceTracker(
            client=source_client,
            store=self.store,
            metrics=self.metrics,
            retrying=self._retrying,
            group=cfg.group_id,
            topic=cfg.topic,
            host=cfg.host,
        )
        try:
            await source_client.bootstrap()
            await dlq.start()
            await self._consumer.start()
            self._consumer.subscribe([cfg.topic], listener=_Rebalance(self))
            log.info(
                "consuming", extra={"topic": cfg.topic, "group": cfg.group_id, "bootstrap": cfg.bootstrap}
            )
            await self._loop()
        finally:
            unfinished = self._commits.unfinished()  # an unexpected error left some
            if unfinished:
                await asyncio.wait(unfinished, timeout=30)  # a commit is atomic: let it finish
            with contextlib.suppress(Exception):
                await self._commit_kafka(force=True)
            await self._consumer.stop()  # leaves the group: the partitions move on at once
            await dlq.stop()
            await source_client.close()
        log.info("stopped", extra={"topic": cfg.topic, "group": cfg.group_id})

    async def _loop(self) -> None:
        fetcher = self._fetcher
        assert fetcher is not None
        try:
            while not self.stopping:
                batch = fetcher.positioned(await fetcher.fetch(lambda: self.stopping))
                if batch:
                    await self._audit_and_hand_over(batch)
                    self._last_activity = time.monotonic()
                elif self._in_flight():
                    await self._settle()  # nothing new: finish the commits in flight
                if self._update_lag():
                    await self._check_source()
                await self._commit_kafka()
                if await self._idle_expired():
                    log.info("idle, exiting", extra={"until_idle": self.config.until_idle})
                    break
            await self._settle()
        except BatchAbandoned:
            log.warning("batch abandoned at shutdown; it will be re-delivered")
        if self._fatal is not None:
            raise self._fatal

    async def _audit_and_hand_over(self, batch: dict[TopicPartition, list[Any]]) -> None:
        """Stage 1 for this batch, then start its commit once the previous commit has finished."""
        self._not_auditing.clear()
        try:
            # The broker is asked which log it serves after the records were fetched: if it is
            # still the incarnation they were read as, they came from it (topic ids never recur).
            assert self._source is not None
            prepared, identity = await asyncio.gather(self._audit(batch), self._source.observe())
            assert self._commits is not None
            same_log = identity == self._source.identity
            if same_log and prepared.offsets and self._commits.join(prepared):
                return  # committed with the batch that waits its turn (group commit)
            keep = self._commits.depth - 1 if same_log else 0
            if not await self._settle(keep):
                return  # an earlier batch was fenced: this one was audited from stale positions
            if identity != self._source.identity:
                await self._source_changed(identity)  # nothing in flight: settled above
                return
            if not prepared.offsets:
                return  # every partition of the batch was revoked while it was audited
            self._commits.hand_over(prepared)
        finally:
            self._not_auditing.set()

    def _in_flight(self) -> bool:
        return self._commits is not None and len(self._commits) > 0

    async def _settle(self, keep: int = 0) -> bool:
        """Wait until at most ``keep`` commits are in flight; after a fenced one, re-seek everything.

        True if all is well. A fenced commit drains the whole chain first, so the re-seek happens
        with nothing in flight.
        """
        if self._commits is None or await self._commits.settle(keep):
            return True
        assert self._consumer is not None
        await self._reseek(list(self._consumer.assignment()))
        return False

    async def _audit(self, batch: dict[TopicPartition, list[Any]]) -> PreparedBatch:
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
            incarnation=self.incarnation or 1,
        )
        assert self._fetcher is not None
        if self._fetcher.stale:  # re-sought while auditing: stale batch
            self._fetcher.refetch()
            return PreparedBatch({}, [], [], started, time.monotonic() - started)
        owned = {tp for tp in batch if tp in self.expected}  # a partition may be revoked meanwhile
        if len(owned) < len(batch):
            batch = {tp: tp_records for tp, tp_records in batch.items() if tp in owned}
            outcomes = [o for o in outcomes if TopicPartition(o.context.topic, o.context.partition) in owned]
        offsets = []
        for tp, tp_records in batch.items():
            next_offset = tp_records[-1].offset + 1
            offsets.append(
                OffsetAdvance(
                    cfg.group_id, tp.topic, tp.partition, self.expected[tp], next_offset, self.incarnation
                )
            )
            self.expected[tp] = next_offset
        return PreparedBatch(batch, outcomes, offsets, started, time.monotonic() - started)

    async def _idle_expired(self) -> bool:
        """``until_idle`` seconds without records, nothing in flight, and every partition caught up.

        Caught up: the fetch position has reached the high watermark (the position, not the
        stored offset, so transaction markers at the end of a partition do not keep it busy). A
        partition whose high watermark is still unknown (no fetch answered yet) counts as caught
        up only after five idle periods, so a slow first fetch cannot end a batch job early.
        """
        consumer = self._consumer
        if self.config.until_idle is None or self._last_activity is None or consumer is None:
            return False
        idle_for = time.monotonic() - self._last_activity
        if idle_for < self.config.until_idle or self._in_flight():
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

    # --- partitions ----------------------------------------------------------------------

    async def partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        """Seek every newly assigned partition to the offset stored in Postgres."""
        try:
            await self._reseek(assigned)
        except BatchAbandoned:
            return  # stopping while Postgres is unreachable: run() is about to return
        except Exception as exc:  # aiokafka logs and swallows callback errors: the loop raises it
            self._fatal = exc
            self.request_stop()
            return
        self.metrics.assigned.set(len(self._consumer.assignment()) if self._consumer else len(assigned))
        self._last_activity = time.monotonic()
        partitions = sorted(tp.partition for tp in assigned)
        log.info("partitions assigned", extra={"partitions": partitions, "cpu_seconds": process_cpu()})

    async def partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        """Let the batches in flight finish (bounded) before the partitions move to another member."""
        if not revoked:
            return
        try:
            await asyncio.wait_for(self._quiesce(), timeout=max(1.0, self.config.session_timeout_ms / 1000))
        except TimeoutError:
            log.warning("batch still in flight at revocation; its commit will be fenced if it is stale")
        for tp in revoked:
            self.stored.pop(tp, None)
            self.expected.pop(tp, None)
            self.metrics.forget_partition(tp.topic, tp.partition)
        log.info("partitions revoked", extra={"partitions": sorted(tp.partition for tp in revoked)})

    async def _quiesce(self) -> None:
        """Return once no batch is being audited and no commit is in flight (never raises)."""
        while True:
            await self._not_auditing.wait()
            unfinished = self._commits.unfinished() if self._commits is not None else []
            if not unfinished:
                return
            await asyncio.wait(unfinished)

    async def _reseek(self, partitions: Sequence[TopicPartition]) -> None:
        """Resolve the source incarnation, then seek ``partitions`` to its offsets in Postgres."""
        consumer, source, fetcher = self._consumer, self._source, self._fetcher
        assert consumer is not None and source is not None and fetcher is not None
        if not partitions:
            return
        fetcher.seek_generation += 1
        previous = source.incarnation
        resolution = await source.resolve(await source.observe())
        if source.incarnation != previous:
            self.stored.clear()  # offsets of another incarnation mean nothing in this one
            self.expected.clear()
        owned = consumer.assignment()
        for tp in owned if source.incarnation != previous else partitions:
            if tp in owned:
                self.stored[tp] = self.expected[tp] = resolution.offsets.get(tp.partition, 0)
                consumer.seek(tp, self.stored[tp])
        fetcher.seek_generation += 1

    async def _source_changed(self, identity: SourceIdentity) -> None:
        """The broker serves another log than the one being consumed: re-resolve and re-seek all."""
        assert self._consumer is not None and self._source is not None
        log.warning(
            "the source log changed under the consumer (broker log lost, cluster rebuilt or topic "
            "recreated); re-resolving its incarnation",
            extra={
                "incarnation": self._source.incarnation,
                "cluster_id": identity.cluster_id,
                "topic_id": identity.topic_id,
            },
        )
        await self._reseek(list(self._consumer.assignment()))

    def _update_lag(self) -> bool:
        """Set the lag gauges; True if a partition's log end lies below its stored offset."""
        assert self._consumer is not None
        for tp in self._consumer.assignment():
            highwater = self._consumer.highwater(tp)
            if highwater is not None and tp in self.stored:
                self.metrics.lag.labels(tp.topic, str(tp.partition)).set(max(0, highwater - self.stored[tp]))
        return bool(ends_below(self._consumer, self.stored))

    async def _check_source(self) -> None:
        """A log end below a stored offset: a new log (re-resolve) or, same identity, stop."""
        assert self._consumer is not None and self._source is not None
        await self._settle()
        identity = await self._source.observe()
        if identity != self._source.identity:
            await self._source_changed(identity)
        elif below := ends_below(self._consumer, self.stored):  # else a commit in flight settled it
            raise self._source.regressed(below)

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
