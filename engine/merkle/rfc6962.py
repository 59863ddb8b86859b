"""RFC 6962 / RFC 9162 Merkle tree: hashing, proofs, verifiers and incremental appends.

Hashing (RFC 9162 §2.1.1): ``leaf_hash(d) = SHA-256(0x00 || d)``,
``node_hash(l, r) = SHA-256(0x01 || l || r)``, the empty tree is ``SHA-256("")``, and a tree of
``n > 1`` leaves splits at ``k``, the largest power of two strictly below ``n``. Nothing is ever
duplicated, so the shape of a tree depends on its size alone.

Two families of proof generators produce identical proofs:

* list-based (:func:`inclusion_proof`, :func:`consistency_proof`): the RFC's PATH and SUBPROOF
  recursion over all leaf hashes in memory; reference code and small trees;
* storage-based (``*_from_subtrees``): the same proofs computed from a callback
  ``get_subtree_hash(start, end) -> bytes``, in O(log n) callback calls.

The callback contract: it is only called with *perfect* ranges, i.e. ``end - start`` is a power of
two and ``start`` is a multiple of ``end - start``, and ``end`` never exceeds the tree size the
proof is asked for. It returns the 32-byte root of the subtree over leaves ``[start, end)`` (for
``end - start == 1`` that is the leaf hash itself). Perfect subtrees never change once their last
leaf is appended, so a store that writes the hashes reported by
:meth:`Frontier.append_with_subtrees` can serve proofs for every past tree size.

:class:`Frontier` is the compact range ``[0, size)``: the roots of the perfect subtrees that
decompose ``size`` by its binary digits, left (largest) to right. Appending costs O(log n) hashes.

The verifiers (:func:`verify_inclusion`, :func:`verify_consistency`) follow RFC 9162 §2.1.3.2 and
§2.1.4.2 and are total: malformed input returns False, never raises and never loops.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "HASH_SIZE",
    "MAX_TREE_SIZE",
    "Frontier",
    "Subtree",
    "SubtreeHashGetter",
    "consistency_proof",
    "consistency_proof_from_subtrees",
    "empty_root",
    "inclusion_proof",
    "inclusion_proof_from_subtrees",
    "leaf_hash",
    "node_hash",
    "perfect_subtree_ranges",
    "root_from_leaf_hashes",
    "root_from_subtrees",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
MAX_TREE_SIZE = 2**64 - 1  # RFC 9162 tree sizes are uint64; larger claims are rejected
_MAX_PROOF_LENGTH = 2 * 64 + 1  # no valid proof for a uint64-sized tree is longer

SubtreeHashGetter = Callable[[int, int], bytes]
"""``get_subtree_hash(start, end)``: root of the perfect subtree over leaves ``[start, end)``."""

_EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    """``SHA-256(0x00 || data)``: the hash of one log entry."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)``: the hash of an interior node."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def empty_root() -> bytes:
    """Root of the empty tree, ``SHA-256("")``."""
    return _EMPTY_ROOT


def _split(n: int) -> int:
    """Largest power of two strictly less than ``n`` (``n >= 2``)."""
    return 1 << ((n - 1).bit_length() - 1)


def _is_hash(value: object) -> bool:
    return isinstance(value, bytes) and len(value) == HASH_SIZE


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TREE_SIZE


def _require_leaf_hashes(hashes: Sequence[bytes]) -> list[bytes]:
    checked = list(hashes)
    for position, value in enumerate(checked):
        if not _is_hash(value):
            raise ValueError(f"leaf hash {position} must be {HASH_SIZE} bytes")
    return checked


def _require_index(value: int, name: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int")


# --- list-based reference (RFC 9162 §2.1.1, §2.1.3.1, §2.1.4.1) -------------------------------


def _mth(hashes: list[bytes], start: int, end: int) -> bytes:
    count = end - start
    if count == 0:
        return _EMPTY_ROOT
    if count == 1:
        return hashes[start]
    mid = start + _split(count)
    return node_hash(_mth(hashes, start, mid), _mth(hashes, mid, end))


def root_from_leaf_hashes(hashes: Sequence[bytes]) -> bytes:
    """MTH over 32-byte leaf hashes (already :func:`leaf_hash`-ed); raises ``ValueError`` otherwise."""
    checked = _require_leaf_hashes(hashes)
    return _mth(checked, 0, len(checked))


def _path(hashes: list[bytes], index: int, start: int, end: int) -> list[bytes]:
    if end - start == 1:
        return []
    mid = start + _split(end - start)
    if index < mid:
        return [*_path(hashes, index, start, mid), _mth(hashes, mid, end)]
    return [*_path(hashes, index, mid, end), _mth(hashes, start, mid)]


def inclusion_proof(leaf_hashes: Sequence[bytes], index: int) -> list[bytes]:
    """RFC 9162 PATH(index, D[n]) for the tree over all ``leaf_hashes``, bottom-up."""
    checked = _require_leaf_hashes(leaf_hashes)
    _require_index(index, "index")
    if not 0 <= index < len(checked):
        raise IndexError(f"leaf index {index} outside [0, {len(checked)})")
    return _path(checked, index, 0, len(checked))


def _subproof(hashes: list[bytes], old_size: int, start: int, end: int, complete: bool) -> list[bytes]:
    count = end - start
    if old_size == count:
        return [] if complete else [_mth(hashes, start, end)]
    mid = start + _split(count)
    if old_size <= mid - start:
        return [*_subproof(hashes, old_size, start, mid, complete), _mth(hashes, mid, end)]
    return [*_subproof(hashes, old_size - (mid - start), mid, end, False), _mth(hashes, start, mid)]


def consistency_proof(leaf_hashes: Sequence[bytes], old_size: int, new_size: int) -> list[bytes]:
    """RFC 9162 PROOF(old_size, D[new_size]) over the first ``new_size`` leaf hashes.

    Empty when ``old_size`` is 0 or equal to ``new_size``. Raises ``ValueError`` unless
    ``0 <= old_size <= new_size <= len(leaf_hashes)``.
    """
    checked = _require_leaf_hashes(leaf_hashes)
    _require_index(old_size, "old_size")
    _require_index(new_size, "new_size")
    if not 0 <= old_size <= new_size <= len(checked):
        raise ValueError(f"need 0 <= old_size <= new_size <= {len(checked)}, got {old_size}, {new_size}")
    if old_size in (0, new_size):
        return []
    return _subproof(checked, old_size, 0, new_size, True)


# --- verifiers (RFC 9162 §2.1.3.2, §2.1.4.2) ---------------------------------------------------


def _hash_list(proof: object, limit: int) -> list[bytes] | None:
    if not isinstance(proof, (list, tuple)) or len(proof) > limit:
        return None
    if not all(_is_hash(item) for item in proof):
        return None
    return list(proof)


def _inclusion_proof_length(index: int, tree_size: int) -> int:
    inner = (index ^ (tree_size - 1)).bit_length()
    return inner + (index >> inner).bit_count()


def verify_inclusion(
    leaf_hash: bytes, index: int, tree_size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """True iff ``proof`` shows ``leaf_hash`` at ``index`` in the tree of ``tree_size`` with ``root``."""
    if not (_is_hash(leaf_hash) and _is_hash(root) and _is_size(index) and _is_size(tree_size)):
        return False
    if index >= tree_size:
        return False
    path = _hash_list(proof, _MAX_PROOF_LENGTH)
    if path is None or len(path) != _inclusion_proof_length(index, tree_size):
        return False
    fn, sn, result = index, tree_size - 1, leaf_hash
    for sibling in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            result = node_hash(sibling, result)
            while fn and not fn & 1:  # right edge: climb past levels with no sibling
                fn >>= 1
                sn >>= 1
        else:
            result = node_hash(result, sibling)
        fn >>= 1
        sn >>= 1
    return sn == 0 and result == root


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """True iff ``proof`` shows the ``old_size`` tree with ``old_root`` is a prefix of the new one.

    ``old_size == 0`` needs an empty proof and ``old_root == empty_root()``; equal sizes need an
    empty proof and equal roots.
    """
    if not (_is_size(old_size) and _is_size(new_size) and _is_hash(old_root) and _is_hash(new_root)):
        return False
    path = _hash_list(proof, _MAX_PROOF_LENGTH)
    if path is None or old_size > new_size:
        return False
    if old_size == 0:
        return not path and old_root == _EMPTY_ROOT and (new_size > 0 or new_root == _EMPTY_ROOT)
    if old_size == new_size:
        return not path and old_root == new_root
    if not path:
        return False
    if old_size & (old_size - 1) == 0:
        path = [old_root, *path]
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    old_result = new_result = path[0]
    for node in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            old_result = node_hash(node, old_result)
            new_result = node_hash(node, new_result)
            while fn and not fn & 1:  # right edge: climb past levels with no sibling
                fn >>= 1
                sn >>= 1
        else:
            new_result = node_hash(new_result, node)
        fn >>= 1
        sn >>= 1
    return sn == 0 and old_result == old_root and new_result == new_root


# --- storage-based proofs over perfect subtrees ------------------------------------------------


def perfect_subtree_ranges(start: int, end: int) -> list[tuple[int, int]]:
    """Split ``[start, end)`` into the fewest aligned perfect ranges, left to right.

    ``perfect_subtree_ranges(0, n)`` are the ranges held by the :class:`Frontier` of size ``n``.
    For a node of the tree (``start`` a multiple of a power of two ``>= end - start``) the ranges
    shrink left to right and folding their hashes from the right gives the node's hash.
    """
    _require_index(start, "start")
    _require_index(end, "end")
    if not 0 <= start <= end:
        raise ValueError(f"need 0 <= start <= end, got {start}, {end}")
    ranges: list[tuple[int, int]] = []
    while start < end:
        width = 1 << ((end - start).bit_length() - 1)
        if start:
            width = min(width, start & -start)
        ranges.append((start, start + width))
        start += width
    return ranges


def _fetch(get_subtree_hash: SubtreeHashGetter, start: int, end: int) -> bytes:
    value = get_subtree_hash(start, end)
    if not _is_hash(value):
        raise ValueError(f"get_subtree_hash({start}, {end}) returned {value!r}, not a {HASH_SIZE}-byte hash")
    return value


def _node_from_subtrees(get_subtree_hash: SubtreeHashGetter, start: int, end: int) -> bytes:
    pieces = [_fetch(get_subtree_hash, a, b) for a, b in perfect_subtree_ranges(start, end)]
    result = pieces[-1]
    for piece in reversed(pieces[:-1]):
        result = node_hash(piece, result)
    return result


def root_from_subtrees(tree_size: int, get_subtree_hash: SubtreeHashGetter) -> bytes:
    """Root of the tree of ``tree_size`` leaves from at most ``log2(n) + 1`` callback calls."""
    _require_index(tree_size, "tree_size")
    if tree_size < 0:
        raise ValueError("tree_size must be >= 0")
    return _node_from_subtrees(get_subtree_hash, 0, tree_size) if tree_size else _EMPTY_ROOT


def inclusion_proof_from_subtrees(
    index: int, tree_size: int, get_subtree_hash: SubtreeHashGetter
) -> list[bytes]:
    """Same as :func:`inclusion_proof` for leaf ``index`` of a ``tree_size`` tree, from stored subtrees.

    Walks from the root down to the leaf; every sibling is one perfect subtree except at most one
    right-edge sibling, which is folded from at most ``log2(n)`` perfect pieces.
    """
    _require_index(index, "index")
    _require_index(tree_size, "tree_size")
    if not 0 <= index < tree_size:
        raise IndexError(f"leaf index {index} outside [0, {tree_size})")
    top_down: list[bytes] = []
    start, end = 0, tree_size
    while end - start > 1:
        mid = start + _split(end - start)
        if index < mid:
            top_down.append(_node_from_subtrees(get_subtree_hash, mid, end))
            end = mid
        else:
            top_down.append(_fetch(get_subtree_hash, start, mid))
            start = mid
    return top_down[::-1]


def consistency_proof_from_subtrees(
    old_size: int, new_size: int, get_subtree_hash: SubtreeHashGetter
) -> list[bytes]:
    """Same as :func:`consistency_proof` for ``old_size -> new_size``, from stored subtrees."""
    _require_index(old_size, "old_size")
    _require_index(new_size, "new_size")
    if not 0 <= old_size <= new_size:
        raise ValueError(f"need 0 <= old_size <= new_size, got {old_size}, {new_size}")
    if old_size in (0, new_size):
        return []
    top_down: list[bytes] = []
    start, end, remaining, complete = 0, new_size, old_size, True
    while remaining != end - start:
        mid = start + _split(end - start)
        if remaining <= mid - start:
            top_down.append(_node_from_subtrees(get_subtree_hash, mid, end))
            end = mid
        else:
            top_down.append(_fetch(get_subtree_hash, start, mid))
            remaining -= mid - start
            start, complete = mid, False
    if not complete:
        top_down.append(_node_from_subtrees(get_subtree_hash, start, end))
    return top_down[::-1]


# --- incremental appends -----------------------------------------------------------------------


class Subtree(NamedTuple):
    """A perfect subtree over leaves ``[start, end)`` and its root hash."""

    start: int
    end: int
    hash: bytes


@dataclass(frozen=True)
class Frontier:
    """Compact range ``[0, size)``: roots of the perfect subtrees given by the bits of ``size``.

    ``subtree_roots[i]`` covers ``perfect_subtree_ranges(0, size)[i]``, largest first. Immutable;
    :meth:`append` returns a new frontier.
    """

    size: int = 0
    subtree_roots: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        if not _is_size(self.size):
            raise ValueError(f"size must be an int in [0, {MAX_TREE_SIZE}]")
        if not isinstance(self.subtree_roots, tuple) or len(self.subtree_roots) != self.size.bit_count():
            raise ValueError(f"a frontier of size {self.size} holds {self.size.bit_count()} subtree roots")
        if not all(_is_hash(value) for value in self.subtree_roots):
            raise ValueError(f"subtree roots must be {HASH_SIZE} bytes")

    @classmethod
    def from_leaf_hashes(cls, leaf_hashes: Sequence[bytes]) -> Frontier:
        """Frontier after appending every hash in ``leaf_hashes`` to an empty tree."""
        frontier = cls()
        for value in leaf_hashes:
            frontier = frontier.append(value)
        return frontier

    @classmethod
    def from_subtrees(cls, size: int, get_subtree_hash: SubtreeHashGetter) -> Frontier:
        """Reload the frontier of a stored tree with ``popcount(size)`` callback calls."""
        _require_index(size, "size")
        ranges = perfect_subtree_ranges(0, size)
        return cls(size, tuple(_fetch(get_subtree_hash, a, b) for a, b in ranges))

    def ranges(self) -> list[tuple[int, int]]:
        """The leaf ranges that :attr:`subtree_roots` cover, left to right."""
        return perfect_subtree_ranges(0, self.size)

    def append_with_subtrees(self, leaf_hash: bytes) -> tuple[Frontier, tuple[Subtree, ...]]:
        """Append one leaf hash; also return the perfect subtrees it completed, smallest first.

        The first completed subtree is the leaf itself (``[size, size + 1)``); a storage layer that
        persists all of them can answer every ``get_subtree_hash`` call.
        """
        if not _is_hash(leaf_hash):
            raise ValueError(f"leaf hash must be {HASH_SIZE} bytes")
        if self.size >= MAX_TREE_SIZE:
            raise ValueError("tree is full")
        roots = list(self.subtree_roots)
        node, width, end = leaf_hash, 1, self.size + 1
        completed = [Subtree(self.size, end, node)]
        while self.size & width:
            node = node_hash(roots.pop(), node)
            width <<= 1
            completed.append(Subtree(end - width, end, node))
        roots.append(node)
        return Frontier(end, tuple(roots)), tuple(completed)

    def append(self, leaf_hash: bytes) -> Frontier:
        """Frontier with one more leaf hash; O(log n) hashes."""
        return self.append_with_subtrees(leaf_hash)[0]

    def root(self) -> bytes:
        """Root of the tree of ``size`` leaves (equals :func:`root_from_leaf_hashes`)."""
        if not self.subtree_roots:
            return _EMPTY_ROOT
        result = self.subtree_roots[-1]
        for value in reversed(self.subtree_roots[:-1]):
            result = node_hash(value, result)
        return result
