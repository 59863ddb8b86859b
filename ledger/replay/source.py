"""Reading what replay needs from the ledger: a consistent snapshot, paged, two queries per page.

Submissions are selected in ledger order (the ``global_seq`` of their ``submission.received``
entry, through the partial index on ``(kind, global_seq)``); each page then loads, in one query
with ``= ANY(...)`` (never one round trip per row), the rows of all its submissions: the non-step
entries' payload texts and the ``trace.step`` entries' step columns (the canonical steps and
their hashes; the step entries' payload texts are not read, ``ledger verify`` checks that the
step columns and the payloads agree). Only the columns replay uses are read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import Any

from psycopg import Connection

__all__ = [
    "ReplayCase",
    "ReplaySelection",
    "Text",
    "as_text",
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


Text = str | bytes
"""A stored canonical text: its UTF-8 bytes as read from the ledger, or the string."""


def as_text(text: Text | None) -> str:
    """``text`` as a string (bytes are UTF-8: PostgreSQL's ``convert_to(..., 'UTF8')``); ValueError
    for None (a step text NULL once a tamperer dropped its column's constraint: an error outcome)."""
    if text is None:
        raise ValueError("a stored text is NULL (no canonical_step or payload_canonical)")
    return text.decode("utf-8") if isinstance(text, bytes) else text


@dataclass(frozen=True)
class ReplayCase:
    """One stored submission as replay reads it: canonical payload texts and step rows.

    The payload and step texts are :data:`Text`: their UTF-8 bytes as :func:`iter_replay_pages` reads
    them, or strings (a case made elsewhere, e.g. by the tests); replay treats both alike
    (:func:`as_text` gives the string). Picklable (plain strings, bytes and tuples), so it can be
    replayed in a worker process.
    """

    submission_id: str
    market_id: str | None
    first_seq: int
    submission_engine_version: str
    head_stream_seq: int = 0
    entry_versions: dict[str, str] = field(default_factory=dict)
    received: Text | None = None
    audit: Text | None = None
    verdict: Text | None = None
    reasoning: tuple[tuple[int, str | None], ...] = ()
    step_ids: tuple[str, ...] = ()
    step_hashes: tuple[str, ...] = ()
    step_texts: tuple[Text, ...] = ()

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


# One query per page reads every row replay compares: the non-step entries of _REPLAYED_KINDS (their
# payload texts) and the trace.step entries (their step columns; revision 0008 keeps a step's text
# on its entry row). Only the columns replay uses are read; a trace.step row's payload text is not.
_PAGE_KINDS = [*_REPLAYED_KINDS, "trace.step"]
# The payload and step texts are read as their UTF-8 bytes (``convert_to``, a ``bytea`` in the binary
# format): replay compares bytes and parses the received payload from bytes, so decoding each text
# into a ``str`` here and encoding it again there would be work for nothing. Reasoning texts are
# decoded (the reasoning replay reads text); the exact path decodes what it compares.
_PAGE_QUERY = (
    "SELECT submission_id, kind, global_seq, stream_seq, engine_version, "
    "CASE WHEN kind = 'trace.step' THEN NULL ELSE convert_to(payload_canonical, 'UTF8') END, "
    "coalesce(step_index, -1), step_id, step_hash, convert_to(canonical_step, 'UTF8') "
    "FROM ledger_store.entries WHERE submission_id = ANY(%(ids)s) AND kind = ANY(%(kinds)s) "
    "ORDER BY global_seq"
)
_Row = tuple[Any, ...]  # the columns of _PAGE_QUERY
_STEP_INDEX = itemgetter(6)  # a row's step_index, -1 for none (sorted by, in C: no call per row)
_STEP_ID, _STEP_HASH, _STEP_TEXT = itemgetter(7), itemgetter(8), itemgetter(9)


def _load_page(conn: Connection[Any], heads: list[tuple[Any, ...]]) -> list[ReplayCase]:
    ids = [head[1] for head in heads]
    rows: dict[str, list[_Row]] = {sid: [] for sid in ids}
    for row in conn.execute(_PAGE_QUERY, {"ids": ids, "kinds": _PAGE_KINDS}, binary=True).fetchall():
        rows[row[0]].append(row)
    return [
        _case(first_seq, submission_id, market_id, engine_version, rows[submission_id])
        for first_seq, submission_id, market_id, engine_version in heads
    ]


def _case(
    first_seq: int, submission_id: str, market_id: str | None, engine_version: str, rows: list[_Row]
) -> ReplayCase:
    """One submission's case from its rows (:data:`_PAGE_QUERY`, ledger order): the first entry of
    each compared kind, the reasoning entries, and the step rows in ``step_index`` order (ties in
    ledger order), as the ``trace_steps`` view gives them."""
    texts: dict[str, bytes] = {}
    versions: dict[str, str] = {}
    reasoning = []
    steps = []
    head = 0
    for row in rows:
        kind = row[1]
        if kind == "trace.step":
            steps.append(row)
            continue
        if row[3] > head:
            head = row[3]
        text = row[5]
        if kind == "reasoning.verified":
            reasoning.append((row[2], None if text is None else text.decode("utf-8")))
        elif kind != "replay.verified":
            versions.setdefault(kind, row[4])
            texts.setdefault(kind, text)
    steps.sort(key=_STEP_INDEX)  # already in order unless the rows were tampered with: linear then
    return ReplayCase(
        submission_id=submission_id,
        market_id=market_id,
        first_seq=first_seq,
        submission_engine_version=engine_version,
        head_stream_seq=head,
        entry_versions=versions,
        received=texts.get("submission.received"),
        audit=texts.get("audit.completed"),
        verdict=texts.get("verdict.issued"),
        reasoning=tuple(reasoning),
        step_ids=tuple(map(_STEP_ID, steps)),
        step_hashes=tuple(map(_STEP_HASH, steps)),
        step_texts=tuple(map(_STEP_TEXT, steps)),
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
