"""The independent verifier: checks signed checkpoints and proofs without the database.

Given the log's public key, an auditor feeds :class:`LogAuditor` signed checkpoints, inclusion and
consistency bundles (:mod:`ledger.translog.bundles`) and, optionally, the exported entries. It

* verifies every checkpoint's Ed25519 signature and format, and that all share one origin;
* rejects two checkpoints of one size with different roots (a split view);
* checks each inclusion proof: the entry's hashes recomputed from its columns, its leaf hash, its
  index (``global_seq - 1``) and the audit path up to a *signed* root;
* checks each consistency proof between two *signed* roots;
* recomputes the tree from exported entries and compares its root at every checkpoint size;
* requires every checkpoint to be proven a prefix of the newest one (by consistency proofs or by
  the recomputed entries), so the operator cannot have rewritten history between checkpoints.

Every check is total: malformed input becomes a failed :class:`Finding` naming what is wrong,
never an exception. Imports nothing that touches a database.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from engine.merkle.rfc6962 import (
    Frontier,
    empty_root,
    root_from_leaf_hashes,
    verify_consistency,
    verify_inclusion,
)
from ledger.translog.bundles import CONSISTENCY_FORMAT, INCLUSION_FORMAT
from ledger.translog.leaves import EntryCheckError, entry_leaf_hash, hash_from_hex, recompute_entry_hash
from ledger.translog.note import Checkpoint, NoteError, open_checkpoint

__all__ = ["AuditReport", "Finding", "LogAuditor"]

_MAX_PATH = 130


@dataclass(frozen=True)
class Finding:
    """One check: ``ok`` or not, what was checked (``subject``) and what was found."""

    ok: bool
    subject: str
    message: str

    def render(self) -> str:
        """``OK   subject: message`` or ``FAIL subject: message``."""
        return f"{'OK  ' if self.ok else 'FAIL'} {self.subject}: {self.message}"


@dataclass
class AuditReport:
    """All findings of an audit, in the order the checks ran."""

    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when at least one check ran and none failed."""
        return bool(self.findings) and all(f.ok for f in self.findings)

    @property
    def failures(self) -> list[Finding]:
        """The failed findings."""
        return [f for f in self.findings if not f.ok]

    def render(self) -> str:
        """One line per finding and a summary line."""
        lines = [f.render() for f in self.findings]
        failed = len(self.failures)
        if not self.findings:
            lines.append("audit FAILED: nothing was checked")
        elif failed:
            lines.append(f"audit FAILED: {failed} of {len(self.findings)} checks failed")
        else:
            lines.append(f"audit passed: {len(self.findings)} checks")
        return "\n".join(lines)


def _split(n: int) -> int:
    """The largest power of two below ``n`` (``n >= 2``): where RFC 6962 splits a tree of ``n`` leaves."""
    return 1 << ((n - 1).bit_length() - 1)


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """Leaf ranges ``[start, end)`` of the nodes of an inclusion proof, in proof order (leaf upwards)."""
    ranges: list[tuple[int, int]] = []
    start, end = 0, size
    while end - start > 1:
        mid = start + _split(end - start)
        if index < mid:
            ranges.append((mid, end))
            end = mid
        else:
            ranges.append((start, mid))
            start = mid
    return ranges[::-1]


def consistency_ranges(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """Leaf ranges of the nodes of a consistency proof ``old_size -> new_size``, in proof order."""
    if old_size in (0, new_size):
        return []
    ranges: list[tuple[int, int]] = []
    start, end, remaining, complete = 0, new_size, old_size, True
    while remaining != end - start:
        mid = start + _split(end - start)
        if remaining <= mid - start:
            ranges.append((mid, end))
            end = mid
        else:
            ranges.append((start, mid))
            remaining -= mid - start
            start, complete = mid, False
    if not complete:
        ranges.append((start, end))
    return ranges[::-1]


def narrow_first_bad(
    leaves: list[bytes], size: int, good_prefix: int, proven: dict[tuple[int, int], bytes]
) -> tuple[int, int]:
    """``(lo, hi)``: 0-based bounds of the first leaf of ``leaves[:size]`` that differs from the signed tree.

    ``proven`` maps leaf ranges to hashes proven (by verified proofs) to be nodes of the signed tree
    of ``size`` leaves; ``good_prefix`` leaves are known good (an earlier checkpoint matched). A
    proven node the recomputed leaves reproduce marks its range good; one they do not contains a
    bad leaf. The first bad leaf is the first leaf not known good, and at most the last leaf not
    known good in the smallest differing range (the whole tree differs, so one always exists).
    """
    good: list[tuple[int, int]] = [(0, good_prefix)]
    differing: list[tuple[int, int]] = [(0, size)]
    for (start, end), value in proven.items():
        if not 0 <= start < end <= size:
            continue
        if root_from_leaf_hashes(leaves[start:end]) == value:
            good.append((start, end))
        else:
            differing.append((start, end))

    def is_good(index: int) -> bool:
        return any(start <= index < end for start, end in good)

    lo = good_prefix
    while lo < size and is_good(lo):
        lo += 1
    hi = size - 1
    for start, end in differing:
        last = end - 1
        while last >= start and is_good(last):
            last -= 1
        if start <= last < hi:
            hi = last
    return lo, max(lo, hi)


class _Reject(Exception):
    """A check failed; the message says why."""


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _Reject(f"{what} must be a non-negative integer, got {value!r:.60}")
    return value


def _hash(value: object, what: str) -> bytes:
    try:
        return hash_from_hex(value, what)
    except EntryCheckError as exc:
        raise _Reject(str(exc)) from None


def _path(value: object, what: str) -> list[bytes]:
    if not isinstance(value, list) or len(value) > _MAX_PATH:
        raise _Reject(f"{what} must be a list of at most {_MAX_PATH} hashes")
    return [_hash(item, f"{what}[{position}]") for position, item in enumerate(value)]


class LogAuditor:
    """Accumulates checkpoints and proofs for one log key and reports on them."""

    def __init__(self, public_key: Ed25519PublicKey, origin: str | None = None) -> None:
        """Trust ``public_key`` only; with ``origin`` given, only checkpoints of that log."""
        self.public_key = public_key
        self.origin = origin
        self.report = AuditReport()
        self.checkpoints: dict[int, tuple[bytes, str]] = {}  # size -> (root, where it came from)
        self._edges: set[tuple[int, int]] = set()  # (old, new): old tree proven a prefix of new
        # size -> {leaf range: hash} proven (by a verified proof) to be a node of that signed tree
        self._proven: dict[int, dict[tuple[int, int], bytes]] = {}

    def _remember(self, size: int, ranges: list[tuple[int, int]], hashes: list[bytes]) -> None:
        nodes = self._proven.setdefault(size, {})
        for key, value in zip(ranges, hashes, strict=False):
            nodes[key] = value

    # --- recording --------------------------------------------------------------------

    def _ok(self, subject: str, message: str) -> None:
        self.report.findings.append(Finding(True, subject, message))

    def _fail(self, subject: str, message: str) -> None:
        self.report.findings.append(Finding(False, subject, message))

    def fail(self, subject: str, message: str) -> None:
        """Record a failure found outside the checks here (an unreadable file, say)."""
        self._fail(subject, message)

    def _run(self, subject: str, check: Any, *args: Any) -> Any:
        try:
            return check(subject, *args)
        except _Reject as exc:
            self._fail(subject, str(exc))
        except Exception as exc:  # total: a verifier never lets malformed input escape as a traceback
            self._fail(subject, f"malformed input ({type(exc).__name__}: {exc})")
        return None

    # --- checkpoints ------------------------------------------------------------------

    def add_checkpoint(self, subject: str, note: str | bytes) -> Checkpoint | None:
        """Verify a signed checkpoint and remember its root; returns it, or None if rejected."""
        result: Checkpoint | None = self._run(subject, self._add_checkpoint, note)
        return result

    def _add_checkpoint(self, subject: str, note: str | bytes) -> Checkpoint:
        try:
            checkpoint = open_checkpoint(note, self.public_key, self.origin)
        except NoteError as exc:
            raise _Reject(f"checkpoint rejected: {exc}") from None
        if self.origin is None:
            self.origin = checkpoint.origin
        known = self.checkpoints.get(checkpoint.tree_size)
        if known is not None and known[0] != checkpoint.root_hash:
            raise _Reject(
                f"split view: tree size {checkpoint.tree_size} is signed with root {checkpoint.root_hex} "
                f"here and with root 0x{known[0].hex()} in {known[1]}"
            )
        if known is None:
            self.checkpoints[checkpoint.tree_size] = (checkpoint.root_hash, subject)
            self._ok(
                subject,
                f"signature valid; origin {checkpoint.origin}, tree size {checkpoint.tree_size}, "
                f"root {checkpoint.root_hex}, signed at {checkpoint.timestamp}",
            )
        return checkpoint

    def _signed_root(self, subject: str, size: int, root: bytes, note: object, label: str) -> None:
        """Require ``root`` at ``size`` to be the root of a verified checkpoint."""
        if size == 0:
            if root != empty_root():
                raise _Reject(f"{label} root of the empty tree must be SHA-256('')")
            return
        if note is not None:
            if not isinstance(note, str):
                raise _Reject(f"{label} checkpoint must be the signed note text")
            checkpoint = self.add_checkpoint(f"{subject} ({label} checkpoint)", note)
            if checkpoint is None:
                raise _Reject(f"{label} checkpoint is not valid (see above)")
            if checkpoint.tree_size != size or checkpoint.root_hash != root:
                raise _Reject(
                    f"{label} checkpoint is for size {checkpoint.tree_size} root {checkpoint.root_hex}, "
                    f"but the proof claims size {size} root 0x{root.hex()}"
                )
            return
        known = self.checkpoints.get(size)
        if known is None:
            raise _Reject(f"no signed checkpoint of tree size {size}: the {label} root is not anchored")
        if known[0] != root:
            raise _Reject(
                f"{label} root 0x{root.hex()} differs from the signed root 0x{known[0].hex()} of size {size}"
            )

    # --- proofs -----------------------------------------------------------------------

    def check_bundle(self, subject: str, bundle: object) -> None:
        """Check a parsed JSON bundle of either kind."""
        if not isinstance(bundle, dict):
            self._fail(subject, "a proof bundle must be a JSON object")
        elif bundle.get("format") == INCLUSION_FORMAT:
            self._run(subject, self._check_inclusion, bundle)
        elif bundle.get("format") == CONSISTENCY_FORMAT:
            self._run(subject, self._check_consistency, bundle)
        else:
            self._fail(subject, f"unknown bundle format {bundle.get('format')!r:.80}")

    def _check_inclusion(self, subject: str, bundle: dict[str, Any]) -> None:
        entry = bundle.get("entry")
        try:
            entry_hash = recompute_entry_hash(entry) if isinstance(entry, dict) else None
        except EntryCheckError as exc:
            raise _Reject(f"entry rejected: {exc}") from None
        if entry_hash is None or not isinstance(entry, dict):
            raise _Reject("inclusion bundle lacks its entry object")
        index = _int(bundle.get("leaf_index"), "leaf_index")
        size = _int(bundle.get("tree_size"), "tree_size")
        leaf = _hash(bundle.get("leaf_hash"), "leaf_hash")
        root = _hash(bundle.get("root_hash"), "root_hash")
        path = _path(bundle.get("inclusion_path"), "inclusion_path")
        where = f"entry global_seq {entry['global_seq']} (submission {entry['submission_id']})"
        if index != entry["global_seq"] - 1:
            raise _Reject(f"leaf_index {index} is not global_seq - 1 for {where}")
        if leaf != entry_leaf_hash(entry_hash):
            raise _Reject(f"leaf_hash 0x{leaf.hex()} is not SHA-256(0x00 || entry_hash) for {where}")
        self._signed_root(subject, size, root, bundle.get("checkpoint"), "tree")
        if not verify_inclusion(leaf, index, size, path, root):
            raise _Reject(f"inclusion path does not lead from leaf {index} to the signed root of size {size}")
        self._remember(size, [(index, index + 1), *inclusion_ranges(index, size)], [leaf, *path])
        self._ok(subject, f"{where} is leaf {index} of the signed tree of size {size}")

    def _check_consistency(self, subject: str, bundle: dict[str, Any]) -> None:
        old_size = _int(bundle.get("old_size"), "old_size")
        new_size = _int(bundle.get("new_size"), "new_size")
        old_root = _hash(bundle.get("old_root"), "old_root")
        new_root = _hash(bundle.get("new_root"), "new_root")
        path = _path(bundle.get("consistency_path"), "consistency_path")
        if old_size > new_size:
            raise _Reject(f"old_size {old_size} is larger than new_size {new_size}")
        self._signed_root(subject, old_size, old_root, bundle.get("old_checkpoint"), "old")
        self._signed_root(subject, new_size, new_root, bundle.get("new_checkpoint"), "new")
        if not verify_consistency(old_size, new_size, old_root, new_root, path):
            raise _Reject(f"consistency proof from size {old_size} to size {new_size} does not verify")
        self._edges.add((old_size, new_size))
        ranges = consistency_ranges(old_size, new_size)
        self._remember(new_size, ranges, path)
        old_nodes = [(key, value) for key, value in zip(ranges, path, strict=False) if key[1] <= old_size]
        self._remember(old_size, [key for key, _ in old_nodes], [value for _, value in old_nodes])
        self._ok(subject, f"tree of size {old_size} is a prefix of the tree of size {new_size}")

    # --- exported entries -------------------------------------------------------------

    def check_entries(self, subject: str, lines: Iterable[str | bytes]) -> None:
        """Recompute the tree from exported entries (JSON lines in global_seq order)."""
        self._run(subject, self._check_entries, lines)

    def _check_entries(self, subject: str, lines: Iterable[str | bytes]) -> None:
        frontier = Frontier()
        pending = sorted(size for size in self.checkpoints if size > 0)
        matched: list[int] = []
        leaves: list[bytes] = []
        first_bad: int | None = None
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                entry_hash = recompute_entry_hash(entry)
            except (ValueError, EntryCheckError) as exc:
                raise _Reject(f"line {number}: {exc}") from None
            if entry["global_seq"] != frontier.size + 1:
                raise _Reject(
                    f"line {number}: global_seq {entry['global_seq']}, expected {frontier.size + 1}"
                )
            leaves.append(entry_leaf_hash(entry_hash))
            frontier = frontier.append(leaves[-1])
            while pending and pending[0] == frontier.size:
                size = pending.pop(0)
                if frontier.root() == self.checkpoints[size][0]:
                    matched.append(size)
                elif first_bad is None:
                    first_bad = size
                    after = matched[-1] if matched else 0
                    lo, hi = narrow_first_bad(leaves, size, after, self._proven.get(size, {}))
                    where = f"is global_seq {lo + 1}" if lo == hi else f"has global_seq in {lo + 1}..{hi + 1}"
                    self._fail(
                        subject,
                        f"entries 1..{size} hash to root {'0x' + frontier.root().hex()}, but the checkpoint "
                        f"of size {size} ({self.checkpoints[size][1]}) signed 0x{self.checkpoints[size][0].hex()}; "
                        f"the first altered entry {where} (narrowed with "
                        f"{len(self._proven.get(size, {}))} proven node(s) of that tree)",
                    )
        for size in matched[:-1]:
            self._edges.add((size, matched[-1]))
        if pending:
            self._fail(
                subject, f"entries end at global_seq {frontier.size}; checkpoint size {pending[0]} is beyond"
            )
        elif first_bad is None:
            self._ok(subject, f"{frontier.size} entries recomputed; roots match {len(matched)} checkpoint(s)")

    # --- the whole history --------------------------------------------------------------

    def check_history(self) -> None:
        """Every signed checkpoint must be proven a prefix of the newest one."""
        sizes = sorted(self.checkpoints)
        if not sizes:
            self._fail("checkpoints", "no valid signed checkpoint was given")
            return
        newest = sizes[-1]
        proven = {newest}
        changed = True
        while changed:
            changed = False
            for old, new in self._edges:
                if new in proven and old not in proven:
                    proven.add(old)
                    changed = True
        unproven = [size for size in sizes if size not in proven and size > 0]
        if unproven:
            listed = ", ".join(str(size) for size in unproven[:10])
            self._fail(
                "history",
                f"checkpoint size(s) {listed} not proven consistent with the newest checkpoint (size {newest}); "
                "supply consistency proofs or the exported entries",
            )
        else:
            self._ok(
                "history", f"{len(sizes)} checkpoint(s) form one append-only history up to size {newest}"
            )
