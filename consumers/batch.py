"""Writing one audited batch: dead letters first, then ONE Postgres transaction with the offsets.

:class:`BatchWriter` is the second stage of the consumer: while it commits batch *k*, the loop
audits batch *k + 1*. Commits stay strictly sequential, so each batch's ``from_offset`` is the
previous batch's ``next_offset``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from aiokafka import TopicPartition

from consumers.dlq import DeadLetterSender
from consumers.metrics import ConsumerMetrics
from consumers.processing import Outcome, Rejection, build_rejection
from engine.envelope import EnvelopeError, Reason
from ledger.errors import (
    AppendOnlyViolationError,
    LedgerDamagedError,
    LedgerError,
    LedgerPermissionError,
    SchemaNotReadyError,
    StaleOffsetError,
    UnstorableRecordError,
)
from ledger.store.records import AppendResult, OffsetAdvance, SubmissionDraft
from ledger.store.source_log import SourceIdentity, SourceResolution

__all__ = [
    "FATAL_LEDGER_ERRORS",
    "BatchWriter",
    "CommitChain",
    "LedgerPort",
    "PreparedBatch",
    "merged",
    "process_cpu",
]

log = logging.getLogger("consumers.consumer")

T = TypeVar("T")
Retrying = Callable[[str, Callable[[], Awaitable[Any]]], Awaitable[Any]]
# Errors that mean "misconfigured", not "this record is bad": stop instead of dead-lettering.
FATAL_LEDGER_ERRORS = (
    SchemaNotReadyError,
    LedgerPermissionError,
    AppendOnlyViolationError,
    LedgerDamagedError,
)


def process_cpu() -> float:
    """This process's CPU seconds so far (all threads), for the logs: CPU per record between two lines."""
    return round(time.process_time(), 3)


class LedgerPort(Protocol):
    """The part of :class:`ledger.store.ledger_store.LedgerStore` the consumer uses."""

    def append_batch(
        self, submissions: Sequence[SubmissionDraft], offsets: Sequence[OffsetAdvance] = ()
    ) -> list[AppendResult]: ...

    def load_offsets(self, group: str, topic: str) -> dict[int, int]: ...

    def resolve_source(
        self, group: str, topic: str, observed: SourceIdentity, *, host: str | None = None
    ) -> SourceResolution: ...


@dataclass(frozen=True)
class PreparedBatch:
    """An audited batch waiting to be committed."""

    batch: dict[TopicPartition, list[Any]]
    outcomes: list[Outcome]
    offsets: list[OffsetAdvance]
    started: float
    audit_seconds: float

    @property
    def rejections(self) -> list[Rejection]:
        """The refused records."""
        return [outcome for outcome in self.outcomes if isinstance(outcome, Rejection)]


def merged(first: PreparedBatch, then: PreparedBatch) -> PreparedBatch | None:
    """``first`` followed by ``then`` as one batch (one transaction), or None if they do not join.

    They join when, for every partition in both, ``then`` starts where ``first`` ends, in the same
    source-log incarnation: the merged advance is ``[first.from_offset, then.next_offset)``, and
    records and outcomes keep their order. Anything else stays two batches (never a gap).
    """
    offsets = {(o.group, o.topic, o.partition): o for o in first.offsets}
    for advance in then.offsets:
        key = (advance.group, advance.topic, advance.partition)
        before = offsets.get(key)
        if before is None:
            offsets[key] = advance
            continue
        if before.next_offset != advance.from_offset or before.incarnation != advance.incarnation:
            return None
        offsets[key] = replace(before, next_offset=advance.next_offset)
    batch = {tp: list(records) for tp, records in first.batch.items()}
    for tp, records in then.batch.items():
        batch.setdefault(tp, []).extend(records)
    return PreparedBatch(
        batch,
        [*first.outcomes, *then.outcomes],
        list(offsets.values()),
        first.started,
        first.audit_seconds + then.audit_seconds,
    )


def batch_drafts(outcomes: Sequence[Outcome]) -> list[SubmissionDraft]:
    """Every outcome's draft, in order, one result each: not de-duplicated by idempotency key.

    The append decides per draft: a key offered twice in one batch with the same content is
    ``existing`` the second time, with different content a recorded ``conflict``.
    """
    return [outcome.draft for outcome in outcomes]


class BatchWriter:
    """Commits prepared batches and keeps ``stored`` (the Postgres offsets) up to date."""

    def __init__(
        self,
        *,
        store: LedgerPort,
        dlq: DeadLetterSender,
        metrics: ConsumerMetrics,
        retrying: Retrying,
        stored: dict[TopicPartition, int],
        topic: str,
        group: str,
        raw_inline_limit: int,
        max_message_bytes: int,
    ) -> None:
        """``stored`` is shared with the consumer, which re-seeks from it."""
        self.store = store
        self.dlq = dlq
        self.metrics = metrics
        self.retrying = retrying
        self.stored = stored
        self.topic = topic
        self.group = group
        self.raw_inline_limit = raw_inline_limit
        self.max_message_bytes = max_message_bytes

    async def write(self, prepared: PreparedBatch) -> bool:
        """Dead letters, then the transaction. False when fenced (nothing written; re-seek)."""
        sent_started = time.monotonic()
        rejections = prepared.rejections
        sent = await self.send_dead_letters(rejections)
        # the same outcomes, the rejections now carrying where their dead letters landed
        placed: dict[int, Outcome] = {id(old): new for old, new in zip(rejections, sent, strict=True)}
        outcomes = [placed.get(id(outcome), outcome) for outcome in prepared.outcomes]
        append_started = time.monotonic()
        try:
            results = await self.append(batch_drafts(outcomes), prepared.offsets)
        except StaleOffsetError as exc:
            self.fenced(exc)
            return False
        except FATAL_LEDGER_ERRORS:
            raise
        except LedgerError as exc:  # one draft the database refuses must not block the partition
            log.error(
                "ledger refused the batch; committing record by record",
                extra={"code": exc.code, "error": exc.message, "records": len(prepared.outcomes)},
            )
            return await self.write_one_by_one(outcomes, prepared.offsets)
        self.advanced(prepared.offsets)
        self.metrics.record_outcomes(self.topic, prepared.outcomes, results)
        self._log_committed(prepared, results, sent_started, append_started)
        return True

    def _log_committed(
        self,
        prepared: PreparedBatch,
        results: Sequence[AppendResult],
        sent_started: float,
        append_started: float,
    ) -> None:
        now = time.monotonic()
        records = len(prepared.outcomes)
        self.metrics.batches.inc()
        self.metrics.batch_seconds.observe(now - prepared.started)
        self.metrics.batch_records.observe(records)
        created = sum(result.status == "created" for result in results)
        conflicts = sum(result.status == "conflict" for result in results)
        log.info(
            "batch committed",
            extra={
                "records": records,
                "new": created,
                "existing": records - created - conflicts,
                "conflicts": conflicts,
                "rejected": len(prepared.rejections),
                "next_offsets": {advance.partition: advance.next_offset for advance in prepared.offsets},
                "seconds": round(now - prepared.started, 4),
                "audit_seconds": round(prepared.audit_seconds, 4),
                "dlq_seconds": round(append_started - sent_started, 4),
                "append_seconds": round(now - append_started, 4),
                "cpu_seconds": process_cpu(),
            },
        )

    async def send_dead_letters(self, rejections: Sequence[Rejection]) -> list[Rejection]:
        """Send and wait for acknowledgement, retrying while the broker is unavailable.

        Returns the rejections, in order, with their dead-letter coordinates in the drafts.
        """
        if not rejections:
            return []
        placed: list[Rejection] = await self.retrying("dead-letter send", lambda: self.dlq.send(rejections))
        return placed

    async def append(
        self, drafts: Sequence[SubmissionDraft], offsets: Sequence[OffsetAdvance]
    ) -> list[AppendResult]:
        """One transaction, retried with backoff while Postgres is unavailable."""
        results: list[AppendResult] = await self.retrying(
            "ledger append", lambda: asyncio.to_thread(self.store.append_batch, drafts, offsets)
        )
        return results

    def advanced(self, offsets: Sequence[OffsetAdvance]) -> None:
        """Record committed offsets."""
        for advance in offsets:
            self.stored[TopicPartition(advance.topic, advance.partition)] = advance.next_offset

    def fenced(self, exc: StaleOffsetError) -> None:
        """Count and log a batch rolled back because another member advanced an offset first."""
        self.metrics.stale_batches.inc()
        log.warning(
            "offsets advanced by another member; batch rolled back, re-seeking from Postgres",
            extra={"partition": exc.partition, "from_offset": exc.from_offset},
        )

    async def write_one_by_one(self, outcomes: Sequence[Outcome], offsets: Sequence[OffsetAdvance]) -> bool:
        """Each record in its own transaction; one the database refuses is dead-lettered instead.

        Only unavailability is retried (inside :meth:`append`). A record the database refuses for
        any other reason becomes a ``ledger_refused`` rejection; if even that cannot be stored the
        consumer stops with :class:`UnstorableRecordError` rather than skip or retry it forever.
        """
        incarnation = offsets[0].incarnation if offsets else None
        for outcome in outcomes:
            ctx = outcome.context
            tp = TopicPartition(ctx.topic, ctx.partition)
            from_offset = self.stored.get(tp, 0)
            if ctx.offset < from_offset:
                continue
            advance = OffsetAdvance(
                self.group, ctx.topic, ctx.partition, from_offset, ctx.offset + 1, incarnation
            )
            try:
                try:
                    results = await self.append([outcome.draft], [advance])
                except (StaleOffsetError, *FATAL_LEDGER_ERRORS):
                    raise
                except LedgerError as exc:
                    outcome = await self.dead_letter_refused(outcome, exc)
                    results = await self.append_rejection(outcome, advance)
            except StaleOffsetError as exc:
                self.fenced(exc)
                return False
            self.advanced([advance])
            self.metrics.record_outcomes(self.topic, [outcome], results)
        return True

    async def dead_letter_refused(self, outcome: Outcome, exc: LedgerError) -> Rejection:
        """The ``ledger_refused`` rejection of a record the database refused, sent to the DLQ."""
        ctx = outcome.context
        log.error(
            "ledger refused a record; dead-lettering it",
            extra={
                "partition": ctx.partition,
                "offset": ctx.offset,
                "code": exc.code,
                "error": exc.message,
            },
        )
        # The path inside the record is unknown here; the store's field path is in the message.
        refused = EnvelopeError(Reason.LEDGER_REFUSED, f"{exc.code}: {exc}")
        rejection = build_rejection(
            refused,
            ctx,
            dlq_topic=self.dlq.topic,
            inline_limit=self.raw_inline_limit,
            dlq_value_limit=self.max_message_bytes,
        )
        [placed] = await self.send_dead_letters([rejection])
        return placed

    async def append_rejection(self, rejection: Rejection, advance: OffsetAdvance) -> list[AppendResult]:
        """Store a rejection built after the database refused its record; stop if that fails too."""
        try:
            return await self.append([rejection.draft], [advance])
        except (StaleOffsetError, *FATAL_LEDGER_ERRORS):
            raise
        except LedgerError as exc:
            ctx = rejection.context
            raise UnstorableRecordError(
                f"{ctx.topic}[{ctx.partition}] offset {ctx.offset}: the database refused the record and "
                f"then its rejection ({exc.code}: {exc.message}); stopping instead of skipping it. The "
                "dead letter was sent; fix the cause and restart to resume at this record"
            ) from exc


class CommitChain:
    """Batches handed over for commit: written strictly one after another, up to ``depth`` in flight.

    Each write waits for the one before it, so commits stay in hand-over order and each batch's
    ``from_offset`` is the previous batch's ``next_offset``. A batch behind a fenced (or failed)
    commit is never written: it was audited from positions that are no longer this member's.

    Group commit: a batch handed over while the newest one still waits its turn joins it
    (:func:`merged`, up to ``merge_records`` records), so a slow commit stage writes fewer, larger
    transactions instead of queueing more of them, and the audit stage does not wait for room.
    """

    def __init__(self, writer: BatchWriter, depth: int, merge_records: int = 0) -> None:
        """``depth`` >= 1: how many commits may be in flight or waiting their turn.

        ``merge_records``: the most records a waiting batch may grow to by joining (0: never join).
        """
        self.writer = writer
        self.depth = max(1, depth)
        self.merge_records = merge_records
        self._tasks: deque[asyncio.Task[bool]] = deque()
        self._waiting: list[PreparedBatch] = []  # the newest task's batch while it waits its turn

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def full(self) -> bool:
        """True when a new batch must wait for the oldest commit first."""
        return len(self._tasks) >= self.depth

    def join(self, prepared: PreparedBatch) -> bool:
        """Add ``prepared`` to the newest batch if that one has not started writing; False if not."""
        if not self._waiting or not self._tasks or self._tasks[-1].done():
            return False
        waiting = self._waiting[0]
        if len(waiting.outcomes) + len(prepared.outcomes) > self.merge_records:
            return False
        joined = merged(waiting, prepared)
        if joined is None:
            return False
        self._waiting[0] = joined
        return True

    def hand_over(self, prepared: PreparedBatch) -> None:
        """Queue ``prepared`` behind the commits already in flight."""
        previous = self._tasks[-1] if self._tasks else None
        holder = [prepared]
        self._waiting = holder if previous is not None else []
        self._tasks.append(asyncio.create_task(self._write_after(previous, holder)))

    async def _write_after(self, previous: asyncio.Task[bool] | None, holder: list[PreparedBatch]) -> bool:
        if previous is not None:
            try:
                if not await asyncio.shield(previous):
                    return False  # the previous batch was fenced: this one is stale too, never written
            except BaseException:  # its error (or cancellation) is raised by settle(); never write after it
                return False
            finally:
                if self._waiting is holder:
                    self._waiting = []  # from here on this batch is written as it is: nothing joins it
        return await self.writer.write(holder[0])

    async def settle(self, keep: int = 0) -> bool:
        """Wait for the oldest commits until at most ``keep`` remain; False if one was fenced.

        After a fenced commit every later one is awaited too (they write nothing), so the caller
        can re-seek with nothing in flight. A commit's error is raised here.
        """
        while len(self._tasks) > keep:
            task = self._tasks.popleft()
            try:
                ok = await task
            except BaseException:
                await self.drain()
                raise
            if not ok:
                await self.drain()
                return False
        return True

    async def drain(self) -> None:
        """Wait for every commit in flight, ignoring results (each is awaited again by no one)."""
        tasks, self._tasks = list(self._tasks), deque()
        if tasks:
            await asyncio.wait(tasks)
            for task in tasks:
                if not task.cancelled():
                    task.exception()  # retrieved: a chained batch behind a failure reports nothing new

    def unfinished(self) -> list[asyncio.Task[bool]]:
        """The commits still running or waiting their turn."""
        return [task for task in self._tasks if not task.done()]
