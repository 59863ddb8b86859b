"""Plain records exchanged with the ledger: drafts going in, stored rows coming out.

Drafts are validated on construction (:class:`~ledger.errors.InvalidDraftError`), so a malformed
batch fails before any transaction starts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal

from ledger.errors import IdempotencyConflictError, InvalidDraftError

ENTRY_KINDS: tuple[str, ...] = (
    "submission.received",
    "trace.step",
    "audit.completed",
    "reasoning.verified",
    "verdict.issued",
    "submission.rejected",
    "replay.verified",
    "por.verified",
)
SUBMISSION_STATUSES: tuple[str, ...] = ("audited", "rejected", "por_verified")
CONFLICT_REASONS: tuple[str, ...] = ("input_hashes_differ", "header_differs", "entries_differ")
FOLLOW_UP_KINDS: tuple[str, ...] = ("reasoning.verified", "replay.verified")
"""Kinds that may extend an existing submission's chain (never a second received/step/audit entry)."""

AppendStatus = Literal["created", "existing", "conflict"]
StreamAppendStatus = Literal["created", "existing", "stale"]


@dataclass(frozen=True)
class EntryDraft:
    """One entry to append: its kind and its payload (canonicalised by the store).

    ``canonical``, when set, is the payload's canonical text. A
    :class:`~ledger.store.hashing.CanonicalText` made from this very payload dict
    (:func:`~ledger.store.hashing.canonical_payload`, as the consumer's drafts do) is stored and
    hashed as it is; any other text (a plain ``str``) is only checked: the store canonicalises the
    payload and refuses the draft unless the two are equal. Leave it None for payloads from anywhere
    else. Do not change a payload once its text is made: the text is what is stored.
    """

    kind: str
    payload: dict[str, Any]
    canonical: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ENTRY_KINDS:
            raise InvalidDraftError(
                f"unknown entry kind {self.kind!r}; expected one of {ENTRY_KINDS}", field_path="kind"
            )
        if not isinstance(self.payload, dict):
            raise InvalidDraftError("payload must be a dict", field_path="payload")


@dataclass(frozen=True)
class StepDraft:
    """One trace step row; ``step_hash`` must be ``to_hex(sha256(canonical_step))``."""

    step_index: int
    step_id: str
    step_type: str
    evidence_ids: tuple[str, ...] | list[str]
    step_hash: str
    canonical_step: str


@dataclass(frozen=True)
class DeadLetterCoordinates:
    """Where the broker stored a rejection's dead-letter copy (``ledger_store.dead_letters``)."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class OperationalInfo:
    """Where and when a submission arrived. Stored in uncommitted columns, never hashed."""

    received_at: datetime | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    host: str | None = None
    dead_letter: DeadLetterCoordinates | None = None


def _same_step(payload: dict[str, Any], step: StepDraft) -> bool:
    """Whether a ``trace.step`` payload carries its step row's ``step_index`` (the same ``int``: not
    ``True`` for 1 nor ``1.0``, which would be committed as such) and ``step_hash`` (compared as
    plain strings, whatever a subclass's ``__eq__`` says)."""
    index, digest = payload.get("step_index"), payload.get("step_hash")
    return (
        type(index) is int
        and type(step.step_index) is int
        and index == step.step_index
        and isinstance(digest, str)
        and isinstance(step.step_hash, str)
        and str.__eq__(digest, step.step_hash) is True
    )


def _holds_nul(value: Any) -> bool:
    """Whether a U+0000 is in a string (or a key) anywhere inside ``value`` (dicts, lists, tuples)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(key) or _holds_nul(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(_holds_nul(item) for item in value)
    return False


def _check_header_texts(draft: SubmissionDraft) -> None:
    """Refuse header values the submission row cannot hold as hashed: ``market_id`` and ``bundle_id``
    a string or None, ``engine_version`` a string (a number would be hashed as a JSON number but
    stored as text, so verify could not recompute the hashes), none of them nor
    ``idempotency_key`` nor ``input_hashes`` (stored as jsonb) holding U+0000 (PostgreSQL refuses
    it: one draft would fail its whole batch inside the lock instead of being refused here)."""
    for name in ("market_id", "bundle_id"):
        value = getattr(draft, name)
        if value is not None and not isinstance(value, str):
            raise InvalidDraftError(f"{name} must be a string or None", field_path=name)
    if not isinstance(draft.engine_version, str):
        raise InvalidDraftError("engine_version must be a string", field_path="engine_version")
    for name in ("idempotency_key", "market_id", "bundle_id", "engine_version", "input_hashes"):
        if _holds_nul(getattr(draft, name)):
            raise InvalidDraftError("PostgreSQL text cannot hold U+0000", field_path=name)


@dataclass(frozen=True)
class SubmissionDraft:
    """An audited (or rejected) submission with all its entries and trace steps.

    The k-th ``trace.step`` entry belongs to ``steps[k]``: its payload carries that step's
    ``step_index`` and ``step_hash`` (see :func:`ledger.store.payloads.trace_step_payload`).
    """

    idempotency_key: str
    market_id: str | None
    bundle_id: str | None
    input_hashes: dict[str, Any]
    status: str
    entries: list[EntryDraft]
    steps: list[StepDraft] = field(default_factory=list)
    operational: OperationalInfo | None = None
    engine_version: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.idempotency_key, str) or not self.idempotency_key:
            raise InvalidDraftError(
                "idempotency_key must be a non-empty string", field_path="idempotency_key"
            )
        if self.status not in SUBMISSION_STATUSES:
            raise InvalidDraftError(f"status must be one of {SUBMISSION_STATUSES}", field_path="status")
        if not self.engine_version:
            raise InvalidDraftError("engine_version is required", field_path="engine_version")
        _check_header_texts(self)
        if not self.entries:
            raise InvalidDraftError("a submission needs at least one entry", field_path="entries")
        step_entries = [entry for entry in self.entries if entry.kind == "trace.step"]
        if len(step_entries) != len(self.steps):
            raise InvalidDraftError(
                f"{len(step_entries)} trace.step entries but {len(self.steps)} step rows", field_path="steps"
            )
        indexes = [step.step_index for step in self.steps]
        if len(set(indexes)) != len(indexes):
            raise InvalidDraftError("step_index values must be unique", field_path="steps")
        for position, (entry, step) in enumerate(zip(step_entries, self.steps, strict=True)):
            if not _same_step(entry.payload, step):
                raise InvalidDraftError(
                    "trace.step payload must carry the step_index and step_hash of its step row",
                    field_path=f"steps[{position}]",
                )


@dataclass(frozen=True)
class OffsetAdvance:
    """The batch consumed ``[from_offset, next_offset)`` of one partition.

    ``incarnation``: the source-log incarnation the consumer read the batch from; the append is
    refused (:class:`~ledger.errors.StaleOffsetError`) unless it is the group's current one.
    """

    group: str
    topic: str
    partition: int
    from_offset: int
    next_offset: int
    incarnation: int | None = None

    def __post_init__(self) -> None:
        if self.from_offset < 0 or self.next_offset < self.from_offset:
            raise InvalidDraftError(
                f"offsets must satisfy 0 <= from_offset ({self.from_offset}) <= next_offset ({self.next_offset})",
                field_path="offsets",
            )


@dataclass(frozen=True)
class StoredEntry:
    """An entry as committed: its positions and hashes (payload omitted)."""

    global_seq: int
    submission_id: str
    stream_seq: int
    kind: str
    payload_hash: str
    prev_hash: str
    entry_hash: str
    engine_version: str


_new_object = object.__new__
_set_attribute = object.__setattr__


def new_stored_entry(
    global_seq: int,
    submission_id: str,
    stream_seq: int,
    kind: str,
    payload_hash: str,
    prev_hash: str,
    entry_hash: str,
    engine_version: str,
) -> StoredEntry:
    """``StoredEntry(...)`` for the append path: the same frozen instance (equal, same hash, repr and
    pickle), with its ``__dict__`` set at once instead of by ``__init__``'s eight
    ``object.__setattr__`` calls (about a tenth of the append's client CPU). It has no
    ``__post_init__`` to skip."""
    entry = _new_object(StoredEntry)
    _set_attribute(
        entry,
        "__dict__",
        {
            "global_seq": global_seq,
            "submission_id": submission_id,
            "stream_seq": stream_seq,
            "kind": kind,
            "payload_hash": payload_hash,
            "prev_hash": prev_hash,
            "entry_hash": entry_hash,
            "engine_version": engine_version,
        },
    )
    return entry


def new_step_draft(
    step_index: int,
    step_id: str,
    step_type: str,
    evidence_ids: tuple[str, ...],
    step_hash: str,
    canonical_step: str,
) -> StepDraft:
    """``StepDraft(...)`` for the consumer's drafts: the same frozen instance (equal, same repr and
    pickle), with its ``__dict__`` set at once instead of by ``__init__``'s six
    ``object.__setattr__`` calls. It has no ``__post_init__`` to skip."""
    draft = _new_object(StepDraft)
    _set_attribute(
        draft,
        "__dict__",
        {
            "step_index": step_index,
            "step_id": step_id,
            "step_type": step_type,
            "evidence_ids": evidence_ids,
            "step_hash": step_hash,
            "canonical_step": canonical_step,
        },
    )
    return draft


def new_entry_draft(kind: str, payload: dict[str, Any], canonical: str | None = None) -> EntryDraft:
    """``EntryDraft(kind, payload, canonical)`` with its ``__dict__`` set at once: the same frozen record.

    Only when what ``EntryDraft.__post_init__`` checks is seen to hold here (``kind`` one of
    :data:`ENTRY_KINDS`, ``payload`` an exact ``dict``); anything else goes through the
    constructor and its checks (and is refused there).
    """
    if type(payload) is not dict or kind not in ENTRY_KINDS:
        return EntryDraft(kind, payload, canonical)
    entry = _new_object(EntryDraft)
    _set_attribute(entry, "__dict__", {"kind": kind, "payload": payload, "canonical": canonical})
    return entry


@dataclass(frozen=True)
class LedgerEntry(StoredEntry):
    """A stored entry with its exact canonical payload text (what verify hashes)."""

    payload_canonical: str = ""
    appended_at: datetime | None = None

    @property
    def payload(self) -> Any:
        """The payload parsed from the canonical text (ints and floats as written)."""
        return json.loads(self.payload_canonical)


# The SQL column lists of the stored rows, once: each in the field order of the record it fills.
_ENTRY_FIELDS = tuple(item.name for item in fields(StoredEntry))
_PAYLOAD_FIELDS = tuple(item.name for item in fields(LedgerEntry))[len(_ENTRY_FIELDS) :]


def entry_columns(alias: str | None = None, *, payload: bool = True) -> str:
    """The column list of an entry row: :class:`LedgerEntry` (``payload``) or :class:`StoredEntry`.

    ``alias`` qualifies every column (``e.global_seq, ...``) for queries that join. Read the row back
    with :func:`ledger_entry` or :func:`stored_entry`: a query that selects more puts its own columns
    first and passes the rest of the row (``ledger_entry(row[2:])``).
    """
    names = _ENTRY_FIELDS + _PAYLOAD_FIELDS if payload else _ENTRY_FIELDS
    return ", ".join(f"{alias}.{name}" if alias else name for name in names)


STORED_ENTRY_COLUMNS = entry_columns(payload=False)
LEDGER_ENTRY_COLUMNS = entry_columns()
STEP_COLUMNS = (
    "submission_id, step_index, global_seq, step_id, step_type, evidence_ids, step_hash, canonical_step"
)
# what the append transaction writes, in COPY order
ENTRY_WRITE_COLUMNS = (
    "global_seq, submission_id, stream_seq, kind, payload_canonical, payload_hash, prev_hash, entry_hash, "
    "engine_version"
)
STEP_WRITE_COLUMNS = "step_index, step_id, step_type, evidence_ids, step_hash, canonical_step"
"""The step body columns of a ``trace.step`` entry row (NULL on every other kind), in COPY order after
``ENTRY_WRITE_COLUMNS``; ``ledger_store.trace_steps`` is the view of them (``STEP_COLUMNS``)."""
SUBMISSION_WRITE_COLUMNS = (
    "submission_id, idempotency_key, market_id, bundle_id, status, input_hashes_canonical, engine_version, "
    "received_at, kafka_topic, kafka_partition, kafka_offset, host"
)
"""The submission columns the append transaction writes, in COPY order; read back with ``appended_at``."""
MAX_GLOBAL_SEQ_SQL = "SELECT coalesce(max(global_seq), 0) FROM ledger_store.entries"
"""The highest committed ``global_seq`` (0 for an empty ledger)."""


def select_entries(where: str, *, payload: bool = True) -> str:
    """``SELECT <entry_columns> FROM ledger_store.entries WHERE <where>`` (one entry row per result row)."""
    return f"SELECT {entry_columns(payload=payload)} FROM ledger_store.entries WHERE {where}"


_STORED_WIDTH = len(_ENTRY_FIELDS)
_LEDGER_WIDTH = _STORED_WIDTH + len(_PAYLOAD_FIELDS)


def stored_entry(row: Sequence[Any]) -> StoredEntry:
    """A :class:`StoredEntry` from a row that starts with ``entry_columns(payload=False)``."""
    return StoredEntry(*row[:_STORED_WIDTH])


def ledger_entry(row: Sequence[Any]) -> LedgerEntry:
    """A :class:`LedgerEntry` from a row that starts with :func:`entry_columns`."""
    return LedgerEntry(*row[:_LEDGER_WIDTH])


@dataclass(frozen=True)
class StoredStep:
    """A stored trace step row."""

    submission_id: str
    step_index: int
    global_seq: int
    step_id: str
    step_type: str
    evidence_ids: tuple[str, ...]
    step_hash: str
    canonical_step: str


def stored_step(row: Sequence[Any]) -> StoredStep:
    """A :class:`StoredStep` from a row selected with :data:`STEP_COLUMNS`."""
    return StoredStep(row[0], row[1], row[2], row[3], row[4], tuple(row[5] or ()), row[6], row[7])


@dataclass(frozen=True)
class ConflictRecord:
    """An idempotency conflict as recorded in ``ledger_store.idempotency_conflicts``."""

    conflict_id: int
    idempotency_key: str
    reason: str
    existing_submission_id: str
    offered_submission_id: str

    def to_error(self) -> IdempotencyConflictError:
        """The matching exception."""
        return IdempotencyConflictError(
            f"idempotency key {self.idempotency_key!r} is stored with different content ({self.reason}); "
            f"conflict #{self.conflict_id} recorded",
            idempotency_key=self.idempotency_key,
            reason=self.reason,
            existing_submission_id=self.existing_submission_id,
            offered_submission_id=self.offered_submission_id,
            conflict_id=self.conflict_id,
        )


@dataclass(frozen=True)
class AppendResult:
    """What happened to one submission of a batch.

    ``created``: written now. ``existing``: already stored with the same content (success, nothing
    written). ``conflict``: stored with different content; the stored entries are returned and
    the conflict was recorded.
    """

    idempotency_key: str
    submission_id: str
    status: AppendStatus
    entries: tuple[StoredEntry, ...]
    conflict: ConflictRecord | None = None

    @property
    def ok(self) -> bool:
        """True for ``created`` and ``existing``."""
        return self.status != "conflict"

    def raise_for_conflict(self) -> None:
        """Raise :class:`~ledger.errors.IdempotencyConflictError` if this was a conflict."""
        if self.conflict is not None:
            raise self.conflict.to_error()


@dataclass(frozen=True)
class StreamAppendResult:
    """Outcome of :meth:`ledger.store.ledger_store.LedgerStore.append_to_stream`.

    ``created``: written now (``entries`` are the new ones). ``existing``: the same entries already
    follow the expected head (an idempotent repeat; nothing written). ``stale``: the chain moved past
    the expected head with other entries; nothing written, ``entries`` are what follows the head.
    """

    status: StreamAppendStatus
    submission_id: str
    entries: tuple[StoredEntry, ...]


@dataclass(frozen=True)
class SubmissionRecord:
    """A stored submission with its entries (in stream order) and its trace steps."""

    submission_id: str
    idempotency_key: str
    market_id: str | None
    bundle_id: str | None
    status: str
    input_hashes: dict[str, Any]
    engine_version: str
    operational: OperationalInfo
    appended_at: datetime | None
    entries: tuple[LedgerEntry, ...]
    steps: tuple[StoredStep, ...]


# -- Column lists for replay and verify, which read many rows and none of their clock values --------
PAYLOAD_ENTRY_COLUMNS = f"{STORED_ENTRY_COLUMNS}, payload_canonical"
"""A :class:`LedgerEntry` without ``appended_at`` (the record's default None)."""
STEP_TEXT_COLUMNS = "submission_id, step_index, step_id, step_hash, canonical_step"
"""What a step row commits to and its text: the leading fields of :class:`StoredStep` that replay compares."""
