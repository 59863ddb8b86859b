"""The inner loops of the log check and of the append's tree: :func:`fill_leaves`, of
:meth:`ledger.translog.leaves.ProvenLeaves.add_many` (store the leaf of each proven ``(global_seq,
entry_hash)`` in the leaf arrays, a pure function over two bytearrays), and :func:`tile_root`, the
root of a whole tile of leaves (:mod:`ledger.translog.scan`), and :func:`fold_leaves`, the append's
leaf-by-leaf extension of the tree's right edge (:func:`ledger.translog.tree.extend_tree`, under
the append lock).

Compiled with mypyc (:mod:`ledger.build`); the source is the reference (``LEDGER_ENGINE=pure``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from engine.merkle.rfc6962 import root_from_leaf_hashes

__all__ = ["fill_leaves", "fold_leaves", "tile_root"]

_HASH_SIZE = 32
_TILE_BYTES = 256 * _HASH_SIZE  # a whole tile: 256 leaf hashes (ledger.translog.tiles.TILE_WIDTH)


def fill_leaves(hashes: bytearray, present: bytearray, pairs: list[Any], start: int) -> int:
    """From ``pairs[start]`` on, store ``SHA-256(0x00 || entry_hash bytes)`` of each pair whose index
    ``global_seq - 1`` is inside ``present`` and whose ``entry_hash`` is ``0x`` + 64 hex digits (a
    ``str``); returns the position of the first pair not stored so (``len(pairs)``: all were), which
    the caller's exact path then takes."""
    sha256 = hashlib.sha256
    size = len(present)
    position = start
    count = len(pairs)
    while position < count:
        pair = pairs[position]
        if type(pair) is not tuple or len(pair) != 2:
            return position
        global_seq, entry_hash_hex = pair
        if type(global_seq) is not int or type(entry_hash_hex) is not str:
            return position
        index: int = global_seq - 1
        text: str = entry_hash_hex
        if not 0 <= index < size or len(text) != 66 or not text.startswith("0x"):
            return position
        try:
            data = bytes.fromhex(text[2:])
        except ValueError:
            return position
        if len(data) != 32:  # fromhex skips whitespace between bytes
            return position
        hashes[32 * index : 32 * index + 32] = sha256(b"\x00" + data).digest()
        present[index] = 1
        position += 1
    return position


def tile_root(data: Any) -> bytes:
    """The root of a whole tile (256 leaf hashes of 32 bytes, concatenated, as ``bytes``): the same
    root as :func:`~engine.merkle.rfc6962.root_from_leaf_hashes`, which a tree of a power-of-two
    size splits in halves down to pairs, computed level by level here without recursion. Anything
    else goes to that function, which decides (and raises where it raises)."""
    if type(data) is not bytes or len(data) != _TILE_BYTES:
        return root_from_leaf_hashes([data[i : i + _HASH_SIZE] for i in range(0, len(data), _HASH_SIZE)])
    level: bytes = data
    sha256 = hashlib.sha256
    pair = 2 * _HASH_SIZE
    while len(level) > _HASH_SIZE:  # halves of a power of two: every level pairs up exactly
        level = b"".join([sha256(b"\x01" + level[i : i + pair]).digest() for i in range(0, len(level), pair)])
    return level


def fold_leaves(roots: list[bytes], size: int, leaves: list[Any], max_size: int) -> dict[int, list[bytes]]:
    """Append ``leaves`` (32-byte leaf hashes) to a tree of ``size`` leaves whose right edge is
    ``roots`` (its perfect subtrees' roots, largest first; extended in place). Returns the tile
    hashes made, by tile level: level 0 the leaves themselves, level ``k`` the root of every
    perfect subtree of height ``8 * k`` completed (smallest first, in leaf order).

    ``Frontier.append_with_subtrees`` one leaf at a time, each interior node
    ``SHA-256(0x01 || left || right)`` (:func:`~engine.merkle.rfc6962.node_hash`); raises
    ``ValueError`` for a leaf that is not 32 ``bytes`` or at ``max_size`` leaves."""
    sha256 = hashlib.sha256
    level0: list[bytes] = []
    appended: dict[int, list[bytes]] = {0: level0}
    for value in leaves:
        if type(value) is not bytes or len(value) != _HASH_SIZE:
            raise ValueError(f"leaf hash must be {_HASH_SIZE} bytes")
        if size >= max_size:
            raise ValueError("tree is full")
        level0.append(value)
        node: bytes = value
        width = 1
        height = 0
        while size & width:
            node = sha256(b"\x01" + roots.pop() + node).digest()
            width <<= 1
            height += 1
            if height % 8 == 0:  # TILE_HEIGHT: a tile hash of the level above
                appended.setdefault(height // 8, []).append(node)
        roots.append(node)
        size += 1
    return appended
