"""Prometheus metrics of one consumer process (``prometheus_client``, own registry)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from consumers.processing import Outcome, Rejection
from ledger.store.records import AppendResult

__all__ = ["ConsumerMetrics"]

log = logging.getLogger("consumers.metrics")

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ConsumerMetrics:
    """Counters, gauges and histograms for ``ledger consume``; served by :meth:`serve`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        """Register every metric in ``registry`` (a fresh one by default)."""
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.consumed = Counter(
            "ledger_records_consumed", "Kafka records read from the topic", ["topic"], registry=r
        )
        self.audited = Counter(
            "ledger_records_audited", "Records audited and committed to the ledger", ["topic"], registry=r
        )
        self.duplicates = Counter(
            "ledger_records_duplicate",
            "Records whose idempotency key was already in the ledger (re-deliveries, nothing written)",
            ["topic"],
            registry=r,
        )
        self.conflicts = Counter(
            "ledger_idempotency_conflicts",
            "Records whose idempotency key is stored with different content (recorded, original kept)",
            ["topic"],
            registry=r,
        )
        self.rejected = Counter(
            "ledger_records_rejected",
            "Records dead-lettered and recorded as submission.rejected",
            ["topic", "reason"],
            registry=r,
        )
        self.batches = Counter("ledger_batches_committed", "Batches committed to Postgres", registry=r)
        self.db_retries = Counter(
            "ledger_db_retries", "Batch commits retried because Postgres was unavailable", registry=r
        )
        self.stale_batches = Counter(
            "ledger_stale_batches",
            "Batches rolled back because another group member advanced the offsets (fenced)",
            registry=r,
        )
        self.batch_seconds = Histogram(
            "ledger_batch_seconds",
            "Time from poll to committed transaction, per batch",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_records = Histogram(
            "ledger_batch_records",
            "Records per committed batch",
            buckets=(1, 10, 50, 100, 250, 500, 1000, 2500, 5000),
            registry=r,
        )
        self.commit_latency = Histogram(
            "ledger_record_commit_latency_seconds",
            "Record timestamp (producer create time) to ledger commit",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.lag = Gauge(
            "ledger_consumer_lag",
            "Partition high watermark minus the next offset stored in Postgres",
            ["topic", "partition"],
            registry=r,
        )
        self.assigned = Gauge("ledger_assigned_partitions", "Partitions assigned to this member", registry=r)
        self.regressed_partitions = Counter(
            "ledger_partition_log_regressions_total",
            "Times a partition's log end was found below the offset stored in Postgres while the "
            "cluster id and topic id were unchanged (log truncated); the consumer stops",
            ["topic", "partition"],
            registry=r,
        )
        self.source_incarnations = Counter(
            "ledger_source_incarnations_total",
            "New incarnations of the source log recorded by this member (first log, broker log lost, "
            "cluster rebuilt, topic recreated); each is consumed from its start",
            ["topic", "reason"],
            registry=r,
        )
        self.source_undecided = Counter(
            "ledger_source_log_undecided_total",
            "Times this member could not tell which log of the topic it reads and stopped "
            "(no cluster or topic id, a past incarnation, or a log end below the stored offset)",
            ["topic", "reason"],
            registry=r,
        )

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        """Expose ``/metrics`` on ``addr:port`` from a daemon thread."""
        start_http_server(port, addr=addr, registry=self.registry)

    def forget_partition(self, topic: str, partition: int) -> None:
        """Drop the lag series of a partition this member no longer owns."""
        with contextlib.suppress(KeyError):
            self.lag.remove(topic, str(partition))

    def record_outcomes(
        self, topic: str, outcomes: Sequence[Outcome], results: Sequence[AppendResult]
    ) -> None:
        """Count committed outcomes: audited or rejected, duplicates and conflicts, commit latency.

        ``results`` has one result per outcome, in order (a key repeated in one batch included).
        """
        now_ms = time.time() * 1000
        audited = duplicates = conflicts = 0
        rejected: dict[str, int] = {}
        latency = self.commit_latency
        for outcome, result in zip(outcomes, results, strict=True):
            if isinstance(outcome, Rejection):
                reason = outcome.error.reason.value
                rejected[reason] = rejected.get(reason, 0) + 1
            else:
                audited += 1
            if result.status == "existing":
                duplicates += 1
            elif result.status == "conflict":
                conflicts += 1
                key = outcome.draft.idempotency_key
                log.warning(
                    "idempotency key already stored with different content; conflict recorded",
                    extra={
                        "idempotency_key": key,
                        "partition": outcome.context.partition,
                        "offset": outcome.context.offset,
                    },
                )
            timestamp = outcome.context.timestamp_ms
            if timestamp is not None and timestamp > 0:
                latency.observe(max(0.0, (now_ms - timestamp) / 1000))
        # counted once per batch, not per record (each labels() call takes a lock)
        for reason, count in sorted(rejected.items()):
            self.rejected.labels(topic, reason).inc(count)
        for counter, count in (
            (self.audited, audited),
            (self.duplicates, duplicates),
            (self.conflicts, conflicts),
        ):
            if count:
                counter.labels(topic).inc(count)
