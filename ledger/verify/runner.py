"""``ledger verify``: the Sentinel over the ledger itself.

One consistent snapshot, read in pages of submissions (:mod:`ledger.verify.source`); every
submission's entries, steps and roots are recomputed from stored bytes
(:mod:`ledger.verify.checks`); then the ledger-wide facts: the global sequence is gapless, every
entry's submission row is stored and every step row belongs to a ``trace.step`` entry of its
submission. Finally, under the same snapshot, the transparency log's checkpoints are checked
against the entries (:func:`ledger.translog.verify.verify_checkpoints`), reusing the leaf of every
entry whose hashes the ledger pass proved from its content, so that each entry is read and hashed
once.

The report lists every broken item (at most :data:`MAX_PER_CODE` per code, the rest counted), with
a Sentinel challenge wherever a PoR component is involved; it is ``ok`` when no item has severity
``error``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from typing import Any, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import Engine

from engine.version import ENGINE_VERSION
from ledger.collection import fewer_collections
from ledger.store.read import auto_jobs, read_ahead, snapshot
from ledger.translog.leaves import ProvenLeaves
from ledger.verify.problems import Problem
from ledger.verify.source import (
    SubmissionGroup,
    count_submissions,
    iter_groups,
    orphan_steps,
    sequence_facts,
    unbacked_offset_moves,
    unstored_submissions,
)
from ledger.verify.workers import PageResult, checked, checked_pages, fork_is_safe

__all__ = ["MAX_PER_CODE", "VerifyReport", "run_verify"]

MAX_PER_CODE = 1000
AUTO_PARALLEL_MIN = 10_000  # submissions; below this, checking inline beats starting a fork server
AUTO_PARALLEL_MIN_FORKED = 2_000  # the same when workers are forked (they start at once)
FIRST_PAGE = 50  # submissions: one job waits for a page this small only before checking starts


@dataclass
class VerifyReport:
    """Everything ``ledger verify`` found."""

    submissions: int = 0
    entries: int = 0
    steps: int = 0
    max_global_seq: int = 0
    translog_checked: bool = False
    jobs: int = 1
    elapsed_seconds: float = 0.0
    problems: list[Problem] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, problem: Problem) -> None:
        """Count a problem; list it while its code has fewer than MAX_PER_CODE listed."""
        key = f"{problem.severity}:{problem.code}"
        self.counts[key] = self.counts.get(key, 0) + 1
        if self.counts[key] <= MAX_PER_CODE:
            self.problems.append(problem)

    @property
    def errors(self) -> int:
        """How many error-severity problems were found (listed or not)."""
        return sum(count for key, count in self.counts.items() if key.startswith("error:"))

    @property
    def warnings(self) -> int:
        """How many warnings were found."""
        return sum(count for key, count in self.counts.items() if key.startswith("warning:"))

    @property
    def ok(self) -> bool:
        """No error-severity problem."""
        return self.errors == 0

    def summary(self) -> dict[str, Any]:
        """Totals and rates."""
        elapsed = self.elapsed_seconds
        return {
            "submissions": self.submissions,
            "entries": self.entries,
            "steps": self.steps,
            "max_global_seq": self.max_global_seq,
            "errors": self.errors,
            "warnings": self.warnings,
            "translog_checked": self.translog_checked,
            "jobs": self.jobs,
            "elapsed_seconds": round(elapsed, 3),
            "entries_per_second": round(self.entries / elapsed, 1) if elapsed > 0 else 0.0,
            "steps_per_second": round(self.steps / elapsed, 1) if elapsed > 0 else 0.0,
        }

    def to_json(self) -> dict[str, Any]:
        """The whole report (see docs/replay-and-verify.md for the shape)."""
        left_out = {key: count - MAX_PER_CODE for key, count in self.counts.items() if count > MAX_PER_CODE}
        return {
            "command": "verify",
            "ok": self.ok,
            "engine_version": ENGINE_VERSION,
            "summary": self.summary(),
            "counts": dict(sorted(self.counts.items())),
            "problems": [problem.to_json() for problem in self.problems],
            "problems_left_out": left_out,
        }


def _ledger_wide(conn: Any, report: VerifyReport) -> None:
    count, maximum, gaps = sequence_facts(conn)
    report.entries, report.max_global_seq = count, maximum
    for first, last in gaps:
        where = str(first) if first == last else f"{first}..{last}"
        report.add(
            Problem(
                "global_seq_gap", f"global_seq {where} is missing", global_seq=first, details={"last": last}
            )
        )
    if count != maximum and not gaps:
        report.add(Problem("global_seq_gap", f"{count} entries but max global_seq {maximum}"))
    for submission_id, first_seq, entries in unstored_submissions(conn):
        report.add(
            Problem(
                "submission_missing",
                f"{entries} entries from global_seq {first_seq} on name submission {submission_id}, "
                "which ledger_store.submissions does not hold",
                submission_id=submission_id,
                global_seq=first_seq,
                details={"entries": entries},
            )
        )
    for submission_id, step_index, global_seq, entry_submission, entry_kind in orphan_steps(conn):
        found = "no entry" if entry_kind is None else f"a {entry_kind} entry of submission {entry_submission}"
        report.add(
            Problem(
                "step_entry_missing",
                f"step row {step_index} points at global_seq {global_seq}: {found}",
                submission_id=submission_id,
                global_seq=global_seq,
                step_index=step_index,
                leaf_index=step_index,
            )
        )


def _offset_moves(conn: Any, report: VerifyReport) -> None:
    """Forward offset moves with nothing stored from the skipped range: possibly silently skipped records."""
    moves = unbacked_offset_moves(conn)
    if moves is None:
        report.add(
            Problem(
                "offset_journal_missing",
                "ledger_store.consumer_offset_moves does not exist (schema before revision 0005): "
                "consumer offset moves cannot be checked; run `ledger migrate`",
                severity="warning",
            )
        )
        return
    for move in moves:
        start = move["from_offset"] or 0
        report.add(
            Problem(
                "offset_move_unbacked",
                f"consumer offset {move['consumer_group']}/{move['topic']}[{move['kafka_partition']}] moved "
                f"{start} -> {move['to_offset']} by login {move['moved_by']} at {move['moved_at'].isoformat()} "
                f"with no submission or conflict stored from offsets {start}..{move['to_offset'] - 1}: those "
                "records were skipped unless every one was a re-delivered duplicate; compare with the topic",
                severity="warning",
                details={
                    "move_id": move["move_id"],
                    "consumer_group": move["consumer_group"],
                    "topic": move["topic"],
                    "partition": move["kafka_partition"],
                    "from_offset": start,
                    "to_offset": move["to_offset"],
                    "moved_by": move["moved_by"],
                },
            )
        )


def _pages_then_facts(conn: Any, page_size: int, wide: VerifyReport) -> Iterator[list[SubmissionGroup]]:
    """Every page (:func:`iter_groups`), then the ledger-wide facts into ``wide`` (same connection)."""
    yield from iter_groups(conn, page_size, FIRST_PAGE)
    _ledger_wide(conn, wide)
    _offset_moves(conn, wide)


def _put_first(wide: VerifyReport, report: VerifyReport) -> None:
    """The ledger-wide facts and problems into ``report``, listed before the pages' problems (their
    codes are not the pages' codes, so each code's count and list are as if added first)."""
    report.entries, report.max_global_seq = wide.entries, wide.max_global_seq
    for key, count in wide.counts.items():
        report.counts[key] = report.counts.get(key, 0) + count
    report.problems[:0] = wide.problems


def _translog(
    conn: Any,
    report: VerifyReport,
    public_key: Ed25519PublicKey | None,
    external_notes: Sequence[tuple[str, str]],
    proven: ProvenLeaves,
) -> None:
    from ledger.translog.verify import verify_checkpoints

    problems = verify_checkpoints(conn, public_key=public_key, external_notes=external_notes, proven=proven)
    for item in problems:
        severity: Literal["error", "warning"] = "warning" if item.severity == "warning" else "error"
        details = {"checkpoint": item.checkpoint} if item.checkpoint else {}
        report.add(
            Problem(
                f"translog.{item.code}",
                item.message,
                severity=severity,
                source="translog",
                submission_id=item.submission_id,
                global_seq=item.global_seq,
                details=details,
            )
        )
    report.translog_checked = True


def run_verify(
    engine: Engine,
    *,
    translog: bool = True,
    public_key: Ed25519PublicKey | None = None,
    external_notes: Sequence[tuple[str, str]] = (),
    progress: Callable[[int, int, int, int], None] | None = None,
    jobs: int = 1,
    page_size: int = 1000,
) -> VerifyReport:
    """Verify the whole ledger; ``progress(done, total, steps_done, 0)`` after each page.

    ``jobs > 1`` checks pages in worker processes under the same snapshot
    (:mod:`ledger.verify.workers`); ``jobs <= 0`` picks one per CPU (at most 8) from
    :data:`AUTO_PARALLEL_MIN_FORKED` submissions when workers can be forked, else from
    :data:`AUTO_PARALLEL_MIN`, and checks inline below. Cyclic garbage is collected less often
    meanwhile (:func:`ledger.collection.fewer_collections`). A ``page_size`` below 1 is refused.
    """
    if page_size < 1:  # a page of 0 would end the pages after the ramp's first: a ledger left unread
        raise ValueError(f"page_size must be at least 1, not {page_size}")
    report = VerifyReport()
    started = time.perf_counter()
    # the ExitStack closes the page reader before the snapshot ends, also when checking raises
    with fewer_collections(), snapshot(engine) as conn, ExitStack() as readers:
        total = count_submissions(conn)
        if jobs <= 0:
            jobs = auto_jobs(total, AUTO_PARALLEL_MIN_FORKED if fork_is_safe() else AUTO_PARALLEL_MIN)
        report.jobs = jobs
        wide = VerifyReport()  # the ledger-wide facts, listed first
        if jobs > 1:
            _ledger_wide(conn, wide)
            _offset_moves(conn, wide)
            url = engine.url.render_as_string(hide_password=False)
            size = max(100, min(page_size, total // (jobs * 4) + 1))  # enough pages to keep workers busy
            pages: Iterable[PageResult] = readers.enter_context(closing(checked_pages(conn, url, jobs, size)))
        else:  # the reader thread queries the ledger-wide facts while this one checks the last page
            ahead = readers.enter_context(closing(read_ahead(_pages_then_facts(conn, page_size, wide))))
            pages = (checked(page) for page in ahead)
        proven = ProvenLeaves()
        for result in pages:
            if translog:
                proven.add_many(result.verified)
            report.submissions += result.submissions
            report.steps += result.steps
            for problem in result.problems:
                report.add(problem)
            if progress is not None:
                progress(report.submissions, total, report.steps, 0)
        _put_first(wide, report)
        if translog:
            _translog(conn, report, public_key, external_notes, proven)
    report.elapsed_seconds = time.perf_counter() - started
    return report
