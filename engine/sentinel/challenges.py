"""Challenge packets (Module 08) and their deterministic ids.

``challenge_id`` is defined exactly as::

    preimage = {"kind": kind, "market_id": market_id, "bundle_root": bundle_root,
                "leaf_index": leaf_index, "leaf_hash": leaf_hash}
    challenge_id = "ch_" + sha256(canonical_bytes(preimage)).hexdigest()[:24]

* ``canonical_bytes`` is the project's canonical JSON (Cournot rules: keys sorted by code point,
  ``,``/``:`` separators, raw UTF-8), so a key whose value is None is **dropped**, not written as null;
* ``bundle_root`` (the *claimed* ``por_root`` of the disputed package) and ``leaf_hash`` are ``0x`` +
  64 hex digits and are **lower-cased** before hashing; anything else raises ``ValueError``;
* ``leaf_index`` is a JSON integer (booleans are rejected); ``market_id`` is used verbatim;
* the id keeps the first **24 lowercase hex characters** (12 bytes) of the digest, after ``ch_``.

``leaf_index``/``leaf_hash`` are set only when one leaf of the evidence or reasoning tree is
pinpointed; root-level, prompt, verdict and por_root challenges leave them None.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from engine.canonical import canonical_bytes, from_hex, to_hex
from engine.merkle import CournotProof, cournot_proof, verify_cournot_proof
from engine.schemas import StrictModel

__all__ = [
    "CHALLENGE_ID_HEX_CHARS",
    "Challenge",
    "ChallengeKind",
    "MerkleProofPacket",
    "ProofTree",
    "challenge_id",
    "make_challenge",
]

CHALLENGE_ID_HEX_CHARS = 24
ChallengeKind = Literal[
    "prompt_hash", "evidence_leaf", "reasoning_leaf", "verdict_hash", "por_root", "replay_divergence"
]
ProofTree = Literal["evidence", "reasoning", "por"]

_HEX32 = re.compile(r"0x[0-9a-fA-F]{64}")


def _hex32(name: str, value: str) -> str:
    if not isinstance(value, str) or not _HEX32.fullmatch(value):
        raise ValueError(f"{name} must be 0x followed by 64 hex digits, got {value!r}")
    return value.lower()


def challenge_id(
    kind: str, market_id: str, bundle_root: str, leaf_index: int | None = None, leaf_hash: str | None = None
) -> str:
    """The documented challenge id (see the module docstring)."""
    if leaf_index is not None and (isinstance(leaf_index, bool) or not isinstance(leaf_index, int)):
        raise ValueError(f"leaf_index must be an integer or None, got {leaf_index!r}")
    preimage: dict[str, Any] = {
        "bundle_root": _hex32("bundle_root", bundle_root),
        "kind": kind,
        "leaf_hash": None if leaf_hash is None else _hex32("leaf_hash", leaf_hash),
        "leaf_index": leaf_index,
        "market_id": market_id,
    }
    return "ch_" + hashlib.sha256(canonical_bytes(preimage)).hexdigest()[:CHALLENGE_ID_HEX_CHARS]


class MerkleProofPacket(StrictModel):
    """A Cournot Merkle inclusion proof in wire form: hex strings, bottom-up siblings, leaf count."""

    tree: ProofTree
    leaf: str
    index: int = Field(ge=0)
    siblings: list[str]
    root: str
    leaf_count: int = Field(ge=1)

    @classmethod
    def build(cls, tree: ProofTree, leaves: Sequence[bytes], index: int) -> MerkleProofPacket:
        """Proof for ``leaves[index]`` in the tree over ``leaves``."""
        proof = cournot_proof(leaves, index)
        return cls(
            tree=tree,
            leaf=to_hex(proof.leaf),
            index=proof.index,
            siblings=[to_hex(sibling) for sibling in proof.siblings],
            root=to_hex(proof.root),
            leaf_count=proof.leaf_count,
        )

    def to_cournot_proof(self) -> CournotProof:
        """The proof as :class:`engine.merkle.CournotProof` (raises ``ValueError`` on bad hex)."""
        return CournotProof(
            leaf=from_hex(self.leaf),
            index=self.index,
            siblings=tuple(from_hex(sibling) for sibling in self.siblings),
            root=from_hex(self.root),
            leaf_count=self.leaf_count,
        )

    def verify(self, *, root: str | None = None, leaf_count: int | None = None) -> bool:
        """True iff the proof verifies against ``root``/``leaf_count`` (default: its own claims)."""
        try:
            proof = self.to_cournot_proof()
            trusted_root = from_hex(root if root is not None else self.root)
        except ValueError:
            return False
        count = leaf_count if leaf_count is not None else self.leaf_count
        return verify_cournot_proof(proof, root=trusted_root, leaf_count=count)


class Challenge(StrictModel):
    """A dispute packet: what is wrong, in which package, and the proof of what was recomputed."""

    challenge_id: str
    kind: ChallengeKind
    market_id: str
    bundle_root: str
    component_root: str | None = None
    leaf_index: int | None = None
    leaf_hash: str | None = None
    merkle_proof: MerkleProofPacket | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    def id_is_valid(self) -> bool:
        """True iff ``challenge_id`` matches the documented formula for this packet."""
        try:
            expected = challenge_id(
                self.kind, self.market_id, self.bundle_root, self.leaf_index, self.leaf_hash
            )
        except ValueError:
            return False
        return expected == self.challenge_id


def make_challenge(
    kind: ChallengeKind,
    *,
    market_id: str,
    bundle_root: str,
    component_root: str | None = None,
    leaf_index: int | None = None,
    leaf_hash: str | None = None,
    merkle_proof: MerkleProofPacket | None = None,
    details: dict[str, Any] | None = None,
) -> Challenge:
    """Build a challenge with its id computed by :func:`challenge_id`; hex fields are lower-cased."""
    bundle_root = _hex32("bundle_root", bundle_root)
    leaf_hash = None if leaf_hash is None else _hex32("leaf_hash", leaf_hash)
    return Challenge(
        challenge_id=challenge_id(kind, market_id, bundle_root, leaf_index, leaf_hash),
        kind=kind,
        market_id=market_id,
        bundle_root=bundle_root,
        component_root=None if component_root is None else _hex32("component_root", component_root),
        leaf_index=leaf_index,
        leaf_hash=leaf_hash,
        merkle_proof=merkle_proof,
        details=dict(details or {}),
    )
