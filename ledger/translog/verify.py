"""``verify_checkpoints``: every checkpoint (stored or exported) against the stored entries.

One pass over the entries in ``global_seq`` order, O(n) time and O(log n) memory:

* each entry's ``payload_hash`` and ``entry_hash`` are recomputed from its columns;
* its leaf is recomputed from its *content* (so a rewritten payload changes the leaf even if the
  stored hashes were rewritten to match) and compared with the stored tree, as is every stored
  subtree the leaf completes;
* at every checkpoint's size the root of the recomputed leaves must equal the signed root; if not,
  the problem names the first leaf that differs from the stored tree (its ``global_seq`` and
  submission), or, when the tree was rewritten too, the range the altered entry must lie in.

Checkpoint signatures are checked with the public key given, else the one beside
``LEDGER_SIGNING_KEY`` (``PATH.pub``). An exported checkpoint is the one a database superuser
cannot rewrite: pass it in ``external_notes``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import Engine

from engine.merkle.rfc6962 import Frontier, empty_root
from ledger.translog.checkpoints import latest_checkpoint, list_checkpoints
from ledger.translog.db import Database
from ledger.translog.keys import SigningKeyError, load_private_key, load_public_key, public_key_path
from ledger.translog.leaves import EntryCheckError, check_stored_entry, entry_leaf_hash
from ledger.translog.note import NoteError, open_checkpoint, parse_checkpoint_text, parse_signed_note
from ledger.translog.tiles import TILE_HEIGHT, misplaced_tiles
from ledger.translog.tree import fetch_nodes, node_key, read_entries, tree_size

__all__ = ["LogProblem", "default_public_key", "verify_checkpoints"]

SCAN_BATCH = 5000
MAX_REPORTS_PER_CODE = 20


@dataclass(frozen=True)
class LogProblem:
    """One thing wrong with the log: a machine ``code``, a message, and where it is."""

    code: str
    message: str
    global_seq: int | None = None
    submission_id: str | None = None
    checkpoint: str | None = None
    severity: str = "error"

    def render(self) -> str:
        """``error code: message``."""
        return f"{self.severity} {self.code}: {self.message}"


@dataclass(frozen=True)
class _Target:
    label: str
    tree_size: int
    root_hash: bytes
    external: bool = False  # an exported note the caller supplied, not a row of this database


def default_public_key() -> Ed25519PublicKey | None:
    """The public key of ``LEDGER_SIGNING_KEY`` (its ``.pub`` file, else derived), or None."""
    from ledger.settings import LedgerSettings

    path = LedgerSettings().signing_key
    if path is None:
        return None
    try:
        pub = public_key_path(Path(path))
        return load_public_key(pub) if pub.is_file() else load_private_key(Path(path)).public_key()
    except SigningKeyError:
        return None


@contextmanager
def _connection(target: Database | Engine) -> Iterator[Database]:
    if not isinstance(target, Engine):
        yield target
        return
    with target.connect().execution_options(isolation_level="REPEATABLE READ") as connection:
        yield connection
        connection.rollback()


def _open(label: str, note: str, public_key: Ed25519PublicKey | None, problems: list[LogProblem]) -> Any:
    try:
        if public_key is not None:
            return open_checkpoint(note, public_key)
        return parse_checkpoint_text(parse_signed_note(note).text)
    except NoteError as exc:
        problems.append(LogProblem("checkpoint_invalid", f"{label}: {exc}", checkpoint=label))
        return None


def _collect_targets(
    connection: Database,
    public_key: Ed25519PublicKey | None,
    external_notes: Sequence[tuple[str, str]],
    problems: list[LogProblem],
) -> list[_Target]:
    targets: list[_Target] = []
    last_size = -1
    for row in list_checkpoints(connection):
        label = f"checkpoint {row.checkpoint_id}"
        opened = _open(label, row.note, public_key, problems)
        if opened is not None and (opened.tree_size, opened.root_hash, opened.origin) != (
            row.tree_size,
            row.root_hash,
            row.origin,
        ):
            problems.append(
                LogProblem(
                    "checkpoint_row_mismatch",
                    f"{label}: columns differ from the signed note",
                    checkpoint=label,
                )
            )
        if row.tree_size < last_size:
            problems.append(
                LogProblem(
                    "checkpoint_rollback",
                    f"{label} has size {row.tree_size}, below an earlier checkpoint's {last_size}",
                    checkpoint=label,
                )
            )
        last_size = max(last_size, row.tree_size)
        if opened is not None:
            targets.append(_Target(label, opened.tree_size, opened.root_hash))
    for name, note in external_notes:
        label = f"exported checkpoint {name}"
        opened = _open(label, note, public_key, problems)
        if opened is not None:
            targets.append(_Target(label, opened.tree_size, opened.root_hash, external=True))
    by_size: dict[int, _Target] = {}
    for target in targets:
        seen = by_size.setdefault(target.tree_size, target)
        if seen.root_hash != target.root_hash:
            problems.append(
                LogProblem(
                    "split_view",
                    f"{seen.label} and {target.label} sign different roots for size {target.tree_size}",
                    checkpoint=target.label,
                )
            )
    return sorted(targets, key=lambda target: target.tree_size)


class _Scan:
    """State of the pass over the entries."""

    def __init__(self, stored_size: int) -> None:
        self.stored_size = stored_size
        self.frontier = Frontier()
        self.first_bad: tuple[int, str] | None = (
            None  # (global_seq, submission) of first leaf differing from the tree
        )
        self.counts: dict[str, int] = {}
        self.problems: list[LogProblem] = []

    def report(self, problem: LogProblem) -> None:
        count = self.counts.get(problem.code, 0) + 1
        self.counts[problem.code] = count
        if count <= MAX_REPORTS_PER_CODE:
            self.problems.append(problem)

    def batch(self, connection: Database, rows: list[dict[str, Any]]) -> list[int]:
        """Append a batch of entries; returns the tree sizes reached along the way."""
        completed: list[tuple[int, str, tuple[int, int], bytes]] = []
        sizes = []
        for row in rows:
            seq, submission = int(row["global_seq"]), str(row["submission_id"])
            try:
                content_hash, mismatch = check_stored_entry(row)
                leaf = entry_leaf_hash(content_hash)
            except EntryCheckError as exc:
                mismatch, leaf = exc, b"\xff" * 32
            if mismatch is not None:
                message = f"entry global_seq {seq} (submission {submission}): {mismatch}"
                self.report(LogProblem(mismatch.code, message, seq, submission))
            self.frontier, subtrees = self.frontier.append_with_subtrees(leaf)
            if seq <= self.stored_size:  # the stored nodes: tile hashes (levels 0, 8, 16, ...)
                keys = ((node_key(s.start, s.end), s.hash) for s in subtrees)
                completed.extend(
                    (seq, submission, key, value) for key, value in keys if key[0] % TILE_HEIGHT == 0
                )
            sizes.append(self.frontier.size)
        stored = fetch_nodes(connection, [key for _, _, key, _ in completed])
        leaf_bad: set[int] = set()
        for seq, submission, key, value in completed:
            found = stored.get(key)
            if found == value:
                continue
            if key[0] == 0:
                leaf_bad.add(seq)
                if self.first_bad is None:
                    self.first_bad = (seq, submission)
                what = "is missing" if found is None else "differs from the entry's recomputed leaf"
                self.report(
                    LogProblem(
                        "leaf_mismatch",
                        f"tree leaf {seq - 1} {what}: entry global_seq {seq} (submission {submission})",
                        seq,
                        submission,
                    )
                )
            elif seq not in leaf_bad:
                self.report(
                    LogProblem(
                        "node_mismatch",
                        f"tree node level {key[0]} idx {key[1]} is missing or wrong",
                        seq,
                        submission,
                    )
                )
        return sizes


def verify_checkpoints(
    target: Database | Engine,
    *,
    public_key: Ed25519PublicKey | None = None,
    external_notes: Sequence[tuple[str, str]] = (),
) -> list[LogProblem]:
    """Check every stored checkpoint (and ``external_notes``: ``(name, note)``) against the entries."""
    key = public_key if public_key is not None else default_public_key()
    problems: list[LogProblem] = []
    with _connection(target) as connection:
        if key is None and (external_notes or latest_checkpoint(connection) is not None):
            # warn only when a signature went unchecked: with no checkpoint there is none to check
            problems.append(
                LogProblem(
                    "signatures_unchecked",
                    "no public key: checkpoint signatures were not verified",
                    severity="warning",
                )
            )
        targets = _collect_targets(connection, key, external_notes, problems)
        scan = _Scan(tree_size(connection))
        pending = list(targets)
        matched: list[_Target] = []
        # After a split view the database's own checkpoints may be re-signed: only exported ones bound a range.
        split = any(problem.code == "split_view" for problem in problems)
        while pending and pending[0].tree_size == 0:
            item = pending.pop(0)
            if item.root_hash != empty_root():
                problems.append(_root_problem(item, empty_root(), scan, matched, split))
        gap = False
        while not gap:
            rows = read_entries(connection, scan.frontier.size, SCAN_BATCH)
            if not rows:
                break
            for position, row in enumerate(rows):
                expected = scan.frontier.size + 1 + position
                if row["global_seq"] != expected:
                    problems.append(
                        LogProblem("entry_gap", f"entry global_seq {expected} is missing", expected)
                    )
                    rows, gap = rows[:position], True
                    break
            while rows:
                # scan up to the next checkpoint size, so that its root is the frontier's root
                room = pending[0].tree_size - scan.frontier.size if pending else len(rows)
                segment, rows = rows[:room], rows[room:]
                scan.batch(connection, segment)
                while pending and pending[0].tree_size == scan.frontier.size:
                    item = pending.pop(0)
                    root = scan.frontier.root()
                    if root == item.root_hash:
                        matched.append(item)
                    else:
                        problems.append(_root_problem(item, root, scan, matched, split))
        problems.extend(scan.problems)
        problems.extend(
            LogProblem("tile_layout", message) for message in misplaced_tiles(connection, scan.stored_size)
        )
        signed_size = max((target.tree_size for target in targets), default=0)
        if scan.stored_size < signed_size:
            problems.append(
                LogProblem(
                    "tree_truncated",
                    f"the tree holds {scan.stored_size} leaves, fewer than the {signed_size} a checkpoint signed",
                )
            )
        stored = scan.frontier.size
        for item in pending:
            problems.append(
                LogProblem(
                    "entries_missing",
                    f"{item.label} covers {item.tree_size} entries, but only {stored} are stored",
                    checkpoint=item.label,
                )
            )
        if scan.stored_size > stored:
            problems.append(
                LogProblem(
                    "tree_ahead",
                    f"the tree holds {scan.stored_size} leaves but only {stored} entries are stored",
                )
            )
        elif scan.stored_size < stored:
            problems.append(
                LogProblem(
                    "tree_behind",
                    f"entries {scan.stored_size + 1}..{stored} are not in the tree yet (run ledger checkpoint)",
                    severity="warning",
                )
            )
    for code, count in scan.counts.items():
        if count > MAX_REPORTS_PER_CODE:
            problems.append(
                LogProblem(code, f"{count - MAX_REPORTS_PER_CODE} more {code} problems not listed")
            )
    return problems


def _root_problem(item: _Target, root: bytes, scan: _Scan, matched: list[_Target], split: bool) -> LogProblem:
    head = f"{item.label} (size {item.tree_size}) signs root 0x{item.root_hash.hex()}, but the stored entries hash to 0x{root.hex()}"
    if scan.first_bad is not None and scan.first_bad[0] <= item.tree_size:
        seq, submission = scan.first_bad
        return LogProblem(
            "checkpoint_root_mismatch",
            f"{head}; first bad leaf: index {seq - 1}, entry global_seq {seq}, submission {submission}",
            seq,
            submission,
            item.label,
        )
    # Only a checkpoint of a smaller size that still matches bounds the range from below; one of the
    # same size that matches is the other half of a split view and bounds nothing.
    below = [m for m in matched if m.tree_size < item.tree_size and (m.external or not split)]
    bound = max(below, key=lambda m: m.tree_size) if below else None
    first = bound.tree_size + 1 if bound else 1
    why = f" ({bound.label} of size {bound.tree_size} still matches)" if bound else ""
    if split:
        why += "; the log signed two roots for one size, so only exported checkpoints bound it"
    return LogProblem(
        "checkpoint_root_mismatch",
        f"{head}; the stored tree matches the entries, so it was rewritten too: the altered entry "
        f"has global_seq in {first}..{item.tree_size}{why}",
        checkpoint=item.label,
    )
