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
its proven leaf is used, and only its ``global_seq`` and submission are read. Every other entry
(one whose stored hashes are wrong, or that no submission row covers) is read and checked as above.

Checkpoint signatures are checked with the public key given, else the one beside
``LEDGER_SIGNING_KEY`` (``PATH.pub``). An exported checkpoint is the one a database superuser
cannot rewrite: pass it in ``external_notes``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import Engine

from engine.merkle.rfc6962 import Frontier, empty_root, root_from_leaf_hashes
from ledger.translog.checkpoints import latest_checkpoint, list_checkpoints
from ledger.translog.db import Database, run_dicts
from ledger.translog.keys import SigningKeyError, load_private_key, load_public_key, public_key_path
from ledger.translog.leaves import EntryCheckError, ProvenLeaves, check_stored_entry, entry_leaf_hash
from ledger.translog.note import NoteError, open_checkpoint, parse_checkpoint_text, parse_signed_note
from ledger.translog.tiles import TILE_HEIGHT, fetch_tiles, misplaced_tiles
from ledger.translog.tree import ENTRIES, ENTRY_COLUMNS, node_key, read_entries, tree_size

__all__ = ["LogProblem", "default_public_key", "verify_checkpoints"]

SCAN_BATCH = 20 << TILE_HEIGHT  # whole tiles: a batch appends leaves one by one only up to a checkpoint
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


_Node = tuple[int, str, tuple[int, int], bytes]  # (global_seq, submission, (level, idx), hash)
TILE_WIDTH = 1 << TILE_HEIGHT
HASH_SIZE = 32


@dataclass(frozen=True)
class _TileLeaves:
    """A whole aligned tile of recomputed leaves, compared with the stored tile at once (the
    per-leaf comparison runs only when the two differ)."""

    leaves: list[tuple[int, str, bytes]]

    def nodes(self) -> list[_Node]:
        """The tile's leaves as nodes (what a per-leaf comparison checks)."""
        return [(seq, submission, (0, seq - 1), leaf) for seq, submission, leaf in self.leaves]


def _tile_root(leaves: list[bytes]) -> bytes:
    """The root of a whole tile (:data:`TILE_WIDTH` leaf hashes of 32 bytes): the same root as
    :func:`~engine.merkle.rfc6962.root_from_leaf_hashes`, which a tree of a power-of-two size
    splits in halves down to pairs, computed level by level here without recursion. Anything
    else goes to that function, which decides (and raises where it raises)."""
    if len(leaves) != TILE_WIDTH or any(len(leaf) != HASH_SIZE or type(leaf) is not bytes for leaf in leaves):
        return root_from_leaf_hashes(leaves)
    sha256 = hashlib.sha256
    level = leaves
    while len(level) > 1:  # halves of a power of two: every level pairs up exactly
        level = [sha256(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level), 2)]
    return level[0]


class _Scan:
    """State of the pass over the entries."""

    def __init__(self, stored_size: int, proven: ProvenLeaves | None) -> None:
        self.stored_size = stored_size
        self.proven = proven
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

    def leaf(self, row: dict[str, Any]) -> tuple[int, str, bytes]:
        """``(global_seq, submission, leaf hash)`` of an entry: the proven leaf, else recomputed from
        its content (reporting a stored hash that disagrees)."""
        seq, submission = int(row["global_seq"]), str(row["submission_id"])
        proven = self.proven.get(seq) if self.proven is not None else None
        if proven is not None:
            return seq, submission, proven
        try:
            content_hash, mismatch = check_stored_entry(row)
            leaf = entry_leaf_hash(content_hash)
        except EntryCheckError as exc:
            mismatch, leaf = exc, b"\xff" * 32
        if mismatch is not None:
            message = f"entry global_seq {seq} (submission {submission}): {mismatch}"
            self.report(LogProblem(mismatch.code, message, seq, submission))
        return seq, submission, leaf

    def append_tile(self, leaves: list[tuple[int, str, bytes]], completed: list[_Node | _TileLeaves]) -> None:
        """Append a whole aligned tile of leaves: its root is appended to the frontier scaled by a tile
        (a frontier whose size is a multiple of 256 holds only subtrees of 256 leaves or more)."""
        start = self.frontier.size
        root = _tile_root([leaf for _, _, leaf in leaves])
        scaled = Frontier(start >> TILE_HEIGHT, self.frontier.subtree_roots)
        scaled, subtrees = scaled.append_with_subtrees(root)
        self.frontier = Frontier(start + TILE_WIDTH, scaled.subtree_roots)
        if start + TILE_WIDTH <= self.stored_size:
            completed.append(_TileLeaves(leaves))
            seq, submission, _ = leaves[-1]
            for subtree in subtrees:
                key = node_key(subtree.start << TILE_HEIGHT, subtree.end << TILE_HEIGHT)
                if key[0] % TILE_HEIGHT == 0:
                    completed.append((seq, submission, key, subtree.hash))

    def append_leaf(
        self, seq: int, submission: str, leaf: bytes, completed: list[_Node | _TileLeaves]
    ) -> None:
        """Append one leaf, noting the stored nodes it completes."""
        self.frontier, subtrees = self.frontier.append_with_subtrees(leaf)
        if seq <= self.stored_size:  # the stored nodes: tile hashes (levels 0, 8, 16, ...)
            keys = ((node_key(s.start, s.end), s.hash) for s in subtrees)
            completed.extend(
                (seq, submission, key, value) for key, value in keys if key[0] % TILE_HEIGHT == 0
            )

    def batch(self, connection: Database, rows: list[dict[str, Any]]) -> None:
        """Append a batch of consecutive entries and compare the stored nodes they complete."""
        completed: list[_Node | _TileLeaves] = []
        self.append(list(map(self.leaf, rows)), completed)
        self.compare(connection, completed)

    def append(self, leaves: list[tuple[int, str, bytes]], completed: list[_Node | _TileLeaves]) -> None:
        """Append consecutive leaves, whole aligned tiles at once, noting the stored nodes completed."""
        position = 0
        while position < len(leaves):
            start = self.frontier.size
            whole_tile = start % TILE_WIDTH == 0 and len(leaves) - position >= TILE_WIDTH
            if whole_tile and (start + TILE_WIDTH <= self.stored_size or start >= self.stored_size):
                self.append_tile(leaves[position : position + TILE_WIDTH], completed)
                position += TILE_WIDTH
            else:
                self.append_leaf(*leaves[position], completed)
                position += 1

    def compare(self, connection: Database, completed: list[_Node | _TileLeaves]) -> None:
        """Compare the completed nodes with the stored tiles; report leaves and nodes that differ."""
        spans = [
            (0, item.leaves[0][0] - 1, TILE_WIDTH)
            if isinstance(item, _TileLeaves)
            else (item[2][0] // TILE_HEIGHT, item[2][1], 1)  # only tile levels are noted (append_*)
            for item in completed
        ]
        stored = fetch_tiles(connection, spans)
        nodes: list[_Node] = []
        for item in completed:
            if not isinstance(item, _TileLeaves):
                nodes.append(item)
            elif stored.raw(0, item.leaves[0][0] - 1, TILE_WIDTH) != b"".join(
                leaf for _, _, leaf in item.leaves
            ):
                nodes.extend(item.nodes())  # compared leaf by leaf below, to name each one that differs
        leaf_bad: set[int] = set()
        for seq, submission, key, value in nodes:
            found = stored.raw(key[0] // TILE_HEIGHT, key[1], 1)
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
        scan = _Scan(tree_size(connection), proven)
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
