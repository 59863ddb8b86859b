"""Producer helper: validate envelopes exactly as the consumer will, then send them keyed by market id.

Typical use::

    async with EnvelopePublisher(bootstrap, topic="evidence-bundles") as publisher:
        sent = await publisher.publish(prepare_document({"prompt_spec": ..., "evidence_bundle": ...}))

``prepare_document`` accepts a full v1 envelope or a bare ``{"prompt_spec", "evidence_bundle"}``
pair (which it wraps) and raises :class:`~engine.envelope.EnvelopeError` for anything the
consumer would dead-letter. ``prepare_raw`` skips validation (for testing poison handling).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from aiokafka import AIOKafkaProducer

from engine.envelope import EnvelopeError, Reason, decode_envelope, from_strict_json_error
from engine.envelope_inputs import as_envelope_document, encode_envelope
from engine.jsonio import StrictJSONError, loads_strict
from engine.limits import MAX_INTEGER_DIGITS

__all__ = [
    "CONTENT_TYPE_HEADER",
    "EnvelopePublisher",
    "PreparedRecord",
    "SentRecord",
    "content_type_header",
    "prepare_document",
    "prepare_file",
    "prepare_raw",
    "publish_documents",
]

CONTENT_TYPE_HEADER = ("content-type", b"application/vnd.cournot-ledger.envelope+json; version=1")


def content_type_header(version: int) -> tuple[str, bytes]:
    """The ``content-type`` header of an envelope of ``version`` (:data:`CONTENT_TYPE_HEADER` for v1)."""
    return ("content-type", f"application/vnd.cournot-ledger.envelope+json; version={version}".encode())


@dataclass(frozen=True)
class PreparedRecord:
    """A record ready to send; ``idempotency_key`` is None for unvalidated (raw) records."""

    value: bytes
    key: bytes | None
    source: str = "<memory>"
    idempotency_key: str | None = None
    market_id: str | None = None
    bundle_id: str | None = None
    headers: tuple[tuple[str, bytes], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class SentRecord:
    """Where a record landed."""

    record: PreparedRecord
    topic: str
    partition: int
    offset: int

    def summary(self) -> dict[str, Any]:
        """A JSON-ready description of what was sent (printed by ``ledger publish``)."""
        return {
            "source": self.record.source,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "key": self.record.key.decode("utf-8", "replace") if self.record.key is not None else None,
            "idempotency_key": self.record.idempotency_key,
            "bundle_id": self.record.bundle_id,
            "bytes": len(self.record.value),
            "validated": self.record.idempotency_key is not None,
        }


def prepare_document(
    document: Any,
    *,
    source: str = "<memory>",
    event_id: str | None = None,
    verify_reasoning: bool | None = None,
    max_bytes: int = 1_048_576,
    headers: Sequence[tuple[str, bytes]] = (),
) -> PreparedRecord:
    """Add the envelope header if missing, serialise compactly and validate the exact bytes to send."""
    value = encode_envelope(
        as_envelope_document(document, event_id=event_id, verify_reasoning=verify_reasoning)
    )
    decoded = decode_envelope(value, max_bytes=max_bytes)
    return PreparedRecord(
        value=value,
        key=decoded.market_id.encode("utf-8"),
        source=source,
        idempotency_key=decoded.idempotency_key,
        market_id=decoded.market_id,
        bundle_id=decoded.envelope.evidence_bundle.bundle_id,
        headers=(content_type_header(decoded.envelope.schema_version), *headers),
    )


def _guess_market_id(value: bytes) -> str | None:
    try:
        document = json.loads(value)
        market_id = document["prompt_spec"]["market"]["market_id"]
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
    if not (isinstance(market_id, str) and market_id):
        return None
    try:  # a lone surrogate ("\\ud800") has no UTF-8 form: such a record goes out without a key
        market_id.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return market_id


def prepare_raw(
    value: bytes,
    *,
    source: str = "<memory>",
    key: bytes | None = None,
    headers: Sequence[tuple[str, bytes]] = (),
) -> PreparedRecord:
    """Send ``value`` byte for byte, unvalidated; the key is the market id if one can be read."""
    if key is None:
        market_id = _guess_market_id(value)
        key = market_id.encode("utf-8") if market_id else None
    return PreparedRecord(value=value, key=key, source=source, headers=tuple(headers))


RAW_READ_FACTOR = 16  # --raw reads up to 16 times the record limit: oversized on purpose, never endless


def prepare_file(
    path: Path | str,
    *,
    raw: bool = False,
    event_id: str | None = None,
    verify_reasoning: bool | None = None,
    max_bytes: int = 1_048_576,
) -> PreparedRecord:
    """Read a file holding an envelope or a bare inputs pair; ``raw`` sends its bytes unvalidated.

    The read is bounded (a device or FIFO may never end): ``max_bytes``, or for ``raw``, which may
    send an oversized record on purpose, :data:`RAW_READ_FACTOR` times that.
    """
    limit = max_bytes * (RAW_READ_FACTOR if raw else 1)
    with Path(path).open("rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise EnvelopeError(Reason.OVERSIZE, f"{path} holds more than {limit} bytes")
    if raw:
        return prepare_raw(data, source=str(path))
    try:
        # the consumer's number checks: 1e-400 must not turn into 0.0 before it is re-encoded
        document = loads_strict(data, max_integer_digits=MAX_INTEGER_DIGITS, exact_numbers=True)
    except StrictJSONError as exc:
        raise from_strict_json_error(exc) from exc
    return prepare_document(
        document, source=str(path), event_id=event_id, verify_reasoning=verify_reasoning, max_bytes=max_bytes
    )


class EnvelopePublisher:
    """An aiokafka producer that sends prepared records and waits for the broker's acknowledgement."""

    def __init__(
        self,
        bootstrap: str,
        *,
        topic: str = "evidence-bundles",
        max_request_size: int = 2 * 1_048_576,
        linger_ms: int = 5,
        client_id: str = "ledger-publisher",
    ) -> None:
        """Configure; the producer starts on ``start()`` or ``async with``."""
        self.topic = topic
        # acks="all" without idempotence: the embedded tansu broker refuses InitProducerId from aiokafka.
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            client_id=client_id,
            acks="all",
            linger_ms=linger_ms,
            max_batch_size=1_048_576,
            max_request_size=max_request_size,
            request_timeout_ms=30_000,
        )

    async def start(self) -> None:
        """Connect to the cluster; on failure the producer is closed again (no "Unclosed" warning)."""
        try:
            await self._producer.start()
        except BaseException:
            await self._producer.stop()
            raise

    async def stop(self) -> None:
        """Flush and disconnect."""
        await self._producer.stop()

    async def __aenter__(self) -> EnvelopePublisher:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def publish(
        self,
        record: PreparedRecord,
        *,
        topic: str | None = None,
        extra_headers: Sequence[tuple[str, bytes]] = (),
    ) -> SentRecord:
        """Send one record and wait until it is acknowledged."""
        return (await self.publish_many([record], topic=topic, extra_headers=extra_headers))[0]

    async def publish_many(
        self,
        records: Iterable[PreparedRecord],
        *,
        topic: str | None = None,
        extra_headers: Sequence[tuple[str, bytes]] = (),
    ) -> list[SentRecord]:
        """Send records (pipelined, in order per partition) and wait for every acknowledgement."""
        target = topic or self.topic
        pending = []
        for record in records:
            headers = [*record.headers, *extra_headers]
            future = await self._producer.send(target, value=record.value, key=record.key, headers=headers)
            pending.append((record, future))
        results = await asyncio.gather(*(future for _, future in pending))
        return [
            SentRecord(record, metadata.topic, metadata.partition, metadata.offset)
            for (record, _), metadata in zip(pending, results, strict=True)
        ]


def publish_documents(
    bootstrap: str, documents: Iterable[Any], *, topic: str = "evidence-bundles", max_bytes: int = 1_048_576
) -> list[SentRecord]:
    """Blocking helper: validate and send envelopes or bare inputs pairs, return where they landed."""
    prepared = [prepare_document(document, max_bytes=max_bytes) for document in documents]

    async def _send() -> list[SentRecord]:
        async with EnvelopePublisher(
            bootstrap, topic=topic, max_request_size=max(2 * max_bytes, 1_048_576)
        ) as pub:
            return await pub.publish_many(prepared)

    return asyncio.run(_send())
