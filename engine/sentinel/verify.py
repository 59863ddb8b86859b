"""Sentinel (Module 08): re-verify a package and emit pinpoint challenges.

Verify-only mode (default; pure, no I/O) recomputes every commitment from the package's artifacts
and compares it with the claimed ``roots``. Check ids, in report order:

* ``schema_lock.*`` (as the Judge's; reported as *warnings*, since the verdict already records them);
* ``consistency.market_id``, ``consistency.trace_evidence_refs``, ``consistency.selected_leaf_refs``;
* ``commitment.prompt_spec_hash``;
* ``commitment.evidence_root`` (root and leaf count), and with stored leaf hashes
  ``commitment.evidence_leaves`` and ``commitment.stored_evidence_leaves_root``;
* the same three for ``reasoning`` (stored step hashes come from ``stored_step_hashes``, else from
  every step's ``hash_commitment`` when all steps carry one);
* ``commitment.verdict_hash`` and ``verdict_refs.{prompt_spec_hash,evidence_root,reasoning_root}``;
* ``commitment.por_root`` and ``commitment.por_root_internal`` (claimed por_root over the claimed
  components); in replay mode, ``replay``.

Challenges (at most one per kind, in this order; ``bundle_root`` is the claimed ``por_root``):

* ``prompt_hash``: the recomputed prompt hash differs; proof of it as leaf 0 of the recomputed PoR tree.
* ``evidence_leaf`` / ``reasoning_leaf``: the root, leaf count or stored leaf hashes differ. With
  stored leaf hashes the **first differing index** is pinpointed: ``leaf_index``, ``leaf_hash`` (the
  recomputed leaf) and a proof in the recomputed component tree. Otherwise (or when that index lies
  past the recomputed leaves) the challenge is root-level, with a proof of the recomputed component
  root as leaf 1 / 2 of the recomputed PoR tree.
* ``verdict_hash``: the verdict hash differs, or a verdict reference disagrees with a component that
  is not itself disputed; proof of the recomputed verdict hash as leaf 3 of the PoR tree.
* ``por_root``: the claimed por_root is neither the root over the claimed components nor the
  recomputed one; the proof opens the recomputed PoR tree from leaf 0 and ``details.components``
  lists all four recomputed leaves.
* ``replay_divergence`` (replay mode): the fresh pipeline run differs from the package under the same
  engine version; pinpoints the first differing step in the package's reasoning tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engine.canonical import from_hex, to_hex
from engine.commitments import evidence_leaf_hashes, prompt_spec_hash, reasoning_leaf_hashes, verdict_hash
from engine.judge import SchemaLock
from engine.merkle import cournot_root
from engine.pipeline import run_pipeline
from engine.schemas import CheckResult, PoRRoots
from engine.sentinel.challenges import Challenge, ChallengeKind, MerkleProofPacket, ProofTree, make_challenge
from engine.sentinel.package import SentinelReport, VerificationPackage
from engine.sentinel.replay import ReplayComparison, ReplaySnapshot, replay_compare

__all__ = ["SentinelAgent", "verify_package"]

POR_INDEX = {
    "prompt_spec_hash": 0,
    "evidence_root": 1,
    "evidence_leaf_count": 1,
    "reasoning_root": 2,
    "reasoning_leaf_count": 2,
    "verdict_hash": 3,
    "por_root": 0,
}


@dataclass(frozen=True)
class _Tree:
    """One component tree: its challenge kind, recomputed leaves, claims and leaf names."""

    name: Literal["evidence", "reasoning"]
    kind: ChallengeKind
    leaves: list[bytes]
    claimed_root: str
    claimed_count: int
    stored: list[str] | None
    leaf_ids: list[str]
    id_key: str
    por_index: int


def _at(values: Sequence[str], index: int) -> str | None:
    return values[index] if index < len(values) else None


def _root_of_hex(values: Sequence[str]) -> str | None:
    try:
        return to_hex(cournot_root([from_hex(value) for value in values]))
    except ValueError:
        return None


class _Verifier:
    """One verification run; accumulates checks and challenges in report order."""

    def __init__(self, package: VerificationPackage) -> None:
        self.package = package
        self.market_id = package.prompt_spec.market.market_id
        self.bundle_root = package.roots.por_root
        self.checks: list[CheckResult] = []
        self.challenges: list[Challenge] = []
        self.disputed: set[str] = set()
        trace = package.trace
        self.evidence_leaves = evidence_leaf_hashes(package.evidence)
        self.reasoning_leaves = reasoning_leaf_hashes(trace.steps)
        self.prompt_hash = prompt_spec_hash(package.prompt_spec)
        self.verdict_hash = verdict_hash(package.verdict)
        self.por_leaves = [
            from_hex(self.prompt_hash),
            cournot_root(self.evidence_leaves),
            cournot_root(self.reasoning_leaves),
            from_hex(self.verdict_hash),
        ]
        self.recomputed = PoRRoots(
            prompt_spec_hash=self.prompt_hash,
            evidence_root=to_hex(self.por_leaves[1]),
            evidence_leaf_count=len(self.evidence_leaves),
            reasoning_root=to_hex(self.por_leaves[2]),
            reasoning_leaf_count=len(self.reasoning_leaves),
            verdict_hash=self.verdict_hash,
            por_root=to_hex(cournot_root(self.por_leaves)),
        )
        self.stored_step_hashes = package.stored_step_hashes
        if self.stored_step_hashes is None and trace.steps and all(s.hash_commitment for s in trace.steps):
            self.stored_step_hashes = [str(step.hash_commitment).lower() for step in trace.steps]

    def check(self, check_id: str, ok: bool, message: str, details: dict[str, Any] | None = None) -> bool:
        factory = CheckResult.passed if ok else CheckResult.failed
        self.checks.append(factory(check_id, message if ok else f"{message}: mismatch", details))
        return ok

    def por_proof(self, index: int) -> MerkleProofPacket:
        return MerkleProofPacket.build("por", self.por_leaves, index)

    def challenge(self, kind: ChallengeKind, **fields: Any) -> None:
        self.challenges.append(
            make_challenge(kind, market_id=self.market_id, bundle_root=self.bundle_root, **fields)
        )

    # -- groups ---------------------------------------------------------------------------------

    def schema_lock(self) -> None:
        lock = [
            *SchemaLock.verify_prompt_spec(self.package.prompt_spec),
            *SchemaLock.verify_trace(self.package.trace),
        ]
        for check in lock:
            self.checks.append(
                check if check.ok else CheckResult.warning(check.check_id, check.message, check.details)
            )

    def consistency(self) -> None:
        package = self.package
        markets = {"evidence": package.evidence.market_id, "verdict": package.verdict.market_id}
        self.check(
            "consistency.market_id",
            all(value == self.market_id for value in markets.values()),
            "evidence and verdict belong to the prompt's market",
            {"market_id": self.market_id, **markets},
        )
        known = {item.evidence_id for item in package.evidence.items}
        cited = [eid for step in package.trace.steps for eid in step.evidence_ids]
        unknown = list(dict.fromkeys(eid for eid in cited if eid not in known))
        self.check(
            "consistency.trace_evidence_refs",
            not unknown,
            "trace cites only bundle evidence",
            {"unknown": unknown},
        )
        unknown_refs = [eid for eid in package.verdict.selected_leaf_refs if eid not in known]
        self.check(
            "consistency.selected_leaf_refs",
            not unknown_refs,
            "verdict selects only bundle evidence",
            {"unknown": unknown_refs},
        )

    def prompt(self) -> None:
        claimed = self.package.roots.prompt_spec_hash
        details = {"claimed": claimed, "recomputed": self.prompt_hash}
        if self.check(
            "commitment.prompt_spec_hash", claimed == self.prompt_hash, "prompt_spec_hash", details
        ):
            return
        self.disputed.add("prompt_spec_hash")
        self.challenge("prompt_hash", merkle_proof=self.por_proof(0), details=details)

    def tree(self, tree: _Tree) -> None:
        recomputed_hex = [to_hex(leaf) for leaf in tree.leaves]
        root = to_hex(cournot_root(tree.leaves))
        details: dict[str, Any] = {
            "claimed_leaf_count": tree.claimed_count,
            "claimed_root": tree.claimed_root,
            "recomputed_leaf_count": len(tree.leaves),
            "recomputed_root": root,
        }
        root_ok = tree.claimed_root == root and tree.claimed_count == len(tree.leaves)
        self.check(f"commitment.{tree.name}_root", root_ok, f"{tree.name}_root and leaf count", details)
        differing: list[int] = []
        if tree.stored is not None:
            stored = tree.stored
            width = max(len(stored), len(recomputed_hex))
            differing = [i for i in range(width) if _at(stored, i) != _at(recomputed_hex, i)]
            self.check(
                f"commitment.{tree.name}_leaves",
                not differing,
                f"stored {tree.name} leaf hashes",
                {"differing_indexes": differing},
            )
            stored_root = _root_of_hex(stored)
            self.check(
                f"commitment.stored_{tree.name}_leaves_root",
                stored_root == tree.claimed_root and len(stored) == tree.claimed_count,
                f"stored {tree.name} leaf hashes commit to the claimed root",
                {"stored_leaf_count": len(stored), "stored_leaves_root": stored_root},
            )
        if root_ok and not differing:
            return
        self.disputed.add(f"{tree.name}_root")
        if differing:
            details["differing_indexes"] = differing
        first = differing[0] if differing else None
        if first is not None and first < len(tree.leaves):
            details[tree.id_key] = tree.leaf_ids[first]
            stored_leaf = _at(tree.stored or [], first)
            if stored_leaf is not None:
                details["stored_leaf_hash"] = stored_leaf
            proof_tree: ProofTree = tree.name
            self.challenge(
                tree.kind,
                component_root=root,
                leaf_index=first,
                leaf_hash=recomputed_hex[first],
                merkle_proof=MerkleProofPacket.build(proof_tree, tree.leaves, first),
                details=details,
            )
            return
        if first is not None:
            details["first_differing_index"] = first
        self.challenge(
            tree.kind, component_root=root, merkle_proof=self.por_proof(tree.por_index), details=details
        )

    def components(self) -> None:
        package = self.package
        roots = package.roots
        self.tree(
            _Tree(
                name="evidence",
                kind="evidence_leaf",
                leaves=self.evidence_leaves,
                claimed_root=roots.evidence_root,
                claimed_count=roots.evidence_leaf_count,
                stored=package.stored_evidence_leaf_hashes,
                leaf_ids=[item.evidence_id for item in package.evidence.items],
                id_key="evidence_id",
                por_index=1,
            )
        )
        self.tree(
            _Tree(
                name="reasoning",
                kind="reasoning_leaf",
                leaves=self.reasoning_leaves,
                claimed_root=roots.reasoning_root,
                claimed_count=roots.reasoning_leaf_count,
                stored=self.stored_step_hashes,
                leaf_ids=[step.step_id for step in package.trace.steps],
                id_key="step_id",
                por_index=2,
            )
        )

    def verdict(self) -> None:
        verdict = self.package.verdict
        claimed = self.package.roots.verdict_hash
        details: dict[str, Any] = {"claimed": claimed, "recomputed": self.verdict_hash}
        hash_ok = self.check("commitment.verdict_hash", claimed == self.verdict_hash, "verdict_hash", details)
        expected = {
            "prompt_spec_hash": self.recomputed.prompt_spec_hash,
            "evidence_root": self.recomputed.evidence_root,
            "reasoning_root": self.recomputed.reasoning_root,
        }
        unexplained: list[str] = []
        for name, value in expected.items():
            actual = getattr(verdict, name)
            ok = self.check(
                f"verdict_refs.{name}",
                actual == value,
                f"verdict.{name}",
                {"verdict": actual, "recomputed": value},
            )
            if not ok and name not in self.disputed:
                unexplained.append(name)
        if hash_ok and not unexplained:
            return
        if unexplained:
            details["inconsistent_refs"] = unexplained
        self.challenge("verdict_hash", merkle_proof=self.por_proof(3), details=details)

    def por_root(self) -> None:
        roots = self.package.roots
        recomputed = self.recomputed.por_root
        self.check(
            "commitment.por_root",
            roots.por_root == recomputed,
            "por_root",
            {"claimed": roots.por_root, "recomputed": recomputed},
        )
        claimed_components = [
            roots.prompt_spec_hash,
            roots.evidence_root,
            roots.reasoning_root,
            roots.verdict_hash,
        ]
        internal = _root_of_hex(claimed_components)
        internal_ok = self.check(
            "commitment.por_root_internal",
            roots.por_root == internal,
            "claimed por_root commits to the claimed components",
            {"root_over_claimed_components": internal},
        )
        if internal_ok or roots.por_root == recomputed:
            return  # a wrong component claim is challenged by its own kind; the por_root itself is right
        details = {
            "claimed_por_root": roots.por_root,
            "components": [to_hex(leaf) for leaf in self.por_leaves],
            "recomputed_por_root": recomputed,
            "root_over_claimed_components": internal,
        }
        self.challenge("por_root", merkle_proof=self.por_proof(0), details=details)

    def replay(self) -> ReplayComparison:
        package = self.package
        result = run_pipeline(package.prompt_spec, package.evidence)
        stored = ReplaySnapshot.from_artifacts(
            engine_version=package.effective_engine_version(),
            steps=package.trace.steps,
            verdict=package.verdict,
            roots=package.roots,
            step_hashes=self.stored_step_hashes,
        )
        comparison = replay_compare(stored, result)
        summary = comparison.model_dump(
            exclude_none=True, exclude={"stored_canonical", "recomputed_canonical"}
        )
        if comparison.status == "identical":
            self.checks.append(CheckResult.passed("replay", "replay is byte-identical", summary))
        elif comparison.status == "version_drift":
            self.checks.append(
                CheckResult.warning("replay", "engine version differs: version drift", summary)
            )
        else:
            self.checks.append(CheckResult.failed("replay", "replay diverged", summary))
            self.replay_challenge(comparison, result.step_hashes)
        return comparison

    def replay_challenge(self, comparison: ReplayComparison, replayed_hashes: Sequence[str]) -> None:
        details: dict[str, Any] = comparison.model_dump(exclude_none=True, exclude={"status"})
        index = comparison.first_divergent_step_index
        if comparison.component in ("step", "step_hash") and index is not None:
            replayed = _at(replayed_hashes, index)
            if replayed is not None:
                details["replayed_step_hash"] = replayed
            if index < len(self.reasoning_leaves):
                details["step_id"] = self.package.trace.steps[index].step_id
                self.challenge(
                    "replay_divergence",
                    component_root=self.recomputed.reasoning_root,
                    leaf_index=index,
                    leaf_hash=to_hex(self.reasoning_leaves[index]),
                    merkle_proof=MerkleProofPacket.build("reasoning", self.reasoning_leaves, index),
                    details=details,
                )
                return
        por_index = 3 if comparison.component == "verdict" else POR_INDEX.get(comparison.root_field or "", 2)
        self.challenge("replay_divergence", merkle_proof=self.por_proof(por_index), details=details)


def verify_package(
    package: VerificationPackage, *, mode: Literal["verify", "replay"] = "verify"
) -> SentinelReport:
    """Verify ``package``; ``mode="replay"`` also re-runs the pipeline and compares byte for byte."""
    verifier = _Verifier(package)
    verifier.schema_lock()
    verifier.consistency()
    verifier.prompt()
    verifier.components()
    verifier.verdict()
    verifier.por_root()
    comparison = verifier.replay() if mode == "replay" else None
    return SentinelReport(
        ok=all(check.ok for check in verifier.checks),
        mode=mode,
        checks=verifier.checks,
        challenges=verifier.challenges,
        recomputed_roots=verifier.recomputed,
        replay=comparison,
    )


class SentinelAgent:
    """Independent verifier node: ``verify(package, mode=...)`` → :class:`SentinelReport`."""

    role = "validator"

    def verify(
        self, package: VerificationPackage, *, mode: Literal["verify", "replay"] = "verify"
    ) -> SentinelReport:
        """See :func:`verify_package`."""
        return verify_package(package, mode=mode)
