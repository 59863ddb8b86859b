"""Source-log incarnations and dead-letter coordinates, inside the append transaction.

Kafka offsets only mean something within one log. A broker that lost its log, a rebuilt cluster
or a topic deleted and recreated starts a new log whose offsets restart at 0, while the offsets
stored here only move forward. So each consumer group's offsets belong to an *incarnation* of the
topic, identified by the broker's cluster id and the topic's id. :func:`resolve_incarnation`
decides, under the append lock, whether the log the consumer sees is the current incarnation, a
new one (recorded in ``source_incarnations`` and the group's offsets reset to 0 in the same
transaction), or one it cannot accept (:class:`~ledger.errors.SourceLogUndecidedError`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg import Cursor

from ledger.errors import SourceLogUndecidedError, StaleOffsetError
from ledger.store.records import AppendResult, OffsetAdvance, SubmissionDraft

if TYPE_CHECKING:
    from ledger.store.append import Outcome

__all__ = [
    "Incarnation",
    "SourceIdentity",
    "SourceResolution",
    "fence_incarnations",
    "known_incarnations",
    "record_dead_letters",
    "resolve_incarnation",
]


@dataclass(frozen=True)
class SourceIdentity:
    """What names one log of a topic: the broker's cluster id and the topic's id (a UUID)."""

    cluster_id: str
    topic_id: str


@dataclass(frozen=True)
class Incarnation:
    """A recorded incarnation: its number (1, 2, ... per group and topic) and identity."""

    number: int
    identity: SourceIdentity
    reason: str


@dataclass(frozen=True)
class SourceResolution:
    """The incarnation to consume, its stored offsets, and whether it was recorded just now."""

    incarnation: Incarnation
    offsets: dict[int, int]
    created: bool


def known_incarnations(cur: Cursor[Any], group: str, topic: str) -> list[Incarnation]:
    """The group's recorded incarnations of ``topic``, oldest first (the last is the current one)."""
    cur.execute(
        "SELECT incarnation, cluster_id, topic_id, reason FROM ledger_store.source_incarnations "
        "WHERE consumer_group = %s AND topic = %s ORDER BY incarnation",
        (group, topic),
    )
    return [Incarnation(int(n), SourceIdentity(c, t), r) for n, c, t, r in cur.fetchall()]


def _offsets(cur: Cursor[Any], group: str, topic: str) -> dict[int, int]:
    cur.execute(
        "SELECT kafka_partition, next_offset FROM ledger_store.consumer_offsets "
        "WHERE consumer_group = %s AND topic = %s",
        (group, topic),
    )
    return {int(partition): int(offset) for partition, offset in cur.fetchall()}


def _new_reason(known: Sequence[Incarnation], offsets: dict[int, int], observed: SourceIdentity) -> str:
    if not known:
        # Offsets written before incarnations were tracked name no log: the one now seen may or
        # may not be it, so it is consumed from its start (idempotency keys make that safe).
        return "legacy_offsets" if offsets else "first"
    current = known[-1].identity
    return "cluster_changed" if current.cluster_id != observed.cluster_id else "topic_recreated"


def resolve_incarnation(
    cur: Cursor[Any], group: str, topic: str, observed: SourceIdentity, *, host: str | None
) -> SourceResolution:
    """Inside an append transaction (lock held): the incarnation ``observed`` belongs to.

    The current incarnation when the identity is unchanged; otherwise a new incarnation is
    recorded and the group's offsets of ``topic`` go back to 0 in this transaction. An identity
    that belongs to an earlier incarnation raises :class:`SourceLogUndecidedError`.
    """
    if not observed.cluster_id or not observed.topic_id:
        raise SourceLogUndecidedError(
            f"the broker gave no cluster id or topic id for {topic!r}", reason="no_identity"
        )
    known = known_incarnations(cur, group, topic)
    offsets = _offsets(cur, group, topic)
    if known and known[-1].identity == observed:
        return SourceResolution(known[-1], offsets, created=False)
    for past in known:
        if past.identity == observed:
            raise SourceLogUndecidedError(
                f"topic {topic!r} on the broker is incarnation {past.number} (cluster {observed.cluster_id}, "
                f"topic id {observed.topic_id}), but group {group!r} has moved on to incarnation "
                f"{known[-1].number}: is this consumer connected to an old cluster?",
                reason="past_incarnation",
            )
    incarnation = Incarnation(len(known) + 1, observed, _new_reason(known, offsets, observed))
    cur.execute(
        "INSERT INTO ledger_store.source_incarnations (consumer_group, topic, incarnation, cluster_id, "
        "topic_id, reason, previous_offsets, host) VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s)",
        (
            group,
            topic,
            incarnation.number,
            observed.cluster_id,
            observed.topic_id,
            incarnation.reason,
            json.dumps({str(partition): offset for partition, offset in sorted(offsets.items())}),
            host,
        ),
    )
    cur.execute(
        "UPDATE ledger_store.consumer_offsets SET next_offset = 0, incarnation = %s, updated_at = now() "
        "WHERE consumer_group = %s AND topic = %s",
        (incarnation.number, group, topic),
    )
    return SourceResolution(incarnation, dict.fromkeys(offsets, 0), created=True)


def fence_incarnations(cur: Cursor[Any], offsets: Sequence[OffsetAdvance]) -> None:
    """Refuse offsets read from an incarnation that is no longer the group's current one."""
    checked: set[tuple[str, str]] = set()
    for advance in offsets:
        key = (advance.group, advance.topic)
        if advance.incarnation is None or key in checked:
            continue
        checked.add(key)
        cur.execute(
            "SELECT max(incarnation) FROM ledger_store.source_incarnations "
            "WHERE consumer_group = %s AND topic = %s",
            key,
        )
        row = cur.fetchone()
        current = row[0] if row else None
        if current != advance.incarnation:
            raise StaleOffsetError(
                f"batch read from incarnation {advance.incarnation} of {advance.topic}, but the current "
                f"incarnation is {current}: the batch was rolled back and the consumer re-seeks",
                group=advance.group,
                topic=advance.topic,
                partition=advance.partition,
                from_offset=advance.from_offset,
            )


def record_dead_letters(
    cur: Cursor[Any], drafts: Sequence[SubmissionDraft], results: Sequence[AppendResult | Outcome]
) -> None:
    """Store where each committed rejection's dead-letter copy landed (the first copy recorded wins).

    ``results``: the batch's results, or its outcomes as the append decided them under the lock,
    one per draft in order (each draft goes with its own: a key repeated in the batch may be
    ``created`` for one draft and ``conflict`` for another)."""
    rows = [
        (result.submission_id, letter.topic, letter.partition, letter.offset)
        for draft, result in zip(drafts, results, strict=True)
        if draft.operational is not None
        and (letter := draft.operational.dead_letter) is not None
        and result.status in ("created", "existing")
    ]
    if rows:
        cur.executemany(
            "INSERT INTO ledger_store.dead_letters (submission_id, dlq_topic, dlq_partition, dlq_offset) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (submission_id) DO NOTHING",
            rows,
        )
