"""The pass of the log check over consecutive leaves: the frontier, and the stored nodes compared.

Leaves are held as :class:`Leaves`: consecutive leaf hashes from one ``global_seq``, concatenated
(32 bytes each), with the submission of each, or without (the leaves ``ledger verify``'s ledger
pass proved, taken as one slice of :class:`ledger.translog.leaves.ProvenLeaves`: a problem that
names one of them looks its submission up). A whole aligned tile of leaves is appended at once:
its root from the tile's bytes, compared with the stored tile as one byte string (leaf by leaf
only when the two differ, to name each leaf that differs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.merkle.rfc6962 import Frontier
from ledger.translog.db import Database, run
from ledger.translog.leaf_fill import tile_root
from ledger.translog.leaves import EntryCheckError, ProvenLeaves, check_stored_entry, entry_leaf_hash
from ledger.translog.log_problem import LogProblem
from ledger.translog.tiles import TILE_HEIGHT, fetch_tiles
from ledger.translog.tree import ENTRIES, node_key

__all__ = [
    "HASH_SIZE",
    "MAX_REPORTS_PER_CODE",
    "TILE_WIDTH",
    "Leaves",
    "Node",
    "Scan",
    "TileLeaves",
    "tile_root",
]

MAX_REPORTS_PER_CODE = 20
TILE_WIDTH = 1 << TILE_HEIGHT
HASH_SIZE = 32

Node = tuple[int, tuple[int, int], bytes]
"""``(global_seq of the leaf that completed it, (level, idx), hash)``."""


class Leaves:
    """Consecutive leaf hashes from ``first_seq``, concatenated, with each leaf's submission (or None:
    looked up in the database when a problem names one)."""

    __slots__ = ("data", "first_seq", "submissions")

    def __init__(self, first_seq: int, data: bytes, submissions: Sequence[str] | None) -> None:
        if len(data) % HASH_SIZE or (submissions is not None and len(submissions) * HASH_SIZE != len(data)):
            raise ValueError(f"leaf hashes must be {HASH_SIZE} bytes each, one per submission")
        self.first_seq = first_seq
        self.data = data
        self.submissions = submissions

    def __len__(self) -> int:
        return len(self.data) // HASH_SIZE

    def leaf(self, position: int) -> bytes:
        """The leaf hash at ``position`` (0 is ``first_seq``)."""
        return self.data[position * HASH_SIZE : (position + 1) * HASH_SIZE]

    def split(self, count: int) -> tuple[Leaves, Leaves]:
        """The first ``count`` leaves and the rest."""
        cut = count * HASH_SIZE
        head, tail = (
            (self.submissions[:count], self.submissions[count:])
            if self.submissions is not None
            else (None, None)
        )
        return Leaves(self.first_seq, self.data[:cut], head), Leaves(
            self.first_seq + count, self.data[cut:], tail
        )


class TileLeaves:
    """A whole aligned tile of recomputed leaves (from ``first_seq``), compared with the stored tile
    at once (the per-leaf comparison runs only when the two differ)."""

    __slots__ = ("data", "first_seq")

    def __init__(self, first_seq: int, data: bytes) -> None:
        self.first_seq = first_seq
        self.data = data

    def nodes(self) -> list[Node]:
        """The tile's leaves as nodes (what a per-leaf comparison checks)."""
        data, first = self.data, self.first_seq
        return [
            (first + i, (0, first + i - 1), data[i * HASH_SIZE : (i + 1) * HASH_SIZE])
            for i in range(len(data) // HASH_SIZE)
        ]


class Scan:
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
        """Count a problem; list it while its code has fewer than :data:`MAX_REPORTS_PER_CODE`."""
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

    def leaves_of(self, rows: list[dict[str, Any]]) -> Leaves:
        """The leaves of consecutive entry rows (:meth:`leaf` of each)."""
        found = list(map(self.leaf, rows))
        if any(len(leaf) != HASH_SIZE for _, _, leaf in found):
            raise ValueError(f"leaf hash must be {HASH_SIZE} bytes")
        first = found[0][0] if found else self.frontier.size + 1
        return Leaves(
            first, b"".join(leaf for _, _, leaf in found), [submission for _, submission, _ in found]
        )

    def append_tile(self, leaves: Leaves, position: int, completed: list[Node | TileLeaves]) -> None:
        """Append the whole aligned tile of ``leaves`` at ``position``: its root is appended to the
        frontier scaled by a tile (a frontier whose size is a multiple of 256 holds only subtrees of
        256 leaves or more)."""
        start = self.frontier.size
        data = leaves.data[position * HASH_SIZE : (position + TILE_WIDTH) * HASH_SIZE]
        scaled = Frontier(start >> TILE_HEIGHT, self.frontier.subtree_roots)
        scaled, subtrees = scaled.append_with_subtrees(tile_root(data))
        self.frontier = Frontier(start + TILE_WIDTH, scaled.subtree_roots)
        if start + TILE_WIDTH <= self.stored_size:
            completed.append(TileLeaves(leaves.first_seq + position, data))
            seq = leaves.first_seq + position + TILE_WIDTH - 1
            for subtree in subtrees:
                key = node_key(subtree.start << TILE_HEIGHT, subtree.end << TILE_HEIGHT)
                if key[0] % TILE_HEIGHT == 0:
                    completed.append((seq, key, subtree.hash))

    def append_leaf(self, seq: int, leaf: bytes, completed: list[Node | TileLeaves]) -> None:
        """Append one leaf, noting the stored nodes it completes."""
        self.frontier, subtrees = self.frontier.append_with_subtrees(leaf)
        if seq <= self.stored_size:  # the stored nodes: tile hashes (levels 0, 8, 16, ...)
            keys = ((node_key(s.start, s.end), s.hash) for s in subtrees)
            completed.extend((seq, key, value) for key, value in keys if key[0] % TILE_HEIGHT == 0)

    def append(self, leaves: Leaves, completed: list[Node | TileLeaves]) -> None:
        """Append consecutive leaves, whole aligned tiles at once, noting the stored nodes completed."""
        position, count = 0, len(leaves)
        while position < count:
            start = self.frontier.size
            whole_tile = start % TILE_WIDTH == 0 and count - position >= TILE_WIDTH
            if whole_tile and (start + TILE_WIDTH <= self.stored_size or start >= self.stored_size):
                self.append_tile(leaves, position, completed)
                position += TILE_WIDTH
            else:
                self.append_leaf(leaves.first_seq + position, leaves.leaf(position), completed)
                position += 1

    def batch(self, connection: Database, leaves: Leaves) -> None:
        """Append a batch of consecutive leaves and compare the stored nodes they complete."""
        completed: list[Node | TileLeaves] = []
        self.append(leaves, completed)
        self.compare(connection, leaves, completed)

    def compare(self, connection: Database, leaves: Leaves, completed: list[Node | TileLeaves]) -> None:
        """Compare the completed nodes with the stored tiles; report leaves and nodes that differ."""
        spans = [
            (0, item.first_seq - 1, TILE_WIDTH)
            if isinstance(item, TileLeaves)
            else (item[1][0] // TILE_HEIGHT, item[1][1], 1)  # only tile levels are noted (append_*)
            for item in completed
        ]
        stored = fetch_tiles(connection, spans)
        nodes: list[Node] = []
        for item in completed:
            if not isinstance(item, TileLeaves):
                nodes.append(item)
            elif stored.raw(0, item.first_seq - 1, TILE_WIDTH) != item.data:
                nodes.extend(item.nodes())  # compared leaf by leaf below, to name each one that differs
        leaf_bad: set[int] = set()
        for seq, key, value in nodes:
            found = stored.raw(key[0] // TILE_HEIGHT, key[1], 1)
            if found == value:
                continue
            submission = submission_of(connection, leaves, seq)
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


def submission_of(connection: Database, leaves: Leaves, seq: int) -> str:
    """The submission of the entry ``seq`` of ``leaves``: held, else read (a problem names it)."""
    if leaves.submissions is not None:
        return leaves.submissions[seq - leaves.first_seq]
    rows = run(connection, f"SELECT submission_id FROM {ENTRIES} WHERE global_seq = %(seq)s", {"seq": seq})
    return str(rows[0][0]) if rows else "(not found)"
