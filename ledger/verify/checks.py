"""The checks ``ledger verify`` runs on one submission, from stored bytes only (pure, no I/O).

* **header**: the submission id is the hash of the row's committed columns;
* **entries**: ``payload_hash`` = SHA-256 of the stored canonical text, ``entry_hash`` recomputed
  (:func:`ledger.store.hashing.entry_hash`), ``prev_hash`` links, ``stream_seq`` contiguity, canonical
  payload text, engine version, and the entry kinds a submission of its status must have;
* **steps**: SHA-256 of each stored canonical step against its ``step_hash`` column, the hash its
  ``trace.step`` entry's payload commits to (the same row since revision 0008) and the audit's trace
  header; the row's columns against its payload and its text; ``step_index`` exactly ``0..n-1``;
* **roots**: ``reasoning_root`` over the recomputed step hashes, ``evidence_root`` and
  ``prompt_spec_hash`` over the stored inputs, ``verdict_hash`` over the stored verdict and
  ``por_root`` over the four, against the ``audit.completed``/``verdict.issued`` payloads, the
  ``submission.received`` payload, the submission's ``input_hashes`` and the verdict's references.

Each broken item is a :class:`Problem`; those about a PoR component carry an
:class:`engine.sentinel.Challenge` built as the Sentinel builds it (``docs/challenges.md``): a
broken step is pinpointed by leaf index with a proof in the recomputed reasoning tree.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

import orjson

from ledger.store.hashing import (
    GENESIS_PREV_HASH,
    canonical_text,
    entry_hash,
    quote,
    submission_header,
)
from ledger.store.records import FOLLOW_UP_KINDS
from ledger.verify.canonical_form import (
    MISSING,
    VIEWS,
    orjson_is_canonical,
    parse_canonical,
    top_level_value,
    view_canonical,
)
from ledger.verify.kinds import kind_problems
from ledger.verify.problems import Problem
from ledger.verify.roots import RootChecks
from ledger.verify.source import EntryRow, StepRow, SubmissionGroup

__all__ = ["Problem", "check_submission"]

_ACTION_HEAD: Final = '{"action":"'
# Which payload each part the roots are recomputed from is taken from (RootChecks.roots reads the
# prompt spec and the evidence items from submission.received, the verdict from verdict.issued).
PIECES_OF: Final[dict[str, tuple[str, ...]]] = {
    "submission.received": ("prompt_spec", "items"),
    "verdict.issued": ("verdict",),
}
_EVIDENCE_AFTER_ACTION: Final = '","evidence_ids":'


def _plain(text: str) -> bool:
    """True when ``text`` needs no JSON escape: no quote, backslash or character below U+0020
    (:mod:`ledger.store.hashing`'s rule), tested as two ``in`` (memchr) and ``str.isprintable``, which
    is False for every character below U+0020 (and for some that need no escape: False decides
    nothing, the caller's exact path does)."""
    return '"' not in text and "\\" not in text and text.isprintable()


def _text_sha256(text: str) -> str:
    """:func:`ledger.store.hashing.text_sha256` (``0x`` + SHA-256 of the UTF-8 bytes), in this compiled
    module: no interpreted call per payload and step text."""
    return "0x" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _where(entry: EntryRow | StepRow) -> dict[str, Any]:
    """Where an entry's problem is (built only when there is one)."""
    return {"global_seq": entry.global_seq, "stream_seq": entry.stream_seq, "entry_kind": entry.kind}


def _entry_hash(submission_id: str, entry: EntryRow, payload_hash: str, hashes_plain: bool = False) -> str:
    """:func:`ledger.store.hashing.entry_hash` of the entry with ``payload_hash``: the same text,
    built at once when no field needs a JSON escape, else by the ledger's function. The payload hash
    is a recomputed hex digest; ``hashes_plain``: the caller found ``submission_id`` and the entry's
    ``prev_hash`` equal to hex digests it recomputed (then they are not tested again)."""
    seq, version, kind, prev = entry.stream_seq, entry.engine_version, entry.kind, entry.prev_hash
    if (
        type(seq) is not int
        or not _plain(version + kind)
        or not (hashes_plain or _plain(prev + submission_id))
    ):
        return entry_hash(submission_id, seq, kind, payload_hash, prev, version)
    text = (
        f'{{"engine_version":"{version}","kind":"{kind}","payload_hash":"{payload_hash}",'
        f'"prev_hash":"{prev}","stream_id":"{submission_id}","stream_seq":{seq}}}'
    )
    return "0x" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _evidence_ids_written(text: str, evidence_ids: Any) -> bool:
    """True when ``text`` holds ``evidence_ids`` (a list of strings none of which needs a JSON escape)
    written as its canonical form writes it, as the top-level member right after a plain ``action``
    string (the steps the engine writes); False decides nothing (the general path does).

    One join and one slice compared: the elements hold no quote exactly when the joined text holds
    only the separators' quotes, no backslash and no character ``str.isprintable`` refuses exactly
    when no element does."""
    if type(evidence_ids) is not list or not evidence_ids or not text.startswith(_ACTION_HEAD):
        return False
    action_end = text.find('"', len(_ACTION_HEAD))  # a plain action string ends at its first quote
    if action_end < 0 or not _plain(text[len(_ACTION_HEAD) : action_end]):
        return False
    elements: list[Any] = evidence_ids
    try:
        joined = '","'.join(elements)
    except TypeError:  # an element that is not a string
        return False
    if "\\" in joined or joined.count('"') != 2 * (len(elements) - 1) or not joined.isprintable():
        return False
    written = _EVIDENCE_AFTER_ACTION + '["' + joined + '"]'
    end = action_end + len(written)
    if end >= len(text) or text[action_end:end] != written:
        return False
    after = text[end]
    return after == "," or after == "}"


def _header_text(group: SubmissionGroup) -> tuple[str, dict[str, Any]] | None:
    """The canonical text of the submission's header built around the stored ``input_hashes`` text,
    when that text is already the canonical form of a JSON object and no other field needs a JSON
    escape (then it equals ``canonical_text(submission_header(...))``), with the parsed input hashes;
    else None."""
    try:
        data = group.input_hashes_canonical.encode("utf-8")
        value = orjson.loads(data)
    except (orjson.JSONDecodeError, UnicodeEncodeError):
        return None
    if not isinstance(value, dict) or not orjson_is_canonical(value, data):
        return None
    bundle, key, market, status = group.bundle_id, group.idempotency_key, group.market_id, group.status
    fields = [key, status] + [text for text in (bundle, market) if text is not None]
    if any(type(text) is not str for text in fields) or not _plain("".join(fields)):
        return None
    text = (
        "{"
        + ("" if bundle is None else f'"bundle_id":"{bundle}",')
        + f'"idempotency_key":"{key}","input_hashes":{group.input_hashes_canonical}'
        + ("" if market is None else f',"market_id":"{market}"')
        + f',"status":"{status}"}}'
    )
    return text, value


class _Checker(RootChecks):
    """State of the checks of one submission."""

    def __init__(self, group: SubmissionGroup, verified: list[tuple[int, str]] | None = None) -> None:
        self.group = group
        self.verified = verified
        self.problems: list[Problem] = []
        self.payloads: dict[str, Any] = {}
        self.pieces: dict[str, Any] = {}
        self.step_entries = 0  # trace.step entries seen by entries()
        self.id_recomputed = False  # the submission id equals the header hash recomputed by header()
        self.market_id = group.market_id
        self.claimed_roots: dict[str, Any] = {}
        self.bundle_root: str | None = None
        self.recomputed_por: list[str] = []
        self.step_leaves = [_text_sha256(row.canonical_step) for row in group.steps]  # hashed once

    def report(self, code: str, message: str, **where: Any) -> Problem:
        problem = Problem(
            code, message, submission_id=self.group.submission_id, market_id=self.market_id, **where
        )
        self.problems.append(problem)
        return problem

    # -- header and entries ------------------------------------------------------------------

    def header(self) -> None:
        group = self.group
        fast = _header_text(group)
        if fast is not None and _text_sha256(fast[0]) == group.submission_id:
            self.payloads["input_hashes"] = fast[1]
            self.id_recomputed = True
            return
        try:  # the general path decides anything else (and names what is wrong)
            input_hashes = json.loads(group.input_hashes_canonical)
            header = submission_header(
                idempotency_key=group.idempotency_key,
                market_id=group.market_id,
                bundle_id=group.bundle_id,
                input_hashes=input_hashes,
                status=group.status,
            )
            recomputed = _text_sha256(canonical_text(header))
        except (ValueError, TypeError) as exc:
            self.report("submission_header_invalid", f"input_hashes are not a JSON object: {exc}")
            return
        self.payloads["input_hashes"] = input_hashes
        self.id_recomputed = recomputed == group.submission_id
        if not self.id_recomputed:
            self.report(
                "submission_id_mismatch",
                "the submission row's committed columns do not hash to its submission_id",
                details={"recomputed": recomputed},
            )

    def entries(self) -> None:
        group, previous = self.group, GENESIS_PREV_HASH
        recomputed_previous = GENESIS_PREV_HASH  # the previous entry's recomputed entry_hash
        for expected_seq, entry in enumerate(group.entries, start=1):
            if entry.stream_seq != expected_seq:
                self.report(
                    "stream_seq_gap",
                    f"stream_seq {expected_seq} expected, found {entry.stream_seq}",
                    **_where(entry),
                )
            recomputed_previous = self.entry(entry, previous, recomputed_previous)
            previous = entry.entry_hash
        self.structure()

    def entry(self, entry: EntryRow, previous: str, recomputed_previous: str) -> str:
        """Check one entry (``previous``: the stored entry_hash before it); returns its recomputed
        entry_hash. ``recomputed_previous`` (a hex digest) proves the prev_hash equal to it plain."""
        recomputed_payload = _text_sha256(entry.payload_canonical)
        hashes_plain = self.id_recomputed and entry.prev_hash == recomputed_previous
        recomputed_entry = _entry_hash(self.group.submission_id, entry, recomputed_payload, hashes_plain)
        if recomputed_payload == entry.payload_hash and recomputed_entry == entry.entry_hash:
            if self.verified is not None:  # the transparency log's leaf input, proven from the content
                self.verified.append((entry.global_seq, recomputed_entry))
        elif recomputed_payload != entry.payload_hash:
            details = {"stored": entry.payload_hash, "recomputed": recomputed_payload}
            self.report(
                "payload_hash_mismatch",
                "the stored payload text does not hash to payload_hash",
                details=details,
                **_where(entry),
            )
        else:
            details = {"stored": entry.entry_hash, "recomputed": recomputed_entry}
            self.report(
                "entry_hash_mismatch",
                "the entry's columns do not hash to its entry_hash",
                details=details,
                **_where(entry),
            )
        if entry.prev_hash != previous:
            details = {"prev_hash": entry.prev_hash, "expected": previous}
            self.report(
                "chain_broken",
                "prev_hash is not the previous entry's entry_hash",
                details=details,
                **_where(entry),
            )
        if entry.kind not in FOLLOW_UP_KINDS and entry.engine_version != self.group.engine_version:
            details = {"entry": entry.engine_version, "submission": self.group.engine_version}
            self.report(
                "engine_version_mismatch",
                "entry and submission engine versions differ",
                details=details,
                **_where(entry),
            )
        if entry.kind == "trace.step":
            self.step_entries += 1  # its payload is compared with its step body in steps()
        else:
            self.parse_payload(entry)
        return recomputed_entry

    def parse_payload(self, entry: EntryRow | StepRow) -> Any:
        """Parse a payload, report it if it is not canonical JSON; returns it (None if not JSON).

        A kind whose payload verify reads (:data:`ledger.verify.canonical_form.VIEWS`) is first
        scanned as text: canonical, only the members read are parsed; undecided, as any other."""
        split = entry.kind in ("submission.received", "verdict.issued")
        keep = VIEWS.get(entry.kind)
        if keep is not None:
            viewed = view_canonical(entry.payload_canonical, keep, split=split)
            if viewed is not None:
                if entry.kind not in self.payloads:
                    self.payloads[entry.kind] = viewed[0]
                    self._keep_pieces(entry.kind, viewed[1])
                return viewed[0]
        try:
            payload, canonical, pieces = parse_canonical(entry.payload_canonical, split=split)
        except ValueError as exc:
            self.report("payload_not_json", f"the payload text is not JSON: {exc}", **_where(entry))
            return None
        if not canonical:
            self.report("payload_not_canonical", "the payload text is not in canonical form", **_where(entry))
        if entry.kind not in self.payloads and entry.kind != "trace.step":
            self.payloads[entry.kind] = payload
            self._keep_pieces(entry.kind, pieces)
        return payload

    def _keep_pieces(self, kind: str, pieces: dict[str, Any]) -> None:
        """Keep the canonical bytes of the parts the roots are recomputed from, each from the one
        payload :meth:`roots` reads it from (:data:`PIECES_OF`): the prompt spec and the evidence
        items from ``submission.received``, the verdict from ``verdict.issued``. A member of the
        same name in another payload (a ``verdict.issued`` carrying an ``evidence_bundle``) must not
        stand in for them, or the roots would be recomputed from bytes other than the ones checked."""
        for name in PIECES_OF.get(kind, ()):
            if name in pieces:
                self.pieces[name] = pieces[name]

    def structure(self) -> None:
        """The entry kinds a submission of its status may have (:func:`kind_problems`)."""
        for code, message in kind_problems(self.group.status, [entry.kind for entry in self.group.entries]):
            self.report(code, message)

    # -- steps ---------------------------------------------------------------------------------

    def steps(self) -> list[int]:
        """Check every step row; returns the step indexes with a problem."""
        header = self.payloads.get("audit.completed", {}).get("trace", {})
        header_hashes = header.get("step_hashes") if isinstance(header, dict) else None
        broken: list[int] = []
        for position, row in enumerate(self.group.steps):
            if row.step_index != position:
                self.report(
                    "step_index_gap",
                    f"step_index {position} expected, found {row.step_index}",
                    step_index=row.step_index,
                )
            committed = self.committed_step(row, self.step_leaves[position])
            header_hash = (
                header_hashes[position]
                if isinstance(header_hashes, list) and position < len(header_hashes)
                else None
            )
            if self.step(row, committed, header_hash, self.step_leaves[position]):
                broken.append(position)
        if self.step_entries != len(self.group.steps):  # a trace.step entry without a (complete) body
            paired = {row.global_seq for row in self.group.steps}
            for entry in self.group.entries:
                if entry.kind == "trace.step" and entry.global_seq not in paired:
                    self.parse_payload(entry)
                    self.report(
                        "step_row_missing",
                        "a trace.step entry has no step row (its step body columns are not all set)",
                        global_seq=entry.global_seq,
                        entry_kind="trace.step",
                    )
        if isinstance(header_hashes, list) and len(header_hashes) != len(self.group.steps):
            self.report(
                "trace_header_mismatch",
                f"the audit trace lists {len(header_hashes)} step hashes, {len(self.group.steps)} rows are stored",
            )
        return broken

    def committed_step(self, row: StepRow, text_hash: str) -> dict[str, Any] | None:
        """The row's trace.step payload: compared as exact text with what the append path writes for
        the row's step columns (the common case, no parsing: None, the payload commits to exactly the
        row's columns), else parsed and checked (its members, or ``{}``). ``text_hash`` (the
        recomputed hash of its text) proves a step_hash equal to it plain."""
        step_hash, step_id, step_type = row.step_hash, row.step_id, row.step_type
        if (
            type(row.step_index) is int
            and (step_hash == text_hash or _plain(step_hash))
            and _plain(step_id + step_type)
        ):
            expected = (  # the same text as below, with no field to escape
                f'{{"step_hash":"{step_hash}","step_id":"{step_id}",'
                f'"step_index":{row.step_index},"step_type":"{step_type}"}}'
            )
        else:
            expected = (
                f'{{"step_hash":{quote(step_hash)},"step_id":{quote(step_id)},'
                f'"step_index":{row.step_index},"step_type":{quote(step_type)}}}'
            )
        if row.payload_canonical == expected:
            return None
        payload = self.parse_payload(row)
        return payload if isinstance(payload, dict) else {}

    def step(self, row: StepRow, committed: dict[str, Any] | None, header_hash: Any, text_hash: str) -> bool:
        """Check one row (``text_hash``: the SHA-256 of its text; ``committed``: its trace.step
        payload's members, None when that payload is exactly the row's own columns written canonically,
        so that it commits to the row's hash, index, id and type); True when something is wrong with it."""
        committed_hash = row.step_hash if committed is None else committed.get("step_hash")
        code = message = None
        if text_hash != row.step_hash:
            code, message = (
                "step_hash_mismatch",
                "the stored canonical step does not hash to its step_hash",
            )
        elif committed is not None and committed_hash != row.step_hash:
            code, message = (
                "step_not_committed",
                "the step row's hash differs from the one its trace.step entry commits to",
            )
        elif committed is not None and [committed.get(k) for k in ("step_index", "step_id", "step_type")] != [
            row.step_index,
            row.step_id,
            row.step_type,
        ]:
            code, message = (
                "step_entry_mismatch",
                "the trace.step entry names another step index, id or type",
            )
        audit_trace_hash = None
        if code is None and header_hash is not None and header_hash != text_hash:
            audit_trace_hash = header_hash
            code, message = (
                "trace_header_mismatch",
                "the audit.completed trace lists another hash for this step",
            )
        if code is None:
            code, message = self.step_columns(row)
        if code is None or message is None:
            return False
        details: dict[str, Any] = {
            "recomputed": text_hash,
            "step_hash_column": row.step_hash,
            "committed": committed_hash,
        }
        if audit_trace_hash is not None:
            details["audit_trace_hash"] = audit_trace_hash
        self.report(
            code,
            message,
            global_seq=row.global_seq,
            entry_kind="trace.step",
            step_index=row.step_index,
            step_id=row.step_id,
            leaf_index=row.step_index,
            details=details,
        )
        return True

    @staticmethod
    def step_columns(row: StepRow) -> tuple[str | None, str | None]:
        """The ``evidence_ids`` column against the step text (step_id and step_type are compared
        with the trace.step entry, which commits to them)."""
        if _evidence_ids_written(row.canonical_step, row.evidence_ids):
            return None, None
        try:
            evidence_ids = top_level_value(row.canonical_step, "evidence_ids")
        except ValueError:
            return "step_not_json", "the stored canonical step is not a canonical JSON object"
        found = () if evidence_ids is MISSING or evidence_ids is None else tuple(evidence_ids)
        if found != tuple(row.evidence_ids or ()):
            return "step_columns_mismatch", "the evidence_ids column differs from the step text"
        return None, None


def check_submission(group: SubmissionGroup, verified: list[tuple[int, str]] | None = None) -> list[Problem]:
    """Every problem of one submission (empty when it verifies).

    ``verified`` (if given) receives ``(global_seq, entry_hash)`` of every entry whose stored
    ``payload_hash`` and ``entry_hash`` both equal the ones recomputed from its content.
    """
    checker = _Checker(group, verified)
    checker.header()
    checker.entries()
    if group.status == "audited":
        broken = checker.steps()
        checker.roots(broken)
    elif group.steps:
        checker.report("unexpected_entry", f"a {group.status} submission has {len(group.steps)} step rows")
    return checker.problems
