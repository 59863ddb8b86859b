"""``verify_checkpoints``: every checkpoint (stored or exported) against the stored entries.

One pass over the entries in ``global_seq`` order, O(n) time and O(log n) memory:

* each entry's ``payload_hash`` and ``entry_hash`` are recomputed from its columns;
* its leaf is recomputed from its *content* (so a rewritten payload changes the leaf even if the
  stored hashes were rewritten to match) and compared with the stored tree, as is every stored
  subtree the leaf completes;
* at every checkpoint's size the root of the recomputed leaves must equal the signed root; if not,
  the problem names the first leaf that differs from the stored tree (its ``global_seq`` and
  submission), or, when the tree was rewritten too, the range the altered entry must lie in.

With ``proven`` (:class:`ledger.translog.leaves.ProvenLeaves`, from ``ledger verify``'s ledger pass
under the same snapshot) an entry whose hashes that pass proved from its content is not read again:
a run of consecutive proven entries is taken as one slice of their leaves (that pass read them
under this snapshot, so they exist), whole tiles of it hashed and compared as bytes, and an entry's
submission is read only when a problem names it (:mod:`ledger.translog.scan`). Every other entry
(one whose stored hashes are wrong, or that no submission row covers) is read and checked as above.

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

from engine.merkle.rfc6962 import empty_root
from ledger.translog.checkpoints import latest_checkpoint, list_checkpoints
from ledger.translog.db import Database, run_dicts
from ledger.translog.keys import SigningKeyError, load_private_key, load_public_key, public_key_path
from ledger.translog.leaves import ProvenLeaves
from ledger.translog.log_problem import LogProblem
from ledger.translog.note import NoteError, open_checkpoint, parse_checkpoint_text, parse_signed_note
from ledger.translog.scan import MAX_REPORTS_PER_CODE, Leaves, Scan
from ledger.translog.tiles import TILE_HEIGHT, misplaced_tiles
from ledger.translog.tree import ENTRIES, ENTRY_COLUMNS, read_entries, tree_size

__all__ = ["LogProblem", "default_public_key", "verify_checkpoints"]

SCAN_BATCH = 20 << TILE_HEIGHT  # whole tiles: a batch appends leaves one by one only up to a checkpoint


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


def verify_checkpoints(
    target: Database | Engine,
    *,
    public_key: Ed25519PublicKey | None = None,
    external_notes: Sequence[tuple[str, str]] = (),
    proven: ProvenLeaves | None = None,
) -> list[LogProblem]:
    """Check every stored checkpoint (and ``external_notes``: ``(name, note)``) against the entries.

    ``proven``: leaves a pass over the same snapshot proved (see the module's docstring).
    """
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
        scan = Scan(tree_size(connection), proven)
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
            remaining: Leaves | list[dict[str, Any]] | None = _proven_run(scan.frontier.size, proven)
            if remaining is None:
                rows = _read(connection, scan.frontier.size, proven)
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
                remaining = rows
            while remaining:
                # scan up to the next checkpoint size, so that its root is the frontier's root
                room = pending[0].tree_size - scan.frontier.size if pending else len(remaining)
                if isinstance(remaining, Leaves):
                    segment, remaining = remaining.split(room)
                else:
                    segment, remaining = scan.leaves_of(remaining[:room]), remaining[room:]
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


def _proven_run(after: int, proven: ProvenLeaves | None) -> Leaves | None:
    """The leaves ``proven`` holds for the entries right after ``after`` (up to :data:`SCAN_BATCH`), as
    one slice without their submissions; None when it holds none there. They are not read again: the
    ledger pass read those entries under the same snapshot, so they exist, with these leaves."""
    count = proven.run_length(after + 1, SCAN_BATCH) if proven is not None else 0
    if proven is None or count == 0:
        return None
    return Leaves(after + 1, proven.leaves(after + 1, count), None)


def _read(connection: Database, after: int, proven: ProvenLeaves | None) -> list[dict[str, Any]]:
    """The next entries after ``after``: whole rows, except for entries ``proven`` holds (their
    ``global_seq`` and submission only)."""
    if proven is None:
        return read_entries(connection, after, SCAN_BATCH)
    rows = run_dicts(
        connection,
        f"SELECT global_seq, submission_id FROM {ENTRIES} WHERE global_seq > %(after)s "
        "ORDER BY global_seq LIMIT %(limit)s",
        {"after": after, "limit": SCAN_BATCH},
    )
    unproven = [row["global_seq"] for row in rows if not proven.has(row["global_seq"])]
    if not unproven:
        return rows
    whole = run_dicts(
        connection,
        f"SELECT {ENTRY_COLUMNS} FROM {ENTRIES} WHERE global_seq = ANY(%(seqs)s)",
        {"seqs": unproven},
    )
    by_seq = {row["global_seq"]: row for row in whole}
    return [by_seq.get(row["global_seq"], row) for row in rows]  # a row read partly fails closed


def _root_problem(item: _Target, root: bytes, scan: Scan, matched: list[_Target], split: bool) -> LogProblem:
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
