"""Root checks of ``ledger verify``: the PoR commitments recomputed from stored bytes.

``reasoning_root`` over the SHA-256 of each stored canonical step, ``evidence_root`` over the
stored evidence items, ``prompt_spec_hash`` over the stored prompt spec, ``verdict_hash`` over the
stored verdict and ``por_root`` over the four are compared with every place that commits to them:
the ``audit.completed``/``verdict.issued`` roots, the ``submission.received`` payload, the
submission's ``input_hashes`` and the verdict's own references. Challenges follow the Sentinel's
rules (``docs/challenges.md``): a component claim that differs gets its kind with a proof in the
recomputed PoR tree; broken steps get ``reasoning_leaf`` challenges pinpointed by leaf index with
a proof in the recomputed reasoning tree; ``bundle_root`` is the claimed ``por_root``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from engine.canonical import canonical_bytes
from engine.sentinel import Challenge, ChallengeKind, MerkleProofPacket, make_challenge
from ledger.verify.canonical_form import cournot_root_hex, is_hex32
from ledger.verify.problems import Problem

__all__ = ["COMPONENTS", "RootChecks"]

COMPONENTS = ("prompt_spec_hash", "evidence_root", "reasoning_root", "verdict_hash")


def sha256_hex(data: bytes) -> str:
    """:func:`engine.canonical.sha256_hex` (``0x`` + SHA-256 hex of ``data``), in this compiled module:
    a native call per evidence item instead of one through the engine's module object."""
    return "0x" + hashlib.sha256(data).hexdigest()


class RootChecks:
    """Mixin of the submission checker: needs ``payloads``, ``problems``, ``report`` and ``group``."""

    payloads: dict[str, Any]
    pieces: dict[str, Any]
    problems: list[Problem]
    market_id: str | None
    claimed_roots: dict[str, Any]
    bundle_root: str | None
    recomputed_por: list[str]
    step_leaves: list[str]

    def report(self, code: str, message: str, **where: Any) -> Problem:
        """Record a problem (implemented by the checker)."""
        raise NotImplementedError

    def roots(self, broken_steps: list[int]) -> None:
        """Recompute the four components and por_root; report every claim that differs."""
        received = self.payloads.get("submission.received")
        audit = self.payloads.get("audit.completed")
        verdict_entry = self.payloads.get("verdict.issued")
        if not all(isinstance(p, dict) for p in (received, audit, verdict_entry)):
            return
        assert isinstance(received, dict) and isinstance(audit, dict) and isinstance(verdict_entry, dict)
        claimed = (
            verdict_entry.get("roots") if isinstance(verdict_entry.get("roots"), dict) else audit.get("roots")
        )
        self.claimed_roots = claimed if isinstance(claimed, dict) else {}
        if audit.get("roots") != verdict_entry.get("roots"):
            self.report(
                "roots_disagree",
                "audit.completed and verdict.issued carry different roots",
                details={"audit": audit.get("roots"), "verdict": verdict_entry.get("roots")},
            )
        spec = received.get("prompt_spec")
        if isinstance(spec, dict) and isinstance(spec.get("market"), dict):
            self.market_id = spec["market"].get("market_id", self.market_id)
        verdict = verdict_entry.get("verdict")
        items = (received.get("evidence_bundle") or {}).get("items")
        if not isinstance(spec, dict) or not isinstance(verdict, dict) or not isinstance(items, list):
            self.report(
                "inputs_missing", "the stored payloads lack the prompt spec, evidence items or verdict"
            )
            return
        pieces = self.pieces
        try:
            prompt_hash = sha256_hex(pieces.get("prompt_spec") or canonical_bytes(spec))
            item_bytes = pieces.get("items") or [canonical_bytes(item) for item in items]
            verdict_hash = sha256_hex(pieces.get("verdict") or canonical_bytes(verdict))
        except ValueError as exc:
            self.report("inputs_invalid", f"a stored input or the verdict has no canonical form: {exc}")
            return
        evidence_leaves = [sha256_hex(data) for data in item_bytes]
        step_leaves = self.step_leaves  # the SHA-256 of each stored canonical step
        components = [
            prompt_hash,
            cournot_root_hex(evidence_leaves),
            cournot_root_hex(step_leaves),
            verdict_hash,
        ]
        self.recomputed_por = components
        por_root = cournot_root_hex(components)
        claimed_por = self.claimed_roots.get("por_root")
        self.bundle_root = claimed_por if is_hex32(claimed_por) else por_root
        inputs = self.payloads.get("input_hashes") or {}
        claims = {
            "prompt_spec_hash": [("roots", self.claimed_roots.get("prompt_spec_hash")), ("submission.received", received.get("prompt_spec_hash")), ("input_hashes", inputs.get("prompt_spec_hash")), ("verdict", verdict.get("prompt_spec_hash"))],
            "evidence_root": [("roots", self.claimed_roots.get("evidence_root")), ("submission.received", received.get("evidence_root")), ("input_hashes", inputs.get("evidence_root")), ("verdict", verdict.get("evidence_root"))],
            "reasoning_root": [("roots", self.claimed_roots.get("reasoning_root")), ("verdict", verdict.get("reasoning_root"))],
            "verdict_hash": [("roots", self.claimed_roots.get("verdict_hash"))],
        }  # fmt: skip
        counts = {"evidence_root": len(evidence_leaves), "reasoning_root": len(step_leaves)}
        disputed: set[str] = set()
        for position, name in enumerate(COMPONENTS):
            wrong = {
                where: value
                for where, value in claims[name]
                if value is not None and value != components[position]
            }
            count_field = name.replace("_root", "_leaf_count")
            if name in counts and self.claimed_roots.get(count_field) != counts[name]:
                wrong[f"roots.{count_field}"] = self.claimed_roots.get(count_field)
            if not wrong:
                continue
            disputed.add(name)
            if name == "reasoning_root" and broken_steps:
                self.leaf_challenges(broken_steps, step_leaves)
                continue
            self.component_problem(
                name,
                position,
                components[position],
                wrong,
                evidence_leaves if name == "evidence_root" else None,
            )
        if broken_steps and "reasoning_root" not in disputed:
            self.leaf_challenges(broken_steps, step_leaves)
        if claimed_por != por_root and claimed_por != self._claimed_internal_root():
            self.report(
                "por_root_mismatch",
                "the claimed por_root is neither the root of the claimed nor of the recomputed components",
                details={"claimed": claimed_por, "recomputed": por_root, "components": components},
                challenge=self.challenge(
                    "por_root",
                    0,
                    details={
                        "claimed_por_root": claimed_por,
                        "components": components,
                        "recomputed_por_root": por_root,
                    },
                ),
            )

    def _claimed_internal_root(self) -> str | None:
        """The root of the claimed components when all four are hex32 (else None): a claimed
        por_root that differs from the recomputed one is accepted if it is this (computed then only)."""
        claimed_components = [self.claimed_roots.get(name) for name in COMPONENTS]
        if not all(is_hex32(value) for value in claimed_components):
            return None
        return cournot_root_hex([str(value) for value in claimed_components])

    def challenge(self, kind: ChallengeKind, por_index: int, **fields: Any) -> Challenge | None:
        """A challenge against the claimed por_root; default proof: leaf ``por_index`` of the PoR tree."""
        if not self.recomputed_por or self.bundle_root is None:
            return None
        leaves = [bytes.fromhex(value[2:]) for value in self.recomputed_por]
        fields.setdefault("merkle_proof", MerkleProofPacket.build("por", leaves, por_index))
        return make_challenge(kind, market_id=self.market_id or "", bundle_root=self.bundle_root, **fields)

    def component_problem(
        self, name: str, position: int, recomputed: str, wrong: dict[str, Any], leaves: list[str] | None
    ) -> None:
        """Report a component whose claims differ from its recomputation, with its challenge."""
        details: dict[str, Any] = {"recomputed": recomputed, "claimed": wrong}
        if leaves is not None:
            details["recomputed_leaf_hashes"] = leaves
        if set(wrong) == {"verdict"}:  # only the verdict's own reference is wrong: the verdict is disputed
            message = f"the verdict's {name} differs from the one recomputed from stored bytes"
            self.report(
                "verdict_ref_mismatch",
                message,
                details=details,
                challenge=self.challenge("verdict_hash", 3, details=details),
            )
            return
        kind: ChallengeKind = ("prompt_hash", "evidence_leaf", "reasoning_leaf", "verdict_hash")[position]
        fields: dict[str, Any] = {"details": details}
        if position in (1, 2):
            fields["component_root"] = recomputed
        message = f"{name} recomputed from stored bytes differs from {', '.join(sorted(wrong))}"
        self.report(
            f"{name}_mismatch", message, details=details, challenge=self.challenge(kind, position, **fields)
        )

    def leaf_challenges(self, broken: list[int], step_leaves: list[str]) -> None:
        """Attach a pinpoint reasoning_leaf challenge to each broken step's problem."""
        leaves = [bytes.fromhex(value[2:]) for value in step_leaves]
        root = cournot_root_hex(step_leaves)
        for position, problem in enumerate(self.problems):
            index = problem.leaf_index
            if index is None or index not in broken or index >= len(leaves) or problem.challenge is not None:
                continue
            details = {
                **problem.details,
                "step_id": problem.step_id,
                "claimed_root": self.claimed_roots.get("reasoning_root"),
                "claimed_leaf_count": self.claimed_roots.get("reasoning_leaf_count"),
                "recomputed_root": root,
                "recomputed_leaf_count": len(leaves),
                "differing_indexes": broken,
            }
            stored = problem.details.get("committed") or problem.details.get("step_hash_column")
            if is_hex32(stored):
                details["stored_leaf_hash"] = stored
            challenge = self.challenge(
                "reasoning_leaf",
                2,
                component_root=root,
                leaf_index=index,
                leaf_hash=step_leaves[index],
                merkle_proof=MerkleProofPacket.build("reasoning", leaves, index),
                details=details,
            )
            self.problems[position] = Problem(**{**problem.__dict__, "challenge": challenge})
