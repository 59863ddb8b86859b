"""Follow-up entries: ``reasoning.verified`` and ``replay.verified`` chained after a stored
submission's head (``LedgerStore.append_to_stream``), under the same append lock as
:mod:`ledger.store.append` (docs/event-store.md §4, "Follow-up entries")."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from psycopg import Cursor

from ledger.errors import InvalidDraftError
from ledger.store.append import NOTIFY_CHANNEL, _advance_offsets, _entry_canonical
from ledger.store.hashing import chain_hashes, payload_hash
from ledger.store.records import (
    ENTRY_WRITE_COLUMNS,
    FOLLOW_UP_KINDS,
    MAX_GLOBAL_SEQ_SQL,
    EntryDraft,
    OffsetAdvance,
    StoredEntry,
    StreamAppendResult,
    select_entries,
    stored_entry,
)
from ledger.translog.tree import append_entries_to_tree

__all__ = ["prepare_follow_ups", "write_follow_ups"]


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


def _copy_entries(cur: Cursor[Any], rows: Iterable[tuple[StoredEntry, str]]) -> None:
    """COPY entries without step bodies (follow-ups), each a stored entry with its canonical payload text."""
    with cur.copy(f"COPY ledger_store.entries ({ENTRY_WRITE_COLUMNS}) FROM STDIN") as copy:
        for entry, text in rows:
            copy.write_row(_entry_row(entry, text))


def _entry_row(entry: StoredEntry, text: str) -> tuple[Any, ...]:
    """An entry's ``ENTRY_WRITE_COLUMNS`` values."""
    return (entry.global_seq, entry.submission_id, entry.stream_seq, entry.kind, text, entry.payload_hash,
            entry.prev_hash, entry.entry_hash, entry.engine_version)  # fmt: skip
