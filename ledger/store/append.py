"""The append transaction: prepare drafts outside the lock, then write a whole batch under it.

Everything that does not depend on the global position (canonical text, payload hashes, the
per-submission chain) is computed by :func:`prepare` before the transaction. Inside it,
:func:`begin_append` takes the append lock (``LOCK TABLE ledger_store.append_lock IN EXCLUSIVE
MODE``, which a ``ledger_reader`` login has no privilege to take); :func:`write_batch` then reads
what is already stored for the batch's idempotency keys, assigns ``global_seq = max + 1 ...`` to the new entries, COPYs
the rows, records conflicts, advances the consumer offsets (forward only) and NOTIFYs. Because
appends are serialised and each one sees every earlier commit, the committed entries always form
a gapless prefix ``1..max(global_seq)``: a reader paging by ``global_seq`` never skips one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from psycopg import Cursor, sql

from engine.canonical import CanonicalizationError, dumps_canonical
from ledger.errors import ClientEncodingError, InvalidDraftError, LedgerDamagedError, StaleOffsetError
from ledger.store import copy_binary, copy_text
from ledger.store.hashing import (
    CanonicalText,
    canonical_text,
    chain_entries,
    step_hash,
    submission_header,
    submission_id_for,
    submission_id_spliced,
    trace_step_text,
)
from ledger.store.records import (
    ENTRY_WRITE_COLUMNS,
    MAX_GLOBAL_SEQ_SQL,
    STEP_WRITE_COLUMNS,
    SUBMISSION_WRITE_COLUMNS,
    AppendResult,
    AppendStatus,
    ConflictRecord,
    EntryDraft,
    OffsetAdvance,
    StoredEntry,
    SubmissionDraft,
    new_stored_entry,
    select_entries,
    stored_entry,
)
from ledger.translog.tree import extend_tree

NOTIFY_CHANNEL = "ledger_entries"
# The append lock: table-level UPDATE on the (always empty) table is needed to take it, which only
# ledger_writer and the owner hold. A reader login can hold any advisory lock key, so those are not used.
_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")  # the escape of U+0000, not an escaped backslash + "u0000"
_BIGINT_MAX = 2**63 - 1  # ledger_store.entries.global_seq is a bigint
APPEND_LOCK_SQL = "LOCK TABLE ledger_store.append_lock IN EXCLUSIVE MODE"
_new_prepared = tuple.__new__  # PreparedEntry from a 6-tuple without the named tuple's Python __new__


class PreparedEntry(NamedTuple):
    """An entry with its canonical text and chain hashes; only ``global_seq`` is still missing.

    A named tuple, not a frozen dataclass: ``prepare`` makes one per entry (about ten per bundle)
    and a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``.
    """

    stream_seq: int
    kind: str
    payload_canonical: str
    payload_hash: str
    prev_hash: str
    entry_hash: str


@dataclass(frozen=True)
class PreparedSubmission:
    """A draft turned into rows (minus global positions)."""

    draft: SubmissionDraft
    submission_id: str
    header: dict[str, Any]
    input_hashes_canonical: str
    entries: tuple[PreparedEntry, ...]
    step_rows: tuple[tuple[Any, ...], ...]  # (entry position, step_index, step_id, ...)
    # Built here, outside the append lock: the entries' binary COPY rows without their global_seq
    # (ledger.store.copy_binary.entries_template), and each RFC 6962 leaf hash.
    copy_template: tuple[bytes, ...] = ()
    leaves: tuple[bytes, ...] = ()

    def stored_entries(self, first_seq: int) -> tuple[StoredEntry, ...]:
        """The entries as they are stored when the first gets ``first_seq``."""
        version = self.draft.engine_version
        submission_id = self.submission_id
        return tuple(
            new_stored_entry(first_seq + i, submission_id, seq, kind, digest, prev, current, version)
            for i, (seq, kind, _, digest, prev, current) in enumerate(self.entries)
        )


def _canonical(value: Any, where: str) -> str:
    try:
        # decoded from UTF-8 bytes, so it holds no lone surrogate (canonical_text raises for one)
        return canonical_text(value)
    except CanonicalizationError as exc:
        raise InvalidDraftError(exc.reason, field_path=f"{where}{exc.path[1:]}") from exc


def _jsonb_text(text: str, where: str) -> str:
    """``text`` unless it escapes U+0000, which PostgreSQL's ``jsonb`` cannot hold: refused. The views
    parse the stored texts on read (``ledger.entries.payload`` since revision 0009,
    ``ledger.submissions.input_hashes`` since 0012): stored, such a text would fail every reader's
    query that reaches its row. The consumer's decoder refuses U+0000 already; this also covers
    drafts made elsewhere (follow-up entries, the store's API)."""
    if "\\u0000" in text and _JSON_NUL.search(text):
        raise InvalidDraftError("PostgreSQL JSON cannot hold U+0000", field_path=where)
    return text


def _entry_canonical(entry: EntryDraft, index: int) -> str:
    """The entry's canonical payload text: a trusted precomputed one as it is, else computed.

    Trusted: a :class:`~ledger.store.hashing.CanonicalText` still attached to the dict it was made
    from (see there why it need not be parsed again). Anything else given (a plain ``str``, a text
    moved to another payload, a payload changed since) is compared with the payload's canonical
    text and the draft refused unless they are equal: fail closed, never a silent substitute. A
    ``trace.step`` payload of the usual shape is written directly
    (:func:`~ledger.store.hashing.trace_step_text`, the same text).
    """
    text = entry.canonical
    if type(text) is CanonicalText and text.made_from(entry.payload):
        return _jsonb_text(text.plain(), f"entries[{index}].payload")
    computed = trace_step_text(entry.payload) if entry.kind == "trace.step" else None
    if computed is None:
        computed = _canonical(entry.payload, f"entries[{index}].payload")
    if text is not None and computed != text:
        raise InvalidDraftError(
            "precomputed canonical text differs from the payload's", field_path=f"entries[{index}].payload"
        )
    return _jsonb_text(computed, f"entries[{index}].payload")


def prepare(draft: SubmissionDraft) -> PreparedSubmission:
    """Canonicalise and hash one draft; raises :class:`InvalidDraftError` on bad content."""
    header = submission_header(
        idempotency_key=draft.idempotency_key,
        market_id=draft.market_id,
        bundle_id=draft.bundle_id,
        input_hashes=draft.input_hashes,
        status=draft.status,
    )
    try:
        inputs_text: str | None = _canonical(draft.input_hashes, "input_hashes")
    except InvalidDraftError:  # not kept: submission_id_for below raises it with the header's path
        inputs_text = None
    submission_id = submission_id_spliced(header, inputs_text) if inputs_text is not None else None
    if submission_id is None:
        try:
            submission_id = submission_id_for(header)
        except CanonicalizationError as exc:
            raise InvalidDraftError(exc.reason, field_path=f"header{exc.path[1:]}") from exc
    version = draft.engine_version
    drafts = draft.entries
    texts = [_entry_canonical(entry, i) for i, entry in enumerate(drafts)]
    # payload hashes, chain links and Merkle leaves in one compiled pass (chain_text.chain_entries)
    rows, leaves = chain_entries(submission_id, version, [entry.kind for entry in drafts], texts)
    entries = tuple([_new_prepared(PreparedEntry, row) for row in rows])
    positions = [i for i, entry in enumerate(drafts) if entry.kind == "trace.step"]
    step_rows: list[tuple[Any, ...]] = []
    for position, step in zip(positions, draft.steps, strict=True):
        if step_hash(step.canonical_step) != step.step_hash:
            raise InvalidDraftError(
                "step_hash is not sha256 of canonical_step", field_path=f"steps[{step.step_index}].step_hash"
            )
        step_rows.append(
            (position, step.step_index, step.step_id, step.step_type, list(step.evidence_ids), step.step_hash,
             step.canonical_step)
        )  # fmt: skip
    return PreparedSubmission(
        draft=draft,
        submission_id=submission_id,
        header=header,
        input_hashes_canonical=_jsonb_text(
            inputs_text if inputs_text is not None else _canonical(draft.input_hashes, "input_hashes"),
            "input_hashes",
        ),
        entries=entries,
        step_rows=tuple(step_rows),
        copy_template=copy_binary.entries_template(
            submission_id, version, entries, {row[0]: row[1:] for row in step_rows}
        ),
        # RFC 6962 leaf of each entry: SHA-256(0x00 || the raw digest of entry_hash)
        leaves=tuple(leaves),
    )


@dataclass
class _Stored:
    """What is stored (or, in this batch, being written) for one idempotency key.

    A submission written by this batch keeps its offer and first ``global_seq`` and makes its
    :class:`StoredEntry` tuple only when asked (:meth:`stored`): after the commit for its result,
    or under the lock when a later draft of the batch repeats its key (rare)."""

    submission_id: str
    input_hashes_canonical: str
    entries: tuple[StoredEntry, ...] | None
    offer: PreparedSubmission | None = None
    first_seq: int = 0

    def stored(self) -> tuple[StoredEntry, ...]:
        """The stored entries (made from the offer once, when written by this batch)."""
        if self.entries is None:
            assert self.offer is not None
            self.entries = self.offer.stored_entries(self.first_seq)
        return self.entries

    def entry_hashes(self) -> list[str]:
        """The stored entries' ``entry_hash`` values, in ``stream_seq`` order."""
        if self.entries is None and self.offer is not None:
            return [entry.entry_hash for entry in self.offer.entries]
        return [entry.entry_hash for entry in self.stored()]


class Outcome(NamedTuple):
    """One draft's outcome as decided under the lock; :func:`outcome_results` makes the results.

    ``result`` is the finished :class:`AppendResult`, or None for a submission created by this
    batch: its result (and its :class:`StoredEntry` tuple) is made from ``written``, after the
    commit, outside the append lock."""

    idempotency_key: str
    submission_id: str
    status: AppendStatus
    result: AppendResult | None
    written: _Stored | None


def outcome_results(outcomes: Sequence[Outcome]) -> list[AppendResult]:
    """The :class:`AppendResult` of each outcome, in order (call after the commit)."""
    return [
        outcome.result
        if outcome.result is not None
        else AppendResult(
            outcome.idempotency_key, outcome.submission_id, "created", _written(outcome).stored()
        )
        for outcome in outcomes
    ]


def _written(outcome: Outcome) -> _Stored:
    assert outcome.written is not None
    return outcome.written


def _load_stored(cur: Cursor[Any], keys: list[str]) -> tuple[int, dict[str, _Stored]]:
    """The highest stored ``global_seq`` and what is stored for ``keys``: one statement (one round
    trip under the lock), always one row at least, the key NULL where none is stored."""
    cur.execute(
        "SELECT m.seq, s.idempotency_key, s.submission_id, s.input_hashes_canonical "
        f"FROM ({MAX_GLOBAL_SEQ_SQL}) AS m (seq) "
        "LEFT JOIN ledger_store.submissions s ON s.idempotency_key = ANY(%s)",
        (keys,),
    )
    rows = cur.fetchall()
    max_seq = int(rows[0][0])
    heads = {key: (submission_id, canonical) for _, key, submission_id, canonical in rows if key is not None}
    if not heads:
        return max_seq, {}
    cur.execute(
        select_entries("submission_id = ANY(%s) ORDER BY submission_id, stream_seq", payload=False),
        ([submission_id for submission_id, _ in heads.values()],),
    )
    by_submission: dict[str, list[StoredEntry]] = {}
    for row in cur.fetchall():
        entry = stored_entry(row)
        by_submission.setdefault(entry.submission_id, []).append(entry)
    return max_seq, {
        key: _Stored(submission_id, canonical, tuple(by_submission.get(submission_id, ())))
        for key, (submission_id, canonical) in heads.items()
    }


def _conflict_reason(offer: PreparedSubmission, stored: _Stored) -> str | None:
    """None when the offer is the stored submission again; else why it conflicts."""
    if offer.submission_id != stored.submission_id:
        if offer.input_hashes_canonical != stored.input_hashes_canonical:
            return "input_hashes_differ"
        return "header_differs"
    offered = [entry.entry_hash for entry in offer.entries]
    if stored.entry_hashes()[: len(offered)] != offered:
        return "entries_differ"
    return None


def _operational(draft: SubmissionDraft) -> tuple[Any, ...]:
    info = draft.operational
    if info is None:
        return (None, None, None, None, None)
    return (info.received_at, info.topic, info.partition, info.offset, info.host)


def _record_conflict(
    cur: Cursor[Any], offer: PreparedSubmission, stored: _Stored, reason: str
) -> ConflictRecord:
    offered_entries = [
        {"kind": e.kind, "payload_hash": e.payload_hash, "entry_hash": e.entry_hash} for e in offer.entries
    ]
    cur.execute(
        "INSERT INTO ledger_store.idempotency_conflicts (idempotency_key, submission_id, reason, "
        "offered_submission_id, offered_header, offered_entries, offered_engine_version, received_at, "
        "kafka_topic, kafka_partition, kafka_offset, host) "
        "VALUES (%s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s, %s, %s) RETURNING conflict_id",
        (
            offer.draft.idempotency_key,
            stored.submission_id,
            reason,
            offer.submission_id,
            dumps_canonical(offer.header),
            dumps_canonical(offered_entries),
            offer.draft.engine_version,
            *_operational(offer.draft),
        ),
    )
    row = cur.fetchone()
    assert row is not None
    return ConflictRecord(
        int(row[0]), offer.draft.idempotency_key, reason, stored.submission_id, offer.submission_id
    )


def _copy_new(cur: Cursor[Any], new: list[tuple[PreparedSubmission, int]]) -> None:
    """COPY the new submissions and their entries; ``new``: each offer with its first ``global_seq``."""
    with cur.copy(f"COPY ledger_store.submissions ({SUBMISSION_WRITE_COLUMNS}) FROM STDIN") as copy:
        for offer, _ in new:
            draft = offer.draft
            copy.write_row(
                (
                    offer.submission_id,
                    draft.idempotency_key,
                    draft.market_id,
                    draft.bundle_id,
                    draft.status,
                    offer.input_hashes_canonical,
                    draft.engine_version,
                    *_operational(draft),
                )
            )
    # One row per step: a trace.step entry carries its step body (the trace_steps view reads it).
    # prepare made the binary rows; one write puts the positions in front. A binary text value is
    # read in the client encoding: for one other than UTF8 or SQL_ASCII, the text format instead
    # (psycopg encodes the text itself).
    if new and new[-1][1] + len(new[-1][0].entries) - 1 > _BIGINT_MAX:  # only a tampered max(global_seq)
        raise LedgerDamagedError(
            f"global_seq would pass {_BIGINT_MAX}: max(global_seq) was set outside the append path"
        )
    data: bytes | str
    if cur.connection.info.encoding in ("utf-8", "ascii"):
        data = copy_binary.entries_copy_data([(first, o.copy_template, len(o.entries)) for o, first in new])
        form = " (FORMAT BINARY)"
    else:
        data = copy_text.entries_copy_data(
            [(first, copy_text.entries_template(o.submission_id, o.draft.engine_version, o.entries,
              {row[0]: row[1:] for row in o.step_rows}), len(o.entries)) for o, first in new]
        ).decode("utf-8")  # fmt: skip
        form = ""
    columns = f"{ENTRY_WRITE_COLUMNS}, {STEP_WRITE_COLUMNS}"
    with cur.copy(f"COPY ledger_store.entries ({columns}) FROM STDIN{form}") as copy:
        copy.write(data)


def _advance_offsets(cur: Cursor[Any], offsets: Sequence[OffsetAdvance]) -> None:
    """Compare-and-set each partition's offset: from ``from_offset`` exactly, or create it from 0."""
    for advance in offsets:
        key = (advance.group, advance.topic, advance.partition)
        cur.execute(
            "UPDATE ledger_store.consumer_offsets SET next_offset = %s, updated_at = now() "
            "WHERE consumer_group = %s AND topic = %s AND kafka_partition = %s AND next_offset = %s "
            "RETURNING next_offset",
            (advance.next_offset, *key, advance.from_offset),
        )
        moved = cur.fetchone() is not None
        if not moved and advance.from_offset == 0:
            # A partition's first batch starts at 0 (the consumer seeks there when no row exists;
            # records below the log start fall inside the batch). The read-back decides.
            cur.execute(
                "INSERT INTO ledger_store.consumer_offsets (consumer_group, topic, kafka_partition, next_offset) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (consumer_group, topic, kafka_partition) DO NOTHING "
                "RETURNING next_offset",
                (*key, advance.next_offset),
            )
            moved = cur.fetchone() is not None
        if not moved:
            cur.execute(
                "SELECT next_offset FROM ledger_store.consumer_offsets "
                "WHERE consumer_group = %s AND topic = %s AND kafka_partition = %s",
                (advance.group, advance.topic, advance.partition),
            )
            stored = cur.fetchone()
            raise StaleOffsetError(
                f"stored next_offset {stored[0] if stored else 'none'} is not this batch's from_offset "
                f"{advance.from_offset}: another consumer advanced {advance.topic}[{advance.partition}], "
                "or the database lost commits this consumer saw acknowledged; the batch was rolled back "
                "and the consumer re-seeks from the stored offset",
                group=advance.group,
                topic=advance.topic,
                partition=advance.partition,
                from_offset=advance.from_offset,
            )


def begin_append(cur: Cursor[Any], *, role: str | None, lock_timeout: str, idle_timeout: str) -> None:
    """Session settings for this transaction, then the global append lock: one round trip.

    The statements go as one simple query (no bound parameters: the values are quoted literals),
    run in order inside the open transaction; the first that fails stops the rest. Never prepared
    (``prepare=False``): a multi-statement string cannot be, and an engine made with psycopg's
    ``prepare_threshold=0`` would otherwise try on first use.

    Refused first (:class:`~ledger.errors.ClientEncodingError`): a ``SQL_ASCII`` database with a
    client encoding other than UTF8 or SQL_ASCII, where the server stores the client's bytes
    unconverted (LATIN1 bytes, not the UTF-8 the hashes were computed over)."""
    info = cur.connection.info
    if info.encoding not in ("utf-8", "ascii") and info.parameter_status("server_encoding") == "SQL_ASCII":
        raise ClientEncodingError(
            "a SQL_ASCII database stores the client's bytes unconverted: connect with client_encoding "
            f"UTF8 to append, not {info.encoding}"
        )
    statements: list[sql.Composable] = [
        sql.SQL(
            "SELECT set_config('lock_timeout', {}, true), set_config('idle_in_transaction_session_timeout', {}, true)"
        ).format(sql.Literal(lock_timeout), sql.Literal(idle_timeout))
    ]
    if role:
        statements.append(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
    statements.append(sql.SQL(APPEND_LOCK_SQL))
    cur.execute(sql.SQL("; ").join(statements), prepare=False)


def write_batch(
    cur: Cursor[Any], prepared: Sequence[PreparedSubmission], offsets: Sequence[OffsetAdvance]
) -> list[Outcome]:
    """Inside the transaction, after :func:`begin_append`: write the batch, return one outcome per
    draft (:func:`outcome_results` makes the results; the store calls it after the commit)."""
    keys = list(dict.fromkeys(offer.draft.idempotency_key for offer in prepared))
    max_seq, stored = _load_stored(cur, keys)
    next_seq = max_seq + 1
    first_seq = next_seq
    new: list[tuple[PreparedSubmission, int]] = []
    pending: list[tuple[int, PreparedSubmission, _Stored, str]] = []
    outcomes: list[Outcome | None] = []
    for index, offer in enumerate(prepared):
        key = offer.draft.idempotency_key
        found = stored.get(key)
        if found is None:
            written = _Stored(offer.submission_id, offer.input_hashes_canonical, None, offer, next_seq)
            new.append((offer, next_seq))
            next_seq += len(offer.entries)
            stored[key] = written
            outcomes.append(Outcome(key, offer.submission_id, "created", None, written))
            continue
        reason = _conflict_reason(offer, found)
        if reason is None:
            existing = AppendResult(key, found.submission_id, "existing", found.stored())
            outcomes.append(Outcome(key, found.submission_id, "existing", existing, None))
        else:
            pending.append((index, offer, found, reason))
            outcomes.append(None)
    if new:
        _copy_new(cur, new)
        # the new entries take global_seq first_seq..next_seq - 1 in order: leaves first_seq - 1 onwards
        extend_tree(cur, [leaf for offer, _ in new for leaf in offer.leaves], first_seq - 1)
    for index, offer, found, reason in pending:
        conflict = _record_conflict(cur, offer, found, reason)
        key = offer.draft.idempotency_key
        result = AppendResult(key, found.submission_id, "conflict", found.stored(), conflict)
        outcomes[index] = Outcome(key, found.submission_id, "conflict", result, None)
    _advance_offsets(cur, offsets)
    if new:
        cur.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, str(next_seq - 1)))
    return [outcome for outcome in outcomes if outcome is not None]
