"""The Cournot Merkle root as a compiled fold (the proofs and their records stay in :mod:`engine.merkle.cournot`).

Same rules, same errors: leaves are 32-byte hashes used as they are, a parent is
``sha256(left || right)``, a level with an odd number of nodes duplicates its last node, the
empty tree hashes to ``sha256(b"")`` and a single leaf is its own root. Kept apart from
:mod:`engine.merkle.cournot` (whose records are dataclasses) so that ``make compile`` can compile
it: every report and verdict computes two or more of these roots.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

__all__ = ["HASH_SIZE", "cournot_root", "require_leaves"]

HASH_SIZE: Final = 32
_sha256: Final[Any] = hashlib.sha256


def require_leaves(leaves: Sequence[bytes]) -> list[bytes]:
    """``list(leaves)`` once every leaf is 32 bytes; ``ValueError`` naming the first that is not."""
    level: list[Any] = list(leaves)  # Any: no implicit cast, the explicit check below decides
    for position in range(len(level)):
        leaf = level[position]
        if not isinstance(leaf, bytes) or len(leaf) != HASH_SIZE:
            raise ValueError(f"leaf {position} must be {HASH_SIZE} bytes")
    return level


def cournot_root(leaves: Sequence[bytes]) -> bytes:
    """Cournot Merkle root of 32-byte leaf hashes; raises ``ValueError`` on other leaf sizes."""
    level: list[Any] = require_leaves(leaves)
    count = len(level)
    if count == 0:
        digest: bytes = _sha256(b"").digest()
        return digest
    while count > 1:
        if count % 2:
            level.append(level[count - 1])  # this list is our own copy
            count += 1
        parents: list[Any] = []
        for index in range(0, count, 2):
            parents.append(_sha256(level[index] + level[index + 1]).digest())
        level = parents
        count = len(level)
    root: bytes = level[0]
    return root
