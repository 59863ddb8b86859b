"""Reading what replay needs from the ledger: a consistent snapshot, paged, three queries per page.

Submissions are selected in ledger order (the ``global_seq`` of their ``submission.received``
entry, through the partial index on ``(kind, global_seq)``); each page then loads the non-step
entries (as :class:`~ledger.store.records.LedgerEntry`, through the store's column list) and the
stored step rows of all its submissions with ``= ANY(...)``, never one round trip per row. The trace.step entry payloads are not read: the step rows hold the
canonical steps and their hashes (``ledger verify`` checks that rows and entries agree).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import Connection

from ledger.store.records import PAYLOAD_ENTRY_COLUMNS, STEP_TEXT_COLUMNS, LedgerEntry

__all__ = [
    "ReplayCase",
    "ReplaySelection",
    "count_selected",
    "iter_replay_pages",
    "parse_since",
    "resolve_submission",
]

PAGE_SIZE = 500
_DURATION = re.compile(r"(\d+)([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_REPLAYED_KINDS = [
    "submission.received",
    "audit.completed",
    "verdict.issued",
    "reasoning.verified",
    "replay.verified",
]


@dataclass(frozen=True)
class ReplaySelection:
    """Which submissions to replay: one, one market's, or all; optionally only recent ones."""

    submission: str | None = None
    market: str | None = None
    since_seq: int | None = None
    since_time: datetime | None = None

    def describe(self) -> dict[str, Any]:
        """The selection as JSON-ready values (for reports and the replay.verified payload)."""
        return {
            "submission": self.submission,
            "market": self.market,
            "since_seq": self.since_seq,
            "since_time": None if self.since_time is None else self.since_time.isoformat(),
        }


@dataclass(frozen=True)
class ReplayCase:
    """One stored submission as replay reads it: canonical payload texts and step rows.

    Picklable (plain strings and tuples), so it can be replayed in a worker process.
    """

    submission_id: str
    market_id: str | None
    first_seq: int
    submission_engine_version: str
    head_stream_seq: int = 0
    entry_versions: dict[str, str] = field(default_factory=dict)
    received: str | None = None
    audit: str | None = None
    verdict: str | None = None
    reasoning: tuple[tuple[int, str], ...] = ()
    step_ids: tuple[str, ...] = ()
    step_hashes: tuple[str, ...] = ()
    step_texts: tuple[str, ...] = ()

    @property
    def recorded_engine_version(self) -> str:
        """The version that produced the artifacts: the audit.completed entry's, else the submission's."""
        return self.entry_versions.get("audit.completed") or self.submission_engine_version


def parse_since(text: str, *, now: datetime | None = None) -> tuple[int | None, datetime | None]:
    """``--since``: a ``global_seq`` (``1234``), a duration back from now (``30m``, ``24h``, ``7d``)
    or an ISO date/datetime (naive values are UTC). Returns ``(since_seq, since_time)``."""
    value = text.strip()
    if value.isdigit():
        return int(value), None
    match = _DURATION.fullmatch(value)
    if match:
        delta = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
        return None, (now or datetime.now(UTC)) - delta
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(
            f"--since {text!r}: expected a global_seq, a duration like 24h, or an ISO date/datetime"
        ) from exc
    return None, moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def resolve_submission(conn: Connection[Any], key: str) -> str | None:
    """The submission id for a submission id or an idempotency key, or None."""
    row = conn.execute(
        "SELECT submission_id FROM ledger_store.submissions WHERE submission_id = %(k)s OR idempotency_key = %(k)s "
        "ORDER BY submission_id = %(k)s DESC LIMIT 1",
        {"k": key},
    ).fetchone()
    return None if row is None else str(row[0])


def _where(selection: ReplaySelection) -> tuple[str, dict[str, Any]]:
    clauses = ["e.kind = 'submission.received'", "e.global_seq > %(after)s"]
    params: dict[str, Any] = {}
    if selection.submission is not None:
        clauses.append("e.submission_id = %(submission)s")
        params["submission"] = selection.submission
    if selection.market is not None:
        clauses.append("s.market_id = %(market)s")
        params["market"] = selection.market
    if selection.since_time is not None:
        clauses.append("s.appended_at >= %(since_time)s")
        params["since_time"] = selection.since_time
    return " AND ".join(clauses), params


def count_selected(conn: Connection[Any], selection: ReplaySelection) -> tuple[int, int]:
    """``(submissions, steps)`` the selection covers (for the progress bar)."""
    where, params = _where(selection)
    row = conn.execute(
        "SELECT count(*), coalesce(sum((SELECT count(*) FROM ledger_store.trace_steps t "
        "WHERE t.submission_id = e.submission_id)), 0) FROM ledger_store.entries e "
        f"JOIN ledger_store.submissions s ON s.submission_id = e.submission_id WHERE {where}",
        {**params, "after": selection.since_seq or 0},
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _load_page(conn: Connection[Any], heads: list[tuple[Any, ...]]) -> list[ReplayCase]:
    ids = [head[1] for head in heads]
    entries: dict[str, list[LedgerEntry]] = {sid: [] for sid in ids}
    for row in conn.execute(
        f"SELECT {PAYLOAD_ENTRY_COLUMNS} FROM ledger_store.entries "
        "WHERE submission_id = ANY(%(ids)s) AND kind = ANY(%(kinds)s) ORDER BY global_seq",
        {"ids": ids, "kinds": _REPLAYED_KINDS},
    ).fetchall():
        entries[row[1]].append(LedgerEntry(*row))
    steps: dict[str, list[tuple[Any, ...]]] = {sid: [] for sid in ids}
    for row in conn.execute(
        f"SELECT {STEP_TEXT_COLUMNS} FROM ledger_store.trace_steps "
        "WHERE submission_id = ANY(%(ids)s) ORDER BY submission_id, step_index",
        {"ids": ids},
    ).fetchall():
        steps[row[0]].append(row)
    return [
        _case(
            first_seq, submission_id, market_id, engine_version, entries[submission_id], steps[submission_id]
        )
        for first_seq, submission_id, market_id, engine_version in heads
    ]


def _case(
    first_seq: int,
    submission_id: str,
    market_id: str | None,
    engine_version: str,
    entries: list[LedgerEntry],
    steps: list[tuple[Any, ...]],
) -> ReplayCase:
    """One submission's case from its entries (ledger order) and step rows (:data:`STEP_TEXT_COLUMNS`)."""
    texts: dict[str, str] = {}
    versions: dict[str, str] = {}
    reasoning = []
    for entry in entries:
        if entry.kind == "reasoning.verified":
            reasoning.append((entry.global_seq, entry.payload_canonical))
        elif entry.kind != "replay.verified":
            versions.setdefault(entry.kind, entry.engine_version)
            texts.setdefault(entry.kind, entry.payload_canonical)
    return ReplayCase(
        submission_id=submission_id,
        market_id=market_id,
        first_seq=first_seq,
        submission_engine_version=engine_version,
        head_stream_seq=max((entry.stream_seq for entry in entries), default=0),
        entry_versions=versions,
        received=texts.get("submission.received"),
        audit=texts.get("audit.completed"),
        verdict=texts.get("verdict.issued"),
        reasoning=tuple(reasoning),
        step_ids=tuple(row[2] for row in steps),
        step_hashes=tuple(row[3] for row in steps),
        step_texts=tuple(row[4] for row in steps),
    )


def iter_replay_pages(
    conn: Connection[Any],
    selection: ReplaySelection,
    page_size: int = PAGE_SIZE,
    first_page: int | None = None,
) -> Iterator[list[ReplayCase]]:
    """Pages of :class:`ReplayCase` in ledger order (audited submissions only).

    ``first_page``: the size of the first page when it should differ from ``page_size`` (a small
    first page lets the caller start while the next, full page is read).
    """
    where, params = _where(selection)
    after = selection.since_seq or 0
    limit = page_size if first_page is None else max(1, first_page)
    while True:
        heads = conn.execute(
            "SELECT e.global_seq, e.submission_id, s.market_id, s.engine_version FROM ledger_store.entries e "
            f"JOIN ledger_store.submissions s ON s.submission_id = e.submission_id WHERE {where} "
            "ORDER BY e.global_seq LIMIT %(limit)s",
            {**params, "after": after, "limit": limit},
        ).fetchall()
        if not heads:
            return
        yield _load_page(conn, heads)
        if len(heads) < limit:
            return
        after = int(heads[-1][0])
        limit = page_size
