"""The reasoning stage: a ledger-driven worker, off the audit path.

It never touches Kafka or the consumer: it reads the ledger (:func:`find_reasoning_work`),
runs :meth:`ReasoningVerifier.averify_reasoning` for at most ``concurrency`` submissions at a
time (an :class:`asyncio.Semaphore`; each verification makes at most two provider calls, one
after the other, so at most ``concurrency`` provider requests are in flight) and appends one
``reasoning.verified`` entry per submission with :func:`append_to_stream`.

Failures: provider errors are retried inside the SDK providers (bounded backoff, ``Retry-After``
honoured up to a limit); what still fails is recorded as a ``fail_closed`` result, never dropped.
With ``retry_failed`` such submissions are verified again, as a new entry with ``attempt + 1``,
once ``retry_backoff * 2**(attempt-1)`` seconds have passed, up to ``max_attempts``.

Races: two workers may verify the same submission; the second append finds the chain moved
past the head it saw and a ``reasoning.verified`` entry there, and writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from dataclasses import dataclass, field, replace

from engine.reasoning import ReasoningVerifier
from engine.version import ENGINE_VERSION
from ledger.errors import LedgerError
from ledger.reasoning.stage import (
    ReasoningRequest,
    derive_request,
    not_applicable_entry,
    result_entry,
)
from ledger.reasoning.work_queue import WorkItem, append_to_stream, find_reasoning_work
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import EntryDraft

__all__ = ["STALE_TRIES", "PassStats", "ReasoningWorker", "WorkerConfig"]

log = logging.getLogger(__name__)

# Tries per entry when other follow-ups (e.g. ``replay.verified``) move the chain head. Retrying is
# safe: a stale append wrote nothing (the store compares the head under its append lock), the entry
# does not depend on the head, and a ``reasoning.verified`` found after the head ends the loop as a
# duplicate. A plain bounded loop rather than tenacity: each try needs the head from the previous
# result and must not wait, which a retry decorator would only hide. Exhausted: LedgerError.
STALE_TRIES = 3


@dataclass(frozen=True)
class WorkerConfig:
    """How the worker runs (see the module docstring)."""

    concurrency: int = 4
    page_size: int = 100
    retry_failed: bool = False
    max_attempts: int = 3
    retry_backoff: float = 60.0
    cross_validation: bool = True

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.page_size < 1 or self.max_attempts < 1 or self.retry_backoff < 0:
            raise ValueError("concurrency, page_size and max_attempts must be >= 1, retry_backoff >= 0")


@dataclass
class PassStats:
    """What one pass did."""

    found: int = 0
    appended: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    deferred: int = 0
    errors: int = 0

    def summary(self) -> str:
        """One log line."""
        statuses = ", ".join(f"{count} {status}" for status, count in sorted(self.statuses.items()))
        return (
            f"{self.found} found, {self.appended} appended ({statuses or 'none'}), "
            f"{self.duplicates} already recorded, {self.deferred} deferred, {self.errors} errors"
        )


class ReasoningWorker:
    """Verify requested submissions and append ``reasoning.verified`` entries."""

    def __init__(
        self, store: LedgerStore, verifier: ReasoningVerifier, config: WorkerConfig | None = None
    ) -> None:
        self.store = store
        self.verifier = verifier
        self.config = config or WorkerConfig()
        self.cursor = 0
        """Low-water mark: every requested submission received at or below it is settled."""

    async def run_once(self, stop: asyncio.Event | None = None) -> PassStats:
        """One pass over everything pending now, page by page from :attr:`cursor`."""
        config = self.config
        stats = PassStats()
        high = await asyncio.to_thread(self.store.max_seq)
        semaphore = asyncio.Semaphore(config.concurrency)
        tasks: set[asyncio.Task[bool]] = set()
        outcomes: dict[int, asyncio.Task[bool]] = {}
        after = self.cursor
        while stop is None or not stop.is_set():
            page = await asyncio.to_thread(
                find_reasoning_work,
                self.store,
                after_seq=after,
                limit=config.page_size,
                retry_failed=config.retry_failed,
                max_attempts=config.max_attempts,
                retry_backoff=config.retry_backoff,
            )
            stats.found += len(page)
            for item in page:
                await semaphore.acquire()  # at most `concurrency` items in flight
                task = asyncio.create_task(self._guarded(item, stats, semaphore))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                outcomes[item.received_seq] = task
                if stop is not None and stop.is_set():
                    break
            if len(page) < config.page_size:
                break
            after = page[-1].received_seq
        if tasks:
            await asyncio.gather(*tasks)
        open_seqs = [seq for seq, task in outcomes.items() if task.result()]
        stopped_early = stop is not None and stop.is_set()
        if open_seqs:
            self.cursor = min(open_seqs) - 1
        elif not stopped_early:
            self.cursor = max(self.cursor, high)
        elif outcomes:
            self.cursor = max(self.cursor, min(outcomes) - 1)
        return stats

    async def run_forever(self, stop: asyncio.Event, poll_interval: float = 2.0) -> None:
        """Pass after pass until ``stop`` is set; a database outage is logged and waited out."""
        while not stop.is_set():
            try:
                stats = await self.run_once(stop)
                if stats.found:
                    log.info("reason-worker pass: %s", stats.summary())
            except LedgerError as exc:
                log.error("reason-worker pass failed (%s): %s", exc.code, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=poll_interval)

    # -- one submission --------------------------------------------------------------------

    async def _guarded(self, item: WorkItem, stats: PassStats, semaphore: asyncio.Semaphore) -> bool:
        """Process one item; True when it is still open (to be seen again by a later pass)."""
        try:
            return await self._process(item, stats)
        except Exception:  # a bug or an outage: keep the item open, never lose the pass
            stats.errors += 1
            log.exception("reasoning verification of %s failed", item.submission_id)
            return True
        finally:
            semaphore.release()

    def _still_open(self, status: str, attempt: int) -> bool:
        config = self.config
        return config.retry_failed and status == "fail_closed" and attempt < config.max_attempts

    async def _process(self, item: WorkItem, stats: PassStats) -> bool:
        if item.inputs_error is not None:
            # Fail closed: stored inputs the consumer's decoder refuses are never verified. The item
            # stays open and counts as an error on every pass, so it is never skipped silently.
            stats.errors += 1
            log.error(
                "stored inputs of %s fail the envelope decoder: %s", item.submission_id, item.inputs_error
            )
            return True
        if item.last_status is not None and not item.retry_ready:
            stats.deferred += 1
            return True
        attempt = item.last_attempt + 1
        request = derive_request(
            item.question,
            item.options,
            item.evaluation_variables,
            cross_validation=self.config.cross_validation,
        )
        entry = await self._entry(request, attempt, item.audit_entry_hash)
        status = str(entry.payload["status"])
        recorded = await self._append(item, entry, stats)
        if recorded:
            stats.statuses[status] += 1
        log.info(
            "%s %s attempt %d: %s",
            "reasoning.verified" if recorded else "already verified",
            item.submission_id,
            attempt,
            status,
        )
        return self._still_open(status, attempt) if recorded else self.config.retry_failed

    async def _entry(self, request: ReasoningRequest, attempt: int, audit_hash: str | None) -> EntryDraft:
        if request.applicable and request.query is not None:
            try:
                result = await self.verifier.averify_reasoning(
                    request.query, request.task(), enable_cross_validation=request.cross_validation
                )
            except (TypeError, ValueError) as exc:  # the verifier refused the task (too long, ...)
                request = replace(request, reason_code="invalid_task", message=str(exc))
            else:
                return result_entry(request, result, attempt=attempt, audit_entry_hash=audit_hash)
        return not_applicable_entry(request, attempt=attempt, audit_entry_hash=audit_hash)

    async def _append(self, item: WorkItem, entry: EntryDraft, stats: PassStats) -> bool:
        """Append at the head seen; True when this call recorded it (or an identical entry exists)."""
        head = item.head_stream_seq
        for _ in range(STALE_TRIES):
            result = await asyncio.to_thread(
                append_to_stream,
                self.store,
                item.submission_id,
                [entry],
                expected_stream_seq=head,
                engine_version=ENGINE_VERSION,
            )
            if result.status == "created":
                stats.appended += 1
                return True
            if result.status == "existing" or any(e.kind == "reasoning.verified" for e in result.entries):
                stats.duplicates += 1
                return False
            head = result.entries[-1].stream_seq  # other kinds moved the head: chain after them
        raise LedgerError(f"chain of {item.submission_id} kept moving; gave up after {STALE_TRIES} tries")
