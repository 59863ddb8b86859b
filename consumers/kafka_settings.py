"""Recommended aiokafka consumer settings for the broker in use."""

from __future__ import annotations


def consumer_kwargs(*, embedded: bool) -> dict[str, int]:
    """Group timing kwargs for ``AIOKafkaConsumer``.

    The embedded tansu broker's join and rebalance time scales with ``session_timeout_ms``
    (5 s at aiokafka's defaults, 1 s at 2000/300; below 500 ms it never settles), so embedded
    use gets short timeouts. Real Kafka keeps aiokafka's defaults.
    """
    if embedded:
        return {"session_timeout_ms": 2000, "heartbeat_interval_ms": 300}
    return {"session_timeout_ms": 10000, "heartbeat_interval_ms": 3000}
