"""The tree stored as C2SP ``tlog-tiles`` hash tiles, in ``ledger_store.merkle_tiles``.

A tile at level ``L``, index ``N`` holds the hashes of tree level ``8 * L`` (perfect subtrees of
``256 ** L`` leaves), nodes ``256 * N`` up to ``256 * N + width - 1``: ``width`` 32-byte hashes,
concatenated. Level-0 tiles hold the leaf hashes. A full tile (width 256) never changes; the
rightmost tile of each level is partial and only ever grows (a trigger refuses any other change).

Any perfect subtree is computed from at most 128 consecutive hashes of one tile: a subtree of
height ``8 * L + k`` is the RFC 6962 root of ``2 ** k`` hashes of level-``L`` tile ``N``. So a root
or a proof needs a few slices of a few tiles, fetched with one query (:func:`fetch_tiles`).

Only storage and slicing live here; the hashing is :func:`engine.merkle.rfc6962.node_hash`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from engine.merkle.rfc6962 import HASH_SIZE, node_hash
from ledger.translog.db import Database, run
from ledger.translog.tables import TILES

__all__ = [
    "MAX_TILE_LEVEL",
    "TILE_HEIGHT",
    "TILE_WIDTH",
    "Span",
    "StoredTiles",
    "edge_spans",
    "fetch_tiles",
    "misplaced_tiles",
    "stored_tree_size",
    "subtree_span",
    "tile_rows",
    "write_tiles",
]

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
MAX_TILE_LEVEL = 7  # tree levels 0..63
_TILE_BYTES = TILE_WIDTH * HASH_SIZE

Span = tuple[int, int, int]
"""``(tile level, first hash at that level, count)``: consecutive hashes inside one tile."""


def subtree_span(start: int, end: int) -> Span:
    """The tile hashes the perfect subtree over leaves ``[start, end)`` is the root of."""
    height = (end - start).bit_length() - 1
    level = height // TILE_HEIGHT
    return level, start >> (TILE_HEIGHT * level), 1 << (height - TILE_HEIGHT * level)


def edge_spans(size: int) -> list[Span]:
    """The partial (rightmost, not full) tile of each level for a tree of ``size`` leaves."""
    spans = []
    level = 0
    while size >> (TILE_HEIGHT * level):
        count = size >> (TILE_HEIGHT * level)
        width = count % TILE_WIDTH
        if width:
            spans.append((level, count - width, width))
        level += 1
    return spans


@dataclass(frozen=True)
class StoredTiles:
    """Slices of stored tiles: ``(level, index) -> (first position in the tile, bytes)``, and widths."""

    slices: Mapping[tuple[int, int], tuple[int, bytes]]
    widths: Mapping[tuple[int, int], int]

    def raw(self, level: int, first: int, count: int) -> bytes | None:
        """``count`` concatenated hashes of tile level ``level`` from position ``first``; None if not stored."""
        found = self.slices.get((level, first // TILE_WIDTH))
        if found is None:
            return None
        lo, data = found
        offset = (first % TILE_WIDTH - lo) * HASH_SIZE
        if offset < 0 or offset + count * HASH_SIZE > len(data):
            return None
        return data[offset : offset + count * HASH_SIZE]

    def hashes(self, level: int, first: int, count: int) -> list[bytes] | None:
        """The same hashes as a list."""
        data = self.raw(level, first, count)
        if data is None:
            return None
        return [data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]

    def subtree(self, start: int, end: int) -> bytes | None:
        """Root of the perfect subtree over leaves ``[start, end)``; None if its hashes are not stored."""
        data = self.raw(*subtree_span(start, end))
        if data is None:
            return None
        while len(data) > HASH_SIZE:  # a perfect subtree: siblings are adjacent, hash pairs level by level
            data = b"".join(
                node_hash(data[i : i + HASH_SIZE], data[i + HASH_SIZE : i + 2 * HASH_SIZE])
                for i in range(0, len(data), 2 * HASH_SIZE)
            )
        return data


def fetch_tiles(db: Database, spans: Iterable[Span]) -> StoredTiles:
    """The stored hashes of ``spans`` in one query: per tile, the one slice covering its spans."""
    bounds: dict[tuple[int, int], tuple[int, int]] = {}
    for level, first, count in spans:
        key, lo = (level, first // TILE_WIDTH), first % TILE_WIDTH
        old = bounds.get(key, (lo, lo + count))
        bounds[key] = (min(old[0], lo), max(old[1], lo + count))
    if not bounds:
        return StoredTiles({}, {})
    keys = sorted(bounds)
    rows = run(
        db,
        "SELECT t.level, t.idx, t.width, k.lo, substring(t.hashes FROM k.lo * 32 + 1 FOR (k.hi - k.lo) * 32) "
        "FROM unnest(CAST(%(levels)s AS smallint[]), CAST(%(idxs)s AS bigint[]), CAST(%(los)s AS int[]), "
        f"CAST(%(his)s AS int[])) AS k(level, idx, lo, hi) JOIN {TILES} t ON t.level = k.level AND t.idx = k.idx",
        {
            "levels": [level for level, _ in keys],
            "idxs": [idx for _, idx in keys],
            "los": [bounds[key][0] for key in keys],
            "his": [bounds[key][1] for key in keys],
        },
    )
    slices = {(int(level), int(idx)): (int(lo), bytes(data)) for level, idx, _, lo, data in rows}
    widths = {(int(level), int(idx)): int(width) for level, idx, width, _, _ in rows}
    return StoredTiles(slices, widths)


def stored_tree_size(db: Database) -> int:
    """Number of leaves in the stored tree: the last level-0 tile's index and width (one index probe)."""
    rows = run(db, f"SELECT idx, width FROM {TILES} WHERE level = 0 ORDER BY idx DESC LIMIT 1")
    return int(rows[0][0]) * TILE_WIDTH + int(rows[0][1]) if rows else 0


def misplaced_tiles(db: Database, size: int) -> list[str]:
    """What differs from the tiles of a tree of ``size`` leaves, level by level (one query).

    Level ``L`` must hold ``n = size >> 8L`` hashes in tiles ``0 .. ceil(n / 256) - 1``, all full
    but the last, each exactly ``32 * width`` bytes; no level beyond holds a tile. Empty when the
    layout is right.
    """
    rows = run(
        db,
        f"SELECT level, count(*), sum(width), max(idx), count(*) FILTER (WHERE width < {TILE_WIDTH}), "
        f"count(*) FILTER (WHERE octet_length(hashes) <> {HASH_SIZE} * width) "
        f"FROM {TILES} GROUP BY level ORDER BY level",
    )
    found = {
        int(level): (int(count), int(total), int(last), int(partial))
        for level, count, total, last, partial, _ in rows
    }
    problems = [
        f"level {level} holds {int(bad)} tile(s) whose length is not 32 bytes per hash of their width"
        for level, *_, bad in rows
        if bad
    ]
    for level in range(MAX_TILE_LEVEL + 1):
        hashes = size >> (TILE_HEIGHT * level)
        tiles = -(-hashes // TILE_WIDTH)
        expected = (tiles, hashes, tiles - 1, 1 if hashes % TILE_WIDTH else 0) if hashes else (0, 0, -1, 0)
        count, total, last, partial = found.get(level, (0, 0, -1, 0))
        if (count, total, last, partial) != expected:
            problems.append(
                f"level {level} holds {count} tile(s), {partial} partial, with {total} hashes up to tile "
                f"{last}; a tree of {size} leaves has {hashes} hashes in {tiles} tile(s) there"
            )
    return problems


def tile_rows(
    size: int, edge: StoredTiles, appended: Mapping[int, Sequence[bytes]]
) -> list[tuple[int, int, int, bytes]]:
    """``(level, idx, width, hashes)`` of every tile that ``appended`` hashes (per level) change.

    ``size`` is the tree size before the append and ``edge`` holds its partial tiles
    (:func:`edge_spans`); a partial tile is rewritten whole, as its stored prefix plus the new hashes.
    """
    rows = []
    for level, new in sorted(appended.items()):
        if not new:
            continue
        count = size >> (TILE_HEIGHT * level)
        width = count % TILE_WIDTH
        prefix = edge.raw(level, count - width, width) if width else b""
        if prefix is None:
            raise ValueError(f"the partial tile at level {level} is not loaded")
        data = prefix + b"".join(new)
        first_tile = (count - width) // TILE_WIDTH
        for offset in range(0, len(data), _TILE_BYTES):
            chunk = data[offset : offset + _TILE_BYTES]
            rows.append((level, first_tile + offset // _TILE_BYTES, len(chunk) // HASH_SIZE, chunk))
    return rows


def write_tiles(db: Database, rows: Sequence[tuple[int, int, int, bytes]]) -> None:
    """Insert new tiles and widen partial ones, in one statement (the table's trigger checks the widening).

    The hashes go as a binary ``bytea[]`` parameter (``%(hashes)b``): in text form each batch's
    tiles (8 KiB each) were sent hex-encoded and parsed back by ``array_in`` and ``byteain``, which
    cost the server about as much as the rest of the statement. The bytes stored are the same."""
    if not rows:
        return
    run(
        db,
        f"INSERT INTO {TILES} (level, idx, width, hashes) SELECT * FROM unnest(CAST(%(levels)s AS smallint[]), "
        "CAST(%(idxs)s AS bigint[]), CAST(%(widths)s AS smallint[]), CAST(%(hashes)b AS bytea[])) "
        "ON CONFLICT (level, idx) DO UPDATE SET width = EXCLUDED.width, hashes = EXCLUDED.hashes",
        {
            "levels": [row[0] for row in rows],
            "idxs": [row[1] for row in rows],
            "widths": [row[2] for row in rows],
            "hashes": [row[3] for row in rows],
        },
    )
