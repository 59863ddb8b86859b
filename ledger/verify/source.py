"""Reading the ledger for ``ledger verify``: submissions in pages with all their entries and steps.

Submissions are paged by ``submission_id`` (keyset on the primary key); each page loads its
entries with one range query over the page's ids (``ORDER BY submission_id, stream_seq`` on the
unique index).
Each entry row is read once: a ``trace.step`` entry carries its step body in the same row (revision
0008), so a submission's steps are its ``trace.step`` rows with a body, ordered by ``step_index``
here (:func:`steps_of`). A submission's entries need not be contiguous in ``global_seq``
(follow-up kinds are chained later), so grouping is by submission, never by position.
Ledger-wide facts (the global sequence, step bodies on entries of another kind) are single queries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import groupby
from operator import itemgetter
from typing import Any, NamedTuple

from psycopg import Connection

from ledger.store.records import PAYLOAD_ENTRY_COLUMNS, STEP_WRITE_COLUMNS

__all__ = [
    "EntryRow",
    "StepRow",
    "SubmissionGroup",
    "count_submissions",
    "iter_groups",
    "load_page",
    "orphan_steps",
    "sequence_facts",
    "steps_of",
    "unstored_submissions",
]

PAGE_SIZE = 1000


class EntryRow(NamedTuple):
    """An entry row as selected with :data:`ledger.store.records.PAYLOAD_ENTRY_COLUMNS` followed by
    :data:`ledger.store.records.STEP_WRITE_COLUMNS` (a tuple: built from the driver's row without a
    Python-level ``__init__``). The step body columns are None except on ``trace.step`` rows."""

    global_seq: int
    submission_id: str
    stream_seq: int
    kind: str
    payload_hash: str
    prev_hash: str
    entry_hash: str
    engine_version: str
    payload_canonical: str
    step_index: int | None = None
    step_id: str | None = None
    step_type: str | None = None
    evidence_ids: Sequence[str] | None = None
    step_hash: str | None = None
    canonical_step: str | None = None


class StepRow(NamedTuple):
    """A ``trace.step`` entry row whose step body columns are all set (the same columns as
    :class:`EntryRow`; ``evidence_ids`` as the driver returns it: a list)."""

    global_seq: int
    submission_id: str
    stream_seq: int
    kind: str
    payload_hash: str
    prev_hash: str
    entry_hash: str
    engine_version: str
    payload_canonical: str
    step_index: int
    step_id: str
    step_type: str
    evidence_ids: Sequence[str]
    step_hash: str
    canonical_step: str


def _names(columns: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in columns.split(","))


ENTRY_ROW_COLUMNS = f"{PAYLOAD_ENTRY_COLUMNS}, {STEP_WRITE_COLUMNS}"

# Fail at import, not with misread columns, if the store's column lists change order or content.
if not _names(ENTRY_ROW_COLUMNS) == EntryRow._fields == StepRow._fields:
    raise ImportError("ledger.verify.source: the store's column lists differ from EntryRow/StepRow")


@dataclass(frozen=True)
class SubmissionGroup:
    """A submission row with its entries (stream order) and its steps: the ``trace.step`` entries
    with a step body, in ``step_index`` order (:func:`steps_of`)."""

    submission_id: str
    idempotency_key: str
    market_id: str | None
    bundle_id: str | None
    status: str
    input_hashes_canonical: str
    engine_version: str
    entries: Sequence[EntryRow]
    steps: Sequence[StepRow]


def count_submissions(conn: Connection[Any]) -> int:
    """How many submissions there are (for the progress bar)."""
    row = conn.execute("SELECT count(*) FROM ledger_store.submissions").fetchone()
    return int(row[0]) if row else 0


def sequence_facts(conn: Connection[Any], limit: int = 20) -> tuple[int, int, list[tuple[int, int]]]:
    """``(entries, max global_seq, missing ranges)``; the ranges (first ``limit``) only when there is a gap."""
    row = conn.execute(
        "SELECT count(*), coalesce(max(global_seq), 0), coalesce(min(global_seq), 1) FROM ledger_store.entries"
    ).fetchone()
    count, maximum, minimum = (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 1)
    if count == maximum and minimum == 1:
        return count, maximum, []
    gaps = conn.execute(
        "SELECT prev + 1, global_seq - 1 FROM (SELECT global_seq, coalesce(lag(global_seq) OVER "
        "(ORDER BY global_seq), 0) AS prev FROM ledger_store.entries) s WHERE global_seq > prev + 1 "
        "ORDER BY global_seq LIMIT %(limit)s",
        {"limit": limit},
    ).fetchall()
    return count, maximum, [(int(first), int(last)) for first, last in gaps]


def orphan_steps(
    conn: Connection[Any], limit: int = 100
) -> list[tuple[str, int, int, str | None, str | None]]:
    """Step bodies on an entry that is not a ``trace.step`` (the CHECK ``ck_entries_step_columns`` refuses
    them): ``(submission_id, step_index, global_seq, entry submission, entry kind)``."""
    rows = (
        conn.execute(  # a step body sits on its entry's row (revision 0008): only another kind can be wrong
            "SELECT submission_id, step_index, global_seq, submission_id, kind FROM ledger_store.entries "
            "WHERE step_index IS NOT NULL AND kind <> 'trace.step' ORDER BY global_seq LIMIT %(limit)s",
            {"limit": limit},
        ).fetchall()
    )
    return [(str(r[0]), int(r[1]), int(r[2]), r[3], r[4]) for r in rows]


def unstored_submissions(conn: Connection[Any], limit: int = 100) -> list[tuple[str, int, int]]:
    """Submissions that entries name but ``submissions`` does not hold (a row deleted with the
    triggers bypassed: no foreign key refuses that since revision 0009, and the pages never see
    those entries): ``(submission_id, first global_seq, entries)``, first ``limit`` by global_seq."""
    rows = conn.execute(
        "SELECT e.submission_id, min(e.global_seq), count(*) FROM ledger_store.entries e WHERE NOT EXISTS "
        "(SELECT FROM ledger_store.submissions s WHERE s.submission_id = e.submission_id) "
        "GROUP BY e.submission_id ORDER BY 2 LIMIT %(limit)s",
        {"limit": limit},
    ).fetchall()
    return [(str(r[0]), int(r[1]), int(r[2])) for r in rows]


def steps_of(entries: Sequence[tuple[Any, ...]]) -> list[StepRow]:
    """The steps of a submission: its ``trace.step`` entries whose step body columns are all set, in
    ``step_index`` order (stable: a repeated index keeps stream order). A ``trace.step`` entry without
    a complete body is left out (the checks name it: ``step_row_missing``).

    ``entries``: :class:`EntryRow` values or the driver's rows they are made from (plain tuples of the
    same columns: a step is then made from the row at once, without copying an :class:`EntryRow`)."""
    # entry[3] is the kind, entry[9:15] the step body (step_index ... canonical_step: the field check
    # above holds them there); each body column tested on its own (no slice built per entry)
    steps = [
        _new_step(entry)
        for entry in entries
        if entry[14] is not None
        and entry[3] == "trace.step"
        and entry[9] is not None
        and entry[10] is not None
        and entry[11] is not None
        and entry[12] is not None
        and entry[13] is not None
    ]
    steps.sort(key=_STEP_INDEX)
    return steps


def _page(conn: Connection[Any], after: str, heads: list[tuple[Any, ...]]) -> list[SubmissionGroup]:
    # The entries of every submission id in (after, last head], in the server's order of the ids as
    # for the heads: those of the heads, and of any id no submission row holds (an entry whose row
    # was deleted: never grouped below, ``unstored_submissions`` names it). A range on the unique
    # index's first column, with no array of ids to write and match.
    # Binary results: the same Python values (text and text[] as str and lists of str, integers as
    # int) with less parsing here: integers and arrays are not read back from their text form.
    rows = (
        conn.cursor(binary=True)
        .execute(
            f"SELECT {ENTRY_ROW_COLUMNS} FROM ledger_store.entries WHERE submission_id > %(after)s "
            "AND submission_id <= %(last)s ORDER BY submission_id, stream_seq",  # sorted by the server
            {"after": after, "last": heads[-1][0]},
        )
        .fetchall()
    )
    # grouped as the driver's rows: each becomes an EntryRow, and the steps are made from the rows
    by_submission = {sid: list(group) for sid, group in groupby(rows, key=_SUBMISSION_OF_ENTRY)}
    groups = []
    for sid, key, market_id, bundle_id, status, input_hashes, version in heads:
        raw = by_submission.get(sid, ())
        found: Sequence[EntryRow] = list(map(_new_entry, raw)) if raw else ()
        groups.append(
            SubmissionGroup(
                submission_id=sid,
                idempotency_key=key,
                market_id=market_id,
                bundle_id=bundle_id,
                status=status,
                input_hashes_canonical=input_hashes,
                engine_version=version,
                entries=found,
                steps=steps_of(raw),
            )
        )
    return groups


_SUBMISSION_OF_ENTRY = itemgetter(1)
_STEP_INDEX = itemgetter(9)
# tuple.__new__ on the subclass: the row becomes the named tuple with no Python frame per row
_new_entry: Callable[[tuple[Any, ...]], EntryRow] = partial(tuple.__new__, EntryRow)
_new_step: Callable[[tuple[Any, ...]], StepRow] = partial(tuple.__new__, StepRow)


def load_page(conn: Connection[Any], after: str, page_size: int) -> list[SubmissionGroup]:
    """Up to ``page_size`` submissions with ``submission_id > after``, with their entries and steps."""
    heads = conn.execute(
        "SELECT submission_id, idempotency_key, market_id, bundle_id, status, input_hashes_canonical, "
        "engine_version FROM ledger_store.submissions WHERE submission_id > %(after)s "
        "ORDER BY submission_id LIMIT %(limit)s",
        {"after": after, "limit": page_size},
    ).fetchall()
    return _page(conn, after, heads) if heads else []


def iter_groups(
    conn: Connection[Any], page_size: int = PAGE_SIZE, first_page: int | None = None
) -> Iterator[list[SubmissionGroup]]:
    """Every submission, page by page, with its entries and steps.

    ``first_page``: the first page holds at most that many submissions and each next one twice as
    many, up to ``page_size`` (a reader ahead of its caller then makes it wait for a small page
    only, not for a whole one, before its work starts).
    """
    after = ""
    size = page_size if first_page is None else max(1, min(first_page, page_size))
    while True:
        page = load_page(conn, after, size)
        if not page:
            return
        yield page
        if len(page) < size:
            return
        after = page[-1].submission_id
        size = min(page_size, 2 * size)


def unbacked_offset_moves(conn: Connection[Any], limit: int = 100) -> list[dict[str, Any]] | None:
    """Forward moves of a consumer offset that no stored record backs (first ``limit``, in move order).

    A move of ``group/topic[partition]`` from ``A`` (NULL: a new row, read as 0) to ``B > A`` is
    backed when a submission or idempotency conflict was stored from that partition at an offset in
    ``A..B-1``. None when the journal does not exist (schema before revision 0005).
    """
    found = conn.execute("SELECT to_regclass('ledger_store.consumer_offset_moves') IS NOT NULL").fetchone()
    if not found or not found[0]:
        return None
    cursor = conn.execute(
        "SELECT m.move_id, m.consumer_group, m.topic, m.kafka_partition, m.from_offset, m.to_offset, m.moved_by, "
        "m.moved_at FROM ledger_store.consumer_offset_moves m WHERE m.to_offset > coalesce(m.from_offset, 0) "
        "AND NOT EXISTS (SELECT FROM ledger_store.submissions s WHERE s.kafka_topic = m.topic AND "
        "s.kafka_partition = m.kafka_partition AND s.kafka_offset >= coalesce(m.from_offset, 0) AND "
        "s.kafka_offset < m.to_offset) "
        "AND NOT EXISTS (SELECT FROM ledger_store.idempotency_conflicts c WHERE c.kafka_topic = m.topic AND "
        "c.kafka_partition = m.kafka_partition AND c.kafka_offset >= coalesce(m.from_offset, 0) AND "
        "c.kafka_offset < m.to_offset) ORDER BY m.move_id LIMIT %(limit)s",
        {"limit": limit},
    )
    names = [column.name for column in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
