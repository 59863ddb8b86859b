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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from psycopg import Cursor, sql

from engine.canonical import CanonicalizationError, dumps_canonical
from engine.merkle.rfc6962 import leaf_hash
from ledger.errors import InvalidDraftError, StaleOffsetError
from ledger.store import copy_binary, copy_text
from ledger.store.hashing import (
    CanonicalText,
    canonical_text,
    chain_hashes,
    chain_links,
    payload_hash,
    step_hash,
    submission_header,
    submission_id_for,
    submission_id_spliced,
    trace_step_text,
)
from ledger.store.records import (
    ENTRY_WRITE_COLUMNS,
    FOLLOW_UP_KINDS,
    MAX_GLOBAL_SEQ_SQL,
    STEP_WRITE_COLUMNS,
    SUBMISSION_WRITE_COLUMNS,
    AppendResult,
    ConflictRecord,
    EntryDraft,
    OffsetAdvance,
    StoredEntry,
    StreamAppendResult,
    SubmissionDraft,
    new_stored_entry,
    select_entries,
    stored_entry,
)
from ledger.translog.tree import append_entries_to_tree, extend_tree

NOTIFY_CHANNEL = "ledger_entries"
# The append lock: table-level UPDATE on the (always empty) table is needed to take it, which only
# ledger_writer and the owner hold. A reader login can hold any advisory lock key, so those are not used.
APPEND_LOCK_SQL = "LOCK TABLE ledger_store.append_lock IN EXCLUSIVE MODE"


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
        return text.plain()
    computed = trace_step_text(entry.payload) if entry.kind == "trace.step" else None
    if computed is None:
        computed = _canonical(entry.payload, f"entries[{index}].payload")
    if text is not None and computed != text:
        raise InvalidDraftError(
            "precomputed canonical text differs from the payload's", field_path=f"entries[{index}].payload"
        )
    return computed


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
    hashes = [payload_hash(text) for text in texts]
    chain = chain_links(
        submission_id, [(entry.kind, h, version) for entry, h in zip(drafts, hashes, strict=True)]
    )
    entries = tuple(
        PreparedEntry(seq, entry.kind, text, h, prev, current)
        for entry, text, h, (seq, prev, current, _) in zip(drafts, texts, hashes, chain, strict=True)
    )
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
        input_hashes_canonical=inputs_text
        if inputs_text is not None
        else _canonical(draft.input_hashes, "input_hashes"),
        entries=entries,
        step_rows=tuple(step_rows),
        copy_template=copy_binary.entries_template(
            submission_id, version, entries, {row[0]: row[1:] for row in step_rows}
        ),
        # RFC 6962 leaf of each entry: SHA-256(0x00 || the raw digest of entry_hash)
        leaves=tuple(leaf_hash(digest) for *_, digest in chain),
    )


@dataclass
class _Stored:
    submission_id: str
    input_hashes_canonical: str
    entries: tuple[StoredEntry, ...]


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
    if [entry.entry_hash for entry in stored.entries[: len(offered)]] != offered:
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


def _copy_entries(cur: Cursor[Any], rows: Iterable[tuple[StoredEntry, str]]) -> None:
    """COPY entries without step bodies (follow-ups), each a stored entry with its canonical payload text."""
    with cur.copy(f"COPY ledger_store.entries ({ENTRY_WRITE_COLUMNS}) FROM STDIN") as copy:
        for entry, text in rows:
            copy.write_row(_entry_row(entry, text))


def _entry_row(entry: StoredEntry, text: str) -> tuple[Any, ...]:
    """An entry's ``ENTRY_WRITE_COLUMNS`` values."""
    return (entry.global_seq, entry.submission_id, entry.stream_seq, entry.kind, text, entry.payload_hash,
            entry.prev_hash, entry.entry_hash, entry.engine_version)  # fmt: skip


def _copy_new(cur: Cursor[Any], new: list[tuple[PreparedSubmission, tuple[StoredEntry, ...]]]) -> None:
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
    data: bytes | str
    if cur.connection.info.encoding in ("utf-8", "ascii"):
        data = copy_binary.entries_copy_data([(s[0].global_seq, o.copy_template, len(s)) for o, s in new])
        form = " (FORMAT BINARY)"
    else:
        data = copy_text.entries_copy_data(
            [(s[0].global_seq, copy_text.entries_template(o.submission_id, o.draft.engine_version, o.entries,
              {row[0]: row[1:] for row in o.step_rows}), len(s)) for o, s in new]
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
    ``prepare_threshold=0`` would otherwise try on first use."""
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
) -> list[AppendResult]:
    """Inside the transaction, after :func:`begin_append`: write the batch, return one result per draft."""
    keys = list(dict.fromkeys(offer.draft.idempotency_key for offer in prepared))
    max_seq, stored = _load_stored(cur, keys)
    next_seq = max_seq + 1
    new: list[tuple[PreparedSubmission, tuple[StoredEntry, ...]]] = []
    pending: list[tuple[int, PreparedSubmission, _Stored, str]] = []
    results: list[AppendResult | None] = []
    for index, offer in enumerate(prepared):
        key = offer.draft.idempotency_key
        found = stored.get(key)
        if found is None:
            entries = offer.stored_entries(next_seq)
            new.append((offer, entries))
            next_seq += len(offer.entries)
            stored[key] = _Stored(offer.submission_id, offer.input_hashes_canonical, entries)
            results.append(AppendResult(key, offer.submission_id, "created", entries))
            continue
        reason = _conflict_reason(offer, found)
        if reason is None:
            results.append(AppendResult(key, found.submission_id, "existing", found.entries))
        else:
            pending.append((index, offer, found, reason))
            results.append(None)
    if new:
        _copy_new(cur, new)
        # the new entries take global_seq first..next_seq - 1 in order: leaves first - 1 onwards
        extend_tree(cur, [leaf for offer, _ in new for leaf in offer.leaves], new[0][1][0].global_seq - 1)
    for index, offer, found, reason in pending:
        conflict = _record_conflict(cur, offer, found, reason)
        results[index] = AppendResult(
            offer.draft.idempotency_key, found.submission_id, "conflict", found.entries, conflict
        )
    _advance_offsets(cur, offsets)
    if new:
        cur.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, str(next_seq - 1)))
    return [result for result in results if result is not None]


def prepare_follow_ups(entries: Sequence[EntryDraft]) -> list[tuple[str, str, str]]:
    """``(kind, payload_canonical, payload_hash)`` for entries that extend an existing chain."""
    if not entries:
        raise InvalidDraftError("nothing to append", field_path="entries")
    out = []
    for index, entry in enumerate(entries):
        if entry.kind not in FOLLOW_UP_KINDS:
            raise InvalidDraftError(
                f"only {FOLLOW_UP_KINDS} may extend an existing chain", field_path=f"entries[{index}].kind"
            )
        text = _entry_canonical(entry, index)
        out.append((entry.kind, text, payload_hash(text)))
    return out


def write_follow_ups(
    cur: Cursor[Any],
    submission_id: str,
    prepared: Sequence[tuple[str, str, str]],
    *,
    expected_stream_seq: int,
    engine_version: str,
    offsets: Sequence[OffsetAdvance] = (),
) -> StreamAppendResult:
    """Inside the transaction, after :func:`begin_append`: chain entries after the expected head.

    Only an audited submission takes follow-ups: ``ledger verify`` reports any other kind of entry
    on a rejected or PoR-verified one (``unexpected_entry``), so none is written there."""
    cur.execute("SELECT status FROM ledger_store.submissions WHERE submission_id = %s", (submission_id,))
    row = cur.fetchone()
    if row is not None and row[0] != "audited":
        raise InvalidDraftError(
            f"submission {submission_id} is {row[0]}: only an audited submission takes follow-up entries",
            field_path="submission_id",
        )
    cur.execute(
        select_entries("submission_id = %s AND stream_seq >= %s ORDER BY stream_seq", payload=False),
        (submission_id, expected_stream_seq),
    )
    stored = [stored_entry(row) for row in cur.fetchall()]
    if not stored or stored[0].stream_seq != expected_stream_seq:
        raise InvalidDraftError(
            f"submission {submission_id} has no entry at stream_seq {expected_stream_seq}",
            field_path="expected_stream_seq",
        )
    head, after = stored[0], tuple(stored[1:])
    links = [(kind, digest, engine_version) for kind, _, digest in prepared]
    chain = chain_hashes(submission_id, links, start_seq=head.stream_seq + 1, prev_hash=head.entry_hash)
    if after:
        offered = [current for _, _, current in chain]
        if [entry.entry_hash for entry in after[: len(offered)]] == offered:
            result = StreamAppendResult("existing", submission_id, after[: len(offered)])
        else:
            result = StreamAppendResult("stale", submission_id, after)
        _advance_offsets(cur, offsets)
        return result
    cur.execute(MAX_GLOBAL_SEQ_SQL)
    row = cur.fetchone()
    first_seq = (int(row[0]) if row else 0) + 1
    created = tuple(
        StoredEntry(first_seq + i, submission_id, seq, kind, digest, prev, current, engine_version)
        for i, ((kind, _, digest), (seq, prev, current)) in enumerate(zip(prepared, chain, strict=True))
    )
    _copy_entries(cur, ((entry, text) for entry, (_, text, _) in zip(created, prepared, strict=True)))
    append_entries_to_tree(cur, created)
    _advance_offsets(cur, offsets)
    cur.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, str(created[-1].global_seq)))
    return StreamAppendResult("created", submission_id, created)
