"""The Sentinel's input (a verification package) and output (a report). No timestamps anywhere."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from engine.schemas import (
    ChallengeRef,
    CheckResult,
    DeterministicVerdict,
    EvidenceBundle,
    PoRRoots,
    PromptSpec,
    ReasoningTrace,
    StrictModel,
    VerificationResult,
)
from engine.sentinel.challenges import Challenge
from engine.sentinel.replay import ReplayComparison

__all__ = ["SentinelReport", "VerificationPackage"]

_HEX32 = re.compile(r"0x[0-9a-fA-F]{64}")


class VerificationPackage(StrictModel):
    """Everything needed to re-verify one resolution without trusting its producer.

    ``roots`` are the *claimed* commitments. ``stored_step_hashes`` and
    ``stored_evidence_leaf_hashes`` are the per-leaf hashes the ledger recorded at commit time; with
    them the Sentinel pinpoints the exact leaf that changed. ``engine_version`` defaults to the
    verdict's ``metadata.engine_version``.
    """

    prompt_spec: PromptSpec
    evidence: EvidenceBundle
    trace: ReasoningTrace
    verdict: DeterministicVerdict
    roots: PoRRoots
    stored_step_hashes: list[str] | None = None
    stored_evidence_leaf_hashes: list[str] | None = None
    engine_version: str | None = None

    @field_validator("stored_step_hashes", "stored_evidence_leaf_hashes")
    @classmethod
    def _hex_list(cls, values: list[str] | None) -> list[str] | None:
        if values is None:
            return None
        for position, value in enumerate(values):
            if not _HEX32.fullmatch(value):
                raise ValueError(f"hash {position} must be 0x followed by 64 hex digits, got {value!r}")
        return [value.lower() for value in values]

    def effective_engine_version(self) -> str:
        """``engine_version``, else the verdict's ``metadata.engine_version``, else ``"unknown"``."""
        if self.engine_version is not None:
            return self.engine_version
        recorded = self.verdict.metadata.get("engine_version")
        return recorded if isinstance(recorded, str) else "unknown"


_REF_KIND: dict[str, Literal["evidence_leaf", "reasoning_leaf", "verdict_hash", "por_bundle"]] = {
    "prompt_hash": "por_bundle",
    "evidence_leaf": "evidence_leaf",
    "reasoning_leaf": "reasoning_leaf",
    "verdict_hash": "verdict_hash",
    "por_root": "por_bundle",
    "replay_divergence": "reasoning_leaf",
}


class SentinelReport(StrictModel):
    """Verification outcome: ``ok`` iff no check failed; challenges in PoR leaf order."""

    ok: bool
    mode: Literal["verify", "replay"] = "verify"
    checks: list[CheckResult] = Field(default_factory=list)
    challenges: list[Challenge] = Field(default_factory=list)
    recomputed_roots: PoRRoots | None = None
    replay: ReplayComparison | None = None

    def verification_result(self) -> VerificationResult:
        """The report as a Cournot VerificationResult; the first challenge becomes the ChallengeRef hint."""
        hint = None
        if self.challenges:
            first = self.challenges[0]
            step_id = first.details.get("step_id")
            evidence_id = first.details.get("evidence_id")
            hint = ChallengeRef(
                kind=_REF_KIND[first.kind],
                leaf_index=first.leaf_index,
                step_id=step_id if isinstance(step_id, str) else None,
                evidence_id=evidence_id if isinstance(evidence_id, str) else None,
                reason=f"{first.kind} {first.challenge_id}",
            )
        return VerificationResult(ok=self.ok, checks=list(self.checks), challenge=hint)
