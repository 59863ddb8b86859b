"""Recompute the five PoR commitments of a pack and pinpoint every disagreement with a challenge.

Challenges reuse the Sentinel's packets (:mod:`engine.sentinel.challenges`); ``bundle_root`` is the
pack's claimed ``por_root`` (or, when it has none, the root over its claimed components). A proof
in ``details.proof_against``:

* ``claimed_root``: the verifier rebuilt the leaves the claim was made over (steps back in id
  order; the recomputed components of the PoR tree) and proves the *expected* leaf against the
  *claimed* root: the proof verifies, and the pack's leaf at that index differs;
* ``recomputed_root``: a witness named the leaf but the original leaf cannot be rebuilt; the
  proof opens the pack's own leaf in the recomputed tree;
* ``recomputed_por_tree``: nothing names a leaf; the proof opens the recomputed component root
  as a leaf of the recomputed PoR tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from engine.canonical import from_hex, hash_canonical, to_hex
from engine.merkle import cournot_root
from engine.por_pack.models import PackCheck, PipelineReasoningTrace
from engine.por_pack.order import settle_verdict_hash
from engine.por_pack.witness import evidence_witnesses, natural_step_order, reasoning_witnesses
from engine.schemas import DeterministicVerdict, EvidenceBundle, PoRBundle, PromptSpec
from engine.sentinel.challenges import Challenge, ChallengeKind, MerkleProofPacket, make_challenge

__all__ = ["RootChecker"]

COMPONENTS = ("prompt_spec_hash", "evidence_root", "reasoning_root", "verdict_hash")


@dataclass
class RootChecker:
    """Holds one pack's parsed parts and collects root checks and challenges."""

    prompt: PromptSpec
    evidence: EvidenceBundle
    trace: PipelineReasoningTrace
    verdict: DeterministicVerdict
    por: PoRBundle
    paths: dict[str, str]
    checks: list[PackCheck] = field(default_factory=list)
    challenges: list[Challenge] = field(default_factory=list)
    recomputed: dict[str, str] = field(default_factory=dict)
    deferred_root_challenges: list[tuple[ChallengeKind, str, int, dict[str, Any]]] = field(
        default_factory=list
    )

    def __post_init__(self) -> None:
        self.verdict_unverifiable = False
        self.evidence_leaves = [hash_canonical(item) for item in self.evidence.items]
        self.reasoning_leaves = [hash_canonical(step) for step in self.trace.steps]
        self.claimed = {name: str(getattr(self.por, name)) for name in COMPONENTS}
        claimed_components = [from_hex(self.claimed[name]) for name in COMPONENTS]
        self.claimed_por = self.por.por_root or to_hex(cournot_root(claimed_components))
        self.market_id = self.por.market_id

    # -- helpers ----------------------------------------------------------------------------------

    def _por_leaves(self) -> list[bytes]:
        return [from_hex(self.recomputed[name]) for name in COMPONENTS]

    def _challenge(self, kind: ChallengeKind, **fields: Any) -> None:
        self.challenges.append(
            make_challenge(kind, market_id=self.market_id, bundle_root=self.claimed_por, **fields)
        )

    def _check(self, check_id: str, ok: bool, message: str, **fields: Any) -> None:
        status = "ok" if ok else "failed"
        self.checks.append(
            PackCheck.model_validate({"check_id": check_id, "status": status, "message": message, **fields})
        )

    # -- components ------------------------------------------------------------------------------

    def prompt_spec_hash(self) -> None:
        value = to_hex(hash_canonical(self.prompt))
        self.recomputed["prompt_spec_hash"] = value
        ok = value == self.claimed["prompt_spec_hash"]
        self._check(
            "root.prompt_spec_hash",
            ok,
            "prompt_spec_hash " + ("matches" if ok else "differs"),
            file=self.paths["prompt_spec"],
            root="prompt_spec_hash",
            leaf_index=0,
            expected=self.claimed["prompt_spec_hash"],
            actual=value,
        )

    def _tree(
        self,
        name: Literal["evidence", "reasoning"],
        leaves: list[bytes],
        witnesses: list[PackCheck],
        rebuilt: list[bytes] | None,
        ids: list[str],
        por_index: int,
    ) -> None:
        root_name = f"{name}_root"
        value = to_hex(cournot_root(leaves))
        self.recomputed[root_name] = value
        claimed = self.claimed[root_name]
        path = self.paths["evidence_bundle" if name == "evidence" else "reasoning_trace"]
        if value == claimed:
            self._check(
                f"root.{root_name}",
                True,
                f"{root_name} matches over {len(leaves)} leaves",
                file=path,
                root=root_name,
                expected=claimed,
                actual=value,
                details={"leaf_count": len(leaves)},
            )
            self.checks.extend(w.model_copy(update={"status": "warn"}) for w in witnesses)
            return
        kind: ChallengeKind = "evidence_leaf" if name == "evidence" else "reasoning_leaf"
        id_key = "evidence_id" if name == "evidence" else "step_id"
        if rebuilt is not None and to_hex(cournot_root(rebuilt)) == claimed:
            index = next(i for i, (a, b) in enumerate(zip(leaves, rebuilt, strict=True)) if a != b)
            proof = MerkleProofPacket.build(name, rebuilt, index)
            where = {"leaf_index": index, id_key: ids[index], "proof_against": "claimed_root"}
            self._check(
                f"root.{root_name}",
                False,
                f"{root_name} differs; the claimed root is reproduced with the steps in id order, "
                f"and leaf {index} is not the leaf the claim was made over",
                file=path,
                root=root_name,
                leaf_index=index,
                expected=claimed,
                actual=value,
                details=where,
                **{id_key: ids[index]},
            )
            self._challenge(
                kind,
                component_root=claimed,
                leaf_index=index,
                leaf_hash=to_hex(rebuilt[index]),
                merkle_proof=proof,
                details={**where, "pack_leaf": to_hex(leaves[index])},
            )
            self.checks.extend(witnesses)
            return
        named = next((w for w in witnesses if w.leaf_index is not None and w.leaf_index < len(leaves)), None)
        any_witness = next(iter(witnesses), None)
        pin: dict[str, Any] = {}
        if named is not None:
            pin = {"leaf_index": named.leaf_index, "step_id": named.step_id, "evidence_id": named.evidence_id}
        elif any_witness is not None:
            pin = {
                "leaf_index": any_witness.leaf_index,
                "step_id": any_witness.step_id,
                "evidence_id": any_witness.evidence_id,
            }
        details: dict[str, Any] = {"leaf_count": len(leaves), "witness": named.check_id if named else None}
        if any_witness is None:
            details["pinpoint"] = "root only: no witness in the pack names the changed leaf"
        self._check(
            f"root.{root_name}",
            False,
            f"{root_name} differs from the claim",
            file=path,
            root=root_name,
            expected=claimed,
            actual=value,
            details=details,
            **pin,
        )
        if named is not None and named.leaf_index is not None:
            index = named.leaf_index
            self._challenge(
                kind,
                component_root=value,
                leaf_index=index,
                leaf_hash=to_hex(leaves[index]),
                merkle_proof=MerkleProofPacket.build(name, leaves, index),
                details={
                    "proof_against": "recomputed_root",
                    "witness": named.check_id,
                    "step_id": named.step_id,
                    "evidence_id": named.evidence_id,
                },
            )
        else:
            self.deferred_root_challenges.append((kind, value, por_index, pin))
        self.checks.extend(witnesses)

    def evidence_root(self) -> None:
        witnesses = evidence_witnesses(self.evidence, self.trace, self.paths["evidence_bundle"])
        ids = [item.evidence_id for item in self.evidence.items]
        self._tree("evidence", self.evidence_leaves, witnesses, None, ids, 1)

    def reasoning_root(self) -> None:
        witnesses = reasoning_witnesses(self.trace, self.verdict, self.paths["reasoning_trace"])
        order = natural_step_order(self.trace.steps)
        rebuilt = [self.reasoning_leaves[i] for i in order] if order != list(range(len(order))) else None
        ids = [step.step_id for step in self.trace.steps]
        self._tree("reasoning", self.reasoning_leaves, witnesses, rebuilt, ids, 2)

    def verdict_hash(self) -> None:
        claimed = self.claimed["verdict_hash"]
        settled = settle_verdict_hash(self.verdict, claimed)
        # ok/warn: some order reproduces the claim. unverifiable: the por_root check then rests on the
        # claimed verdict hash, which it says in its details; the pack's status is never ok.
        self.recomputed["verdict_hash"] = settled.recomputed if settled.status == "failed" else claimed
        self.verdict_unverifiable = settled.status == "unverifiable"
        messages = {
            "ok": "verdict_hash matches the verdict as written",
            "warn": "verdict_hash is reproduced only by another order of Cournot's set-ordered fields",
            "failed": "verdict_hash differs, in every order of the set-ordered fields",
            "unverifiable": "verdict_hash differs as written and too many orders exist to test",
        }
        self.checks.append(
            PackCheck(
                check_id="root.verdict_hash",
                status=settled.status,
                message=messages[settled.status],
                file=self.paths["verdict"],
                root="verdict_hash",
                leaf_index=3,
                expected=claimed,
                actual=settled.recomputed,
                details=settled.details,
            )
        )

    def por_root(self) -> None:
        leaves = self._por_leaves()
        value = to_hex(cournot_root(leaves))
        self.recomputed["por_root"] = value
        path = self.paths["por_bundle"]
        ok = value == self.claimed_por
        self._check(
            "root.por_root",
            ok,
            "por_root " + ("matches" if ok else "differs from the recomputed root"),
            file=path,
            root="por_root",
            expected=self.claimed_por,
            actual=value,
            details={"assumes_claimed_verdict_hash": self.verdict_unverifiable},
        )
        if ok:
            differing = [
                i for i, name in enumerate(COMPONENTS) if self.claimed[name] != self.recomputed[name]
            ]
            for index in differing:  # the claimed por_root is genuine; the bundle's component was altered
                name = COMPONENTS[index]
                self._check(
                    f"por_bundle.{name}",
                    False,
                    f"por_bundle.{name} is not the value the por_root commits to at leaf {index}",
                    file=path,
                    root="por_root",
                    leaf_index=index,
                    expected=self.recomputed[name],
                    actual=self.claimed[name],
                    details={"proof_against": "claimed_root"},
                )
                self._challenge(
                    "por_root",
                    component_root=self.claimed_por,
                    leaf_index=index,
                    leaf_hash=self.recomputed[name],
                    merkle_proof=MerkleProofPacket.build("por", leaves, index),
                    details={
                        "component": name,
                        "proof_against": "claimed_root",
                        "bundle_value": self.claimed[name],
                    },
                )
            return
        self._root_level_challenges()

    def _root_level_challenges(self) -> None:
        leaves = self._por_leaves()
        if self.recomputed["prompt_spec_hash"] != self.claimed["prompt_spec_hash"]:
            self._challenge(
                "prompt_hash",
                component_root=self.recomputed["prompt_spec_hash"],
                merkle_proof=MerkleProofPacket.build("por", leaves, 0),
                details={"proof_against": "recomputed_por_tree"},
            )
        for kind, value, por_index, pin in self.deferred_root_challenges:
            self._challenge(
                kind,
                component_root=value,
                merkle_proof=MerkleProofPacket.build("por", leaves, por_index),
                details={
                    "proof_against": "recomputed_por_tree",
                    **{k: v for k, v in pin.items() if v is not None},
                },
            )
        if self.recomputed["verdict_hash"] != self.claimed["verdict_hash"]:
            self._challenge(
                "verdict_hash",
                component_root=self.recomputed["verdict_hash"],
                merkle_proof=MerkleProofPacket.build("por", leaves, 3),
                details={"proof_against": "recomputed_por_tree"},
            )
        claimed_components = [from_hex(self.claimed[name]) for name in COMPONENTS]
        if to_hex(cournot_root(claimed_components)) != self.claimed_por:
            self._challenge(
                "por_root",
                component_root=to_hex(cournot_root(leaves)),
                merkle_proof=MerkleProofPacket.build("por", leaves, 0),
                details={
                    "proof_against": "recomputed_por_tree",
                    "claimed_components_consistent": False,
                    "components": dict(self.recomputed),
                },
            )

    def run(self) -> None:
        """All five commitments, in PoR leaf order."""
        self.prompt_spec_hash()
        self.evidence_root()
        self.reasoning_root()
        self.verdict_hash()
        self.por_root()
