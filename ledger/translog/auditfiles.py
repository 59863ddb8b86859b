"""Feed files (and optionally a Kafka topic) to :class:`~ledger.translog.audit.LogAuditor`.

What a file is, is decided by its content, never trusted from its name:

* a signed checkpoint note (text that does not start with ``{`` or ``[``);
* a JSON proof bundle, or a JSON list of bundles;
* exported entries: JSON lines, one entry object per line (``ledger export-log`` writes
  ``entries.jsonl``); they are checked last, once every checkpoint is known.

Directories are walked in name order. No database is touched.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.translog.audit import AuditReport, LogAuditor

__all__ = ["MAX_FILE_BYTES", "audit_files", "read_topic_notes"]

MAX_FILE_BYTES = 64 * 1024 * 1024  # bundles and notes; entries files are streamed and unbounded


def _walk(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file())
        else:
            yield path


def _first_text_byte(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(4096).lstrip()[:1]


def _looks_like_entries(path: Path) -> bool:
    """JSON lines whose first line is an entry object (``global_seq``, no bundle ``format``)."""
    with path.open("rb") as handle:
        first = handle.readline(MAX_FILE_BYTES)
    try:
        record = json.loads(first)
    except ValueError:
        return False
    return isinstance(record, dict) and "global_seq" in record and "format" not in record


def _iter_lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        yield from handle


def audit_files(
    public_key: Ed25519PublicKey,
    paths: Sequence[Path],
    *,
    origin: str | None = None,
    topic_notes: Sequence[tuple[str, bytes]] = (),
) -> AuditReport:
    """Audit every checkpoint, bundle and entries file under ``paths`` (plus notes from a topic)."""
    auditor = LogAuditor(public_key, origin)
    bundles: list[tuple[str, object]] = []
    entries: list[Path] = []
    for label, note in topic_notes:
        auditor.add_checkpoint(label, note)
    for path in _walk(paths):
        subject = str(path)
        try:
            if not path.is_file():
                auditor.fail(subject, "not a regular file" if path.exists() else "no such file")
                continue
            head = _first_text_byte(path)
            if head == b"{" and _looks_like_entries(path):
                entries.append(path)
            elif path.stat().st_size > MAX_FILE_BYTES:
                auditor.fail(subject, f"larger than {MAX_FILE_BYTES} bytes: not a checkpoint or proof bundle")
            elif head in (b"{", b"["):
                bundles.append((subject, json.loads(path.read_bytes())))
            else:
                auditor.add_checkpoint(subject, path.read_bytes())
        except (OSError, ValueError, RecursionError) as exc:
            auditor.fail(subject, f"unreadable: {exc}")
    for subject, parsed in bundles:
        if isinstance(parsed, list):
            for position, item in enumerate(parsed):
                auditor.check_bundle(f"{subject}[{position}]", item)
        else:
            auditor.check_bundle(subject, parsed)
    for path in entries:
        auditor.check_entries(str(path), _iter_lines(path))
    auditor.check_history()
    return auditor.report


async def _consume(bootstrap: str, topic: str, idle_seconds: float) -> list[tuple[str, bytes]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        if topic not in await consumer.topics():  # also refreshes the metadata
            raise ValueError(f"topic {topic!r} does not exist")
        partitions = consumer.partitions_for_topic(topic) or set()
        assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        notes: list[tuple[str, bytes]] = []
        while assigned:
            batch = await consumer.getmany(timeout_ms=int(idle_seconds * 1000))
            if not batch:
                break
            for tp, records in batch.items():
                notes.extend((f"topic {topic}[{tp.partition}]@{r.offset}", r.value or b"") for r in records)
        return notes
    finally:
        await consumer.stop()


def read_topic_notes(bootstrap: str, topic: str, idle_seconds: float = 2.0) -> list[tuple[str, bytes]]:
    """Every record of ``topic`` from the beginning, until no record arrives for ``idle_seconds``."""
    return asyncio.run(_consume(bootstrap, topic, idle_seconds))
