"""Which log of the source topic the broker serves: its cluster id and the topic's id.

aiokafka speaks Metadata up to v5, which carries the cluster id but no topic id. Topic ids came
with Metadata v10 (Kafka 2.8); this module adds v10-v12 request and response schemas and asks
for one topic. A topic deleted and recreated gets a new topic id; a rebuilt cluster gets a new
cluster id (the embedded broker is started with a fresh one each time). A broker too old to
answer v10, or one that returns an empty cluster id or the all-zero topic id, gives no usable
identity: the consumer then stops (:class:`~ledger.errors.SourceLogUndecidedError`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from io import BytesIO
from typing import Any, TypeAlias

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import IncompatibleBrokerVersion, KafkaError, for_code
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    AbstractType,
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

from consumers.metrics import ConsumerMetrics
from ledger.errors import SourceLogUndecidedError
from ledger.store.source_log import SourceIdentity, SourceResolution

__all__ = ["SourceIdentity", "SourceTracker", "observe_source"]

log = logging.getLogger("consumers.consumer")
Retrying = Callable[[str, Callable[[], Awaitable[Any]]], Awaitable[Any]]

ZERO_UUID = bytes(16)


class _Uuid(AbstractType[bytes]):  # type: ignore[misc]
    """Kafka's UUID type: 16 raw bytes."""

    @classmethod
    def encode(cls, value: bytes) -> bytes:
        return bytes(value)

    @classmethod
    def decode(cls, data: BytesIO) -> bytes:
        value = data.read(16)
        if len(value) != 16:
            raise ValueError("Buffer underrun decoding UUID")
        return value


_BROKERS = CompactArray(
    ("node_id", Int32),
    ("host", CompactString("utf-8")),
    ("port", Int32),
    ("rack", CompactString("utf-8")),
    ("tags", TaggedFields),
)
_PARTITIONS = CompactArray(
    ("error_code", Int16),
    ("partition_index", Int32),
    ("leader_id", Int32),
    ("leader_epoch", Int32),
    ("replica_nodes", CompactArray(Int32)),
    ("isr_nodes", CompactArray(Int32)),
    ("offline_replicas", CompactArray(Int32)),
    ("tags", TaggedFields),
)
_TOPICS = CompactArray(
    ("error_code", Int16),
    ("name", CompactString("utf-8")),
    ("topic_id", _Uuid),
    ("is_internal", Boolean),
    ("partitions", _PARTITIONS),
    ("topic_authorized_operations", Int32),
    ("tags", TaggedFields),
)
_REQUEST_TOPICS = CompactArray(("topic_id", _Uuid), ("name", CompactString("utf-8")), ("tags", TaggedFields))


class MetadataResponse_v10(Response):  # type: ignore[misc]
    API_KEY = 3
    API_VERSION = 10
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("brokers", _BROKERS),
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        ("topics", _TOPICS),
        ("cluster_authorized_operations", Int32),
        ("tags", TaggedFields),
    )


class MetadataResponse_v11(Response):  # type: ignore[misc]
    API_KEY = 3
    API_VERSION = 11
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("brokers", _BROKERS),
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        ("topics", _TOPICS),
        ("tags", TaggedFields),
    )


class MetadataResponse_v12(Response):  # type: ignore[misc]
    API_KEY = 3
    API_VERSION = 12
    SCHEMA = MetadataResponse_v11.SCHEMA


class MetadataRequest_v10(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 3
    API_VERSION = 10
    RESPONSE_TYPE = MetadataResponse_v10
    SCHEMA = Schema(
        ("topics", _REQUEST_TOPICS),
        ("allow_auto_topic_creation", Boolean),
        ("include_cluster_authorized_operations", Boolean),
        ("include_topic_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class MetadataRequest_v11(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 3
    API_VERSION = 11
    RESPONSE_TYPE = MetadataResponse_v11
    SCHEMA = Schema(
        ("topics", _REQUEST_TOPICS),
        ("allow_auto_topic_creation", Boolean),
        ("include_topic_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class MetadataRequest_v12(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 3
    API_VERSION = 12
    RESPONSE_TYPE = MetadataResponse_v12
    SCHEMA = MetadataRequest_v11.SCHEMA


TopicIdRequestStruct: TypeAlias = MetadataRequest_v10 | MetadataRequest_v11 | MetadataRequest_v12


class TopicIdMetadataRequest(Request[TopicIdRequestStruct]):  # type: ignore[misc]
    """Metadata of one topic, never auto-creating it, at the highest of v10-v12 the broker speaks."""

    API_KEY = 3

    def __init__(self, topic: str) -> None:
        self._topic = topic

    def build(self, request_struct_class: type[TopicIdRequestStruct]) -> TopicIdRequestStruct:
        topics: list[tuple[bytes, str, dict[int, bytes]]] = [(ZERO_UUID, self._topic, {})]
        if request_struct_class.API_VERSION == 10:
            return request_struct_class(topics, False, False, False, {})
        return request_struct_class(topics, False, False, {})


def _identity(response: Any, topic: str) -> SourceIdentity:
    found = [entry for entry in response.topics if entry[1] == topic]
    if not found:
        raise SourceLogUndecidedError(
            f"the broker's metadata does not list topic {topic!r}", reason="no_topic"
        )
    error_code, _, topic_id = found[0][0], found[0][1], found[0][2]
    if error_code:
        raise for_code(error_code)(f"metadata of topic {topic!r}")
    cluster_id = response.cluster_id
    if not cluster_id or topic_id == ZERO_UUID:
        raise SourceLogUndecidedError(
            f"the broker gave no {'cluster id' if not cluster_id else 'topic id'} for topic {topic!r}: "
            "the consumer cannot tell a new log of the topic from the one it consumed",
            reason="no_identity",
        )
    return SourceIdentity(cluster_id=str(cluster_id), topic_id=str(uuid.UUID(bytes=bytes(topic_id))))


async def observe_source(client: AIOKafkaClient, topic: str) -> SourceIdentity:
    """The identity of the log of ``topic`` the broker serves now.

    Raises a (retriable) :class:`KafkaError` when the topic is unknown or the broker unreachable,
    and :class:`SourceLogUndecidedError` when the broker gives no usable identity.
    """
    node_id = client.get_random_node()
    if node_id is None:
        await client.force_metadata_update()
        node_id = client.get_random_node()
        if node_id is None:
            raise KafkaError("no broker known to ask for the topic id")
    try:
        response = await client.send(node_id, TopicIdMetadataRequest(topic))
    except (IncompatibleBrokerVersion, NotImplementedError) as exc:
        raise SourceLogUndecidedError(
            f"the broker does not answer Metadata v10 or later (Kafka 2.8+), so topic {topic!r} has no "
            f"topic id and a recreated topic could not be told apart: {exc}",
            reason="no_identity",
        ) from exc
    return _identity(response, topic)


def ends_below(consumer: Any, stored: dict[Any, int]) -> dict[int, tuple[int, int]]:
    """``{partition: (highwater, stored)}`` of assigned partitions whose log ends below the stored offset."""
    return {
        tp.partition: (highwater, stored[tp])
        for tp in consumer.assignment()
        if tp in stored and (highwater := consumer.highwater(tp)) is not None and highwater < stored[tp]
    }


class SourceTracker:
    """One member's view of the source log: the incarnation its offsets belong to, and its identity."""

    def __init__(
        self,
        *,
        client: AIOKafkaClient,
        store: Any,
        metrics: ConsumerMetrics,
        retrying: Retrying,
        group: str,
        topic: str,
        host: str,
    ) -> None:
        """``store`` offers ``resolve_source`` (:class:`ledger.store.ledger_store.LedgerStore`)."""
        self.client = client
        self.store = store
        self.metrics = metrics
        self.retrying = retrying
        self.group = group
        self.topic = topic
        self.host = host
        self.incarnation: int | None = None
        self.identity: SourceIdentity | None = None

    async def observe(self) -> SourceIdentity:
        """The identity of the log the broker serves now (retried while the broker is unavailable)."""
        try:
            identity: SourceIdentity = await self.retrying(
                "source log lookup", lambda: observe_source(self.client, self.topic)
            )
        except SourceLogUndecidedError as exc:
            raise self.undecided(exc) from None
        return identity

    async def resolve(self, identity: SourceIdentity) -> SourceResolution:
        """Record or find ``identity``'s incarnation in the ledger and make it this member's."""
        try:
            resolution: SourceResolution = await self.retrying(
                "offset load",
                lambda: asyncio.to_thread(
                    self.store.resolve_source, self.group, self.topic, identity, host=self.host
                ),
            )
        except SourceLogUndecidedError as exc:
            raise self.undecided(exc) from None
        incarnation = resolution.incarnation
        if resolution.created:
            self.metrics.source_incarnations.labels(self.topic, incarnation.reason).inc()
            log.warning(
                "new source-log incarnation recorded; its partitions are consumed from the start",
                extra={
                    "incarnation": incarnation.number,
                    "reason": incarnation.reason,
                    "cluster_id": identity.cluster_id,
                    "topic_id": identity.topic_id,
                },
            )
        self.incarnation, self.identity = incarnation.number, identity
        return resolution

    def undecided(self, exc: SourceLogUndecidedError) -> SourceLogUndecidedError:
        """Count and log a source log the member cannot place; the caller raises it (the member stops)."""
        self.metrics.source_undecided.labels(self.topic, exc.reason).inc()
        log.error(
            "cannot tell which log of the source topic this is; stopping instead of skipping records",
            extra={"reason": exc.reason, "error": exc.message, "incarnation": self.incarnation},
        )
        return exc

    def regressed(self, below: dict[int, tuple[int, int]]) -> SourceLogUndecidedError:
        """The error (counted) for log ends below the stored offsets under an unchanged identity."""
        for partition in below:
            self.metrics.regressed_partitions.labels(self.topic, str(partition)).inc()
        return self.undecided(
            SourceLogUndecidedError(
                f"partitions {sorted(below)} of {self.topic!r} end below the offsets stored in Postgres "
                f"((highwater, stored) {below}) while the cluster id and topic id are unchanged: the log "
                "was truncated and records may be lost or renumbered; an operator must decide",
                reason="log_regressed",
            )
        )
