"""The settings of one ``ledger consume`` member (:class:`ConsumerConfig`) and the recommended
aiokafka group timing for the broker in use (:func:`consumer_kwargs`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConsumerConfig", "consumer_kwargs"]


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
    batch_linger_ms: int = 50
    """After a poll returns fewer than ``max_records``, keep polling this long to fill the batch."""
    max_batch_bytes: int = 16_777_216
    """Stop filling a batch once its record values reach this many bytes."""
    max_in_flight: int = 2
    """Audited batches committing or waiting to commit while the next one is audited (>= 1)."""
    max_commit_records: int = 0
    """Group commit: a batch audited while the previous one still waits for its commit joins it, up
    to this many records per transaction (``ledger consume --max-commit-records``). 0, never join,
    is the default: a backlog never joins (its audit stage is the slower one, so the waiting batch
    is always writing by the time the next is audited), and where commits do queue no gain was
    measured (docs/scaling.md §1, "Round 8")."""
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
    tune_gc: bool = True
    """Freeze the start-up heap and collect less often while consuming (:mod:`ledger.collection`)."""


def consumer_kwargs(*, embedded: bool) -> dict[str, int]:
    """Group timing kwargs for ``AIOKafkaConsumer``.

    The embedded tansu broker's join and rebalance time scales with ``session_timeout_ms``
    (5 s at aiokafka's defaults, 1 s at 2000/300; below 500 ms it never settles), so embedded
    use gets short timeouts. Real Kafka keeps aiokafka's defaults.
    """
    if embedded:
        return {"session_timeout_ms": 2000, "heartbeat_interval_ms": 300}
    return {"session_timeout_ms": 10000, "heartbeat_interval_ms": 3000}
