"""The tree over replay's outcomes (``results_root``), grown in place.

:class:`engine.merkle.rfc6962.Frontier` is immutable: each ``append`` makes a new frontier, checks
it and records the subtrees it completed, which replay never reads. :class:`ResultsTree` keeps the
same subtree roots in one list and makes the :class:`~engine.merkle.rfc6962.Frontier` (checked
once) when asked; the tests pin it to ``Frontier.append`` leaf by leaf.
"""

from __future__ import annotations

from engine.merkle.rfc6962 import HASH_SIZE, Frontier, node_hash

__all__ = ["ResultsTree"]


class ResultsTree:
    """RFC 6962 compact range ``[0, size)`` of appended leaf hashes (roots largest first)."""

    __slots__ = ("_roots", "_size")

    def __init__(self) -> None:
        self._roots: list[bytes] = []
        self._size = 0

    @property
    def size(self) -> int:
        """Leaves appended."""
        return self._size

    def append(self, leaf_hash: bytes) -> None:
        """Append one leaf hash: the perfect subtrees it completes are merged (``Frontier.append``)."""
        if type(leaf_hash) is not bytes or len(leaf_hash) != HASH_SIZE:
            raise ValueError(f"leaf hash must be {HASH_SIZE} bytes")
        roots, node, size = self._roots, leaf_hash, self._size
        while size & 1:
            node = node_hash(roots.pop(), node)
            size >>= 1
        roots.append(node)
        self._size += 1

    def frontier(self) -> Frontier:
        """The :class:`~engine.merkle.rfc6962.Frontier` of the leaves appended so far."""
        return Frontier(self._size, tuple(self._roots))
