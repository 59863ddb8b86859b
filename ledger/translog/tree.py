"""The ledger's RFC 6962 tree, stored as C2SP tlog-tiles in ``ledger_store.merkle_tiles``.

* :func:`extend_tree` appends leaf hashes inside the caller's transaction. It reads the right
  edge (the partial tile of each level, which hold the frontier) with one query and writes the
  tiles the new leaves change with one more: per batch, one row per level whose partial tile grew
  plus one per tile the batch filled (a 256th of a row per leaf).
* :func:`catch_up_tree` adds the entries the tree does not cover yet, under the append lock,
  recomputing every entry's hashes from its stored columns first. Idempotent.
* :func:`root_at`, :func:`inclusion_proof_at` and :func:`consistency_proof_at` answer for any
  size up to the tree size with one query for the tiles: the engine's proof functions are first
  run with placeholder hashes to learn which perfect subtrees they need (the shape of a proof
  depends on the sizes and index only), then the slices of the tiles those subtrees are built
  from are fetched in one ``unnest`` join (:func:`ledger.translog.tiles.fetch_tiles`).

All tree math is :mod:`engine.merkle.rfc6962`; this module and :mod:`.tiles` only store and fetch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from engine.merkle.rfc6962 import (
    HASH_SIZE,
    MAX_TREE_SIZE,
    Frontier,
    consistency_proof_from_subtrees,
    inclusion_proof_from_subtrees,
    node_hash,
    perfect_subtree_ranges,
    root_from_subtrees,
)
from ledger.store.models import STORE_SCHEMA
from ledger.store.records import ENTRY_WRITE_COLUMNS
from ledger.translog.db import Database, run, run_dicts
from ledger.translog.leaf_fill import fold_leaves
from ledger.translog.leaves import EntryCheckError, check_stored_entry, entry_leaf_hash
from ledger.translog.tiles import (
    MAX_TILE_LEVEL,
    TILE_HEIGHT,
    TILE_WIDTH,
    StoredTiles,
    edge_spans,
    fetch_tiles,
    stored_tree_size,
    subtree_span,
    tile_rows,
    write_tiles,
)

__all__ = [
    "TreeError",
    "catch_up_tree",
    "consistency_at",
    "consistency_proof_at",
    "extend_tree",
    "fetch_nodes",
    "frontier_at",
    "inclusion_proof_at",
    "lock_appends",
    "node_key",
    "root_at",
    "tile_root",
    "tree_size",
]

ENTRIES = f"{STORE_SCHEMA}.entries"
CATCH_UP_BATCH = 5000
_PLACEHOLDER = b"\x00" * 32
T = TypeVar("T")


class TreeError(RuntimeError):
    """The stored tree does not match the entries, or lacks a node it should have."""


def node_key(start: int, end: int) -> tuple[int, int]:
    """``(level, idx)`` of the perfect subtree over leaves ``[start, end)``."""
    level = (end - start).bit_length() - 1
    return level, start >> level


def lock_appends(db: Database) -> None:
    """Take the store's append lock for the rest of the current transaction."""
    run(db, f"LOCK TABLE {STORE_SCHEMA}.append_lock IN EXCLUSIVE MODE")


def tree_size(db: Database) -> int:
    """Number of leaves in the stored tree (one index probe)."""
    return stored_tree_size(db)


def fetch_nodes(db: Database, keys: Iterable[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
    """The stored hashes of ``(level, idx)`` nodes whose level is a multiple of 8 (tile hashes), in one query.

    Absent ones are left out; any other level raises ``ValueError`` (those are computed, not stored).
    """
    wanted = sorted(set(keys))
    if any(level % TILE_HEIGHT for level, _ in wanted):
        raise ValueError("only tree levels that are multiples of 8 are stored")
    tiles = fetch_tiles(db, [(level // TILE_HEIGHT, idx, 1) for level, idx in wanted])
    found = {(level, idx): tiles.hashes(level // TILE_HEIGHT, idx, 1) for level, idx in wanted}
    return {key: values[0] for key, values in found.items() if values is not None}


def _with_stored_subtrees(db: Database, compute: Callable[[Callable[[int, int], bytes]], T]) -> T:
    """Run ``compute(get_subtree_hash)`` against the stored tiles with a single fetch."""
    needed: list[tuple[int, int]] = []

    def record(start: int, end: int) -> bytes:
        needed.append((start, end))
        return _PLACEHOLDER

    compute(record)
    tiles = fetch_tiles(db, [subtree_span(start, end) for start, end in needed])
    computed: dict[tuple[int, int], bytes] = {}

    def lookup(start: int, end: int) -> bytes:
        if (start, end) not in computed:
            computed[start, end] = _subtree(tiles, start, end)
        return computed[start, end]

    return compute(lookup)


def _subtree(tiles: StoredTiles, start: int, end: int) -> bytes:
    value = tiles.subtree(start, end)
    if value is None:
        level, idx = node_key(start, end)
        raise TreeError(f"merkle node level {level} idx {idx} (leaves {start}..{end - 1}) is missing")
    return value


def _check_size(db: Database, *sizes: int) -> None:
    size = tree_size(db)
    for wanted in sizes:
        if wanted > size:
            raise TreeError(f"tree size {wanted} asked for, but the tree holds {size} leaves")


def root_at(db: Database, size: int) -> bytes:
    """Root hash of the first ``size`` leaves."""
    _check_size(db, size)
    return _with_stored_subtrees(db, lambda get: root_from_subtrees(size, get))


def inclusion_proof_at(db: Database, index: int, size: int) -> list[bytes]:
    """Audit path of leaf ``index`` in the tree of ``size`` leaves."""
    _check_size(db, size)
    return _with_stored_subtrees(db, lambda get: inclusion_proof_from_subtrees(index, size, get))


def consistency_proof_at(db: Database, old_size: int, new_size: int) -> list[bytes]:
    """Consistency proof from ``old_size`` to ``new_size`` leaves."""
    _check_size(db, new_size)
    return _with_stored_subtrees(db, lambda get: consistency_proof_from_subtrees(old_size, new_size, get))


def consistency_at(db: Database, old_size: int, new_size: int) -> tuple[bytes, bytes, list[bytes]]:
    """Both roots and the consistency proof from ``old_size`` to ``new_size``, with one fetch of tiles."""
    _check_size(db, new_size)
    return _with_stored_subtrees(
        db,
        lambda get: (
            root_from_subtrees(old_size, get),
            root_from_subtrees(new_size, get),
            consistency_proof_from_subtrees(old_size, new_size, get),
        ),
    )


def frontier_at(db: Database, size: int) -> Frontier:
    """The frontier of the first ``size`` leaves, from the stored tiles."""
    _check_size(db, size)
    return _with_stored_subtrees(db, lambda get: Frontier.from_subtrees(size, get))


def tile_root(db: Database, level: int, idx: int, hashes: bytes, size: int) -> bytes:
    """Root of the first ``size`` leaves, taking tile ``(level, idx)`` from ``hashes`` (its first
    ``len(hashes) // 32`` hashes) and every other subtree from the stored tiles.

    Every given hash feeds the result, so it equals a signed root of that size only if each is the
    tree's: a tile is checked against a checkpoint with O(log n) stored hashes.
    """
    span = 1 << (TILE_HEIGHT * level)
    first = idx * TILE_WIDTH * span
    last = first + len(hashes) // HASH_SIZE * span
    if not hashes or len(hashes) % HASH_SIZE or last > size:
        raise TreeError(f"tile {level}/{idx} of {len(hashes)} bytes does not fit a tree of {size} leaves")
    given = StoredTiles({(level, idx): (0, hashes)}, {})

    def node(start: int, end: int, get: Callable[[int, int], bytes]) -> bytes:
        count = end - start
        if count & (count - 1) == 0:  # perfect: from the given tile, or stored, unless it straddles
            if end <= first or start >= last:
                return get(start, end)
            if first <= start and end <= last and count < span * TILE_WIDTH:
                return _subtree(given, start, end)
        half = 1 << ((count - 1).bit_length() - 1)
        return node_hash(node(start, start + half, get), node(start + half, end, get))

    _check_size(db, size)
    return _with_stored_subtrees(db, lambda get: node(0, size, get))


def _load_frontier(db: Database, size: int) -> tuple[Frontier, StoredTiles] | None:
    """The frontier of ``size`` leaves and the partial tiles it comes from, checking in the same
    query that the tree has exactly ``size`` leaves. None when the tree is behind (it lacks leaf ``size - 1``).
    """
    # the tile after the last hash of each level (and of the first level with none) must not hold more
    counts = [size >> (TILE_HEIGHT * level) for level in range(MAX_TILE_LEVEL + 1)]
    levels = [level for level, count in enumerate(counts) if count or not level or counts[level - 1]]
    probes = [(level, counts[level] - counts[level] % TILE_WIDTH, 0) for level in levels]
    tiles = fetch_tiles(db, edge_spans(size) + probes + ([(0, size - 1, 1)] if size else []))
    if tiles.widths.get((0, size // TILE_WIDTH), 0) > size % TILE_WIDTH:
        raise TreeError(f"the tree already holds leaf {size}: it is ahead of the entries being appended")
    for level in levels[1:]:
        count = counts[level]
        if tiles.widths.get((level, count // TILE_WIDTH), 0) > count % TILE_WIDTH:
            raise TreeError(f"tile level {level} holds hashes beyond a tree of {size} leaves")
    if size and tiles.hashes(0, size - 1, 1) is None:
        return None
    roots = []
    for start, end in perfect_subtree_ranges(0, size):
        value = tiles.subtree(start, end)
        if value is None:
            level, idx = node_key(start, end)
            raise TreeError(f"frontier node level {level} idx {idx} is missing")
        roots.append(value)
    return Frontier(size, tuple(roots)), tiles


def extend_tree(db: Database, new_leaf_hashes: Sequence[bytes], start_index: int) -> Frontier:
    """Append leaf hashes for leaves ``start_index, start_index + 1, ...``; returns the new frontier.

    Call inside the transaction (and under the append lock) that inserts the entries. If the tree
    is behind ``start_index`` (entries appended before the hook existed), it first catches up from
    the stored entries. Raises :class:`TreeError` if the tree is ahead or damaged.
    """
    loaded = _load_frontier(db, start_index)
    if loaded is None:
        catch_up_tree(db, upto=start_index, lock=False)
        loaded = _load_frontier(db, start_index)
        if loaded is None:
            raise TreeError(f"the tree cannot reach leaf {start_index}: entries before it are missing")
    frontier, edge = loaded
    # Frontier.append_with_subtrees, one leaf at a time, on a mutable copy of the right edge
    # (compiled: ledger.translog.leaf_fill.fold_leaves, pinned to the definition in the tests)
    roots = list(frontier.subtree_roots)
    leaves = list(new_leaf_hashes)
    appended = fold_leaves(roots, start_index, leaves, MAX_TREE_SIZE)
    size = start_index + len(leaves)
    write_tiles(db, tile_rows(start_index, edge, appended))
    return Frontier(size, tuple(roots))


def append_entries_to_tree(db: Database, entries: Sequence[Any]) -> Frontier | None:
    """Hook for the append path: extend the tree with just-inserted entries, in ``global_seq`` order.

    ``entries`` are objects or mappings with ``global_seq`` and ``entry_hash`` (``0x`` hex).
    """
    if not entries:
        return None

    def get(entry: Any, name: str) -> Any:
        return entry[name] if isinstance(entry, dict) else getattr(entry, name)

    ordered = sorted(entries, key=lambda entry: int(get(entry, "global_seq")))
    first = int(get(ordered[0], "global_seq"))
    for offset, entry in enumerate(ordered):
        if int(get(entry, "global_seq")) != first + offset:
            raise TreeError(f"entries to append are not consecutive at global_seq {get(entry, 'global_seq')}")
    leaves = [entry_leaf_hash(str(get(entry, "entry_hash"))) for entry in ordered]
    return extend_tree(db, leaves, first - 1)


ENTRY_COLUMNS = ENTRY_WRITE_COLUMNS  # every committed column, in the order the store writes them


def read_entries(
    db: Database, after_seq: int, limit: int, upto_seq: int | None = None
) -> list[dict[str, Any]]:
    """Up to ``limit`` entries with ``global_seq > after_seq`` (and ``<= upto_seq``), in order."""
    bound = "" if upto_seq is None else " AND global_seq <= %(upto)s"
    return run_dicts(
        db,
        f"SELECT {ENTRY_COLUMNS} FROM {ENTRIES} WHERE global_seq > %(after)s{bound} "
        "ORDER BY global_seq LIMIT %(limit)s",
        {"after": after_seq, "limit": limit, "upto": upto_seq},
    )


def catch_up_tree(db: Database, *, upto: int | None = None, lock: bool = True) -> int:
    """Add leaves for stored entries beyond the tree (up to ``global_seq <= upto``); returns how many.

    Takes the append lock (unless the caller holds it), so it never races an append. Every entry's
    hashes are recomputed from its columns before it becomes a leaf: the log refuses to commit to
    an entry whose stored hashes do not match its content.
    """
    if lock:
        lock_appends(db)
    added = 0
    size = tree_size(db)
    while True:
        batch = read_entries(db, size, CATCH_UP_BATCH, upto)
        if not batch:
            return added
        leaves = []
        for offset, row in enumerate(batch):
            if row["global_seq"] != size + offset + 1:
                raise TreeError(f"entries jump from global_seq {size + offset} to {row['global_seq']}")
            try:
                leaves.append(entry_leaf_hash(_checked_hash(row)))
            except EntryCheckError as exc:
                raise TreeError(
                    f"entry global_seq {row['global_seq']} (submission {row['submission_id']}): {exc}"
                ) from None
        extend_tree(db, leaves, size)
        size += len(leaves)
        added += len(leaves)


def _checked_hash(row: dict[str, Any]) -> str:
    """The entry hash of a stored row; raises :class:`EntryCheckError` if its stored hashes disagree."""
    content_hash, mismatch = check_stored_entry(row)
    if mismatch is not None:
        raise mismatch
    return content_hash
