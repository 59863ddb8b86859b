"""The tree over replay's outcomes (``results_root``), grown in place.

:class:`engine.merkle.rfc6962.Frontier` is immutable: each ``append`` makes a new frontier, checks
it and records the subtrees it completed, which replay never reads. :class:`ResultsTree` keeps the
same subtree roots in one list and makes the :class:`~engine.merkle.rfc6962.Frontier` (checked
once) when asked; the tests pin it to ``Frontier.append`` leaf by leaf.
"""

from __future__ import annotations

from typing import Any

import orjson

from engine.merkle.rfc6962 import HASH_SIZE, Frontier, node_hash
from ledger.store.hashing import canonical_text

__all__ = ["ResultsTree", "leaf_bytes"]


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


def leaf_bytes(values: dict[str, Any]) -> bytes:
    """``canonical_text(values)`` as UTF-8, for a dict of exact ``str`` keys in sorted order.

    When every value is None or an exact ``str``, the canonical text is orjson's with sorted keys
    and the None members dropped: strings are written alike, and no float is there to be spelled
    otherwise (the canonical function re-spells only floats, so a string that merely looks like one
    comes out the same). orjson refusing a string (a lone surrogate) and any other value take the
    canonical function, which decides and raises as before; the tests hold the two equal.
    """
    plain: dict[str, str] = {}
    for key, value in values.items():
        if value is None:
            continue
        if type(value) is not str or type(key) is not str:
            return canonical_text(values).encode("utf-8")
        plain[key] = value
    try:
        return orjson.dumps(plain, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return canonical_text(values).encode("utf-8")
