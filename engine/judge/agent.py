"""JudgeAgent: runs the Module 07 rules and builds the DeterministicVerdict.

Unlike Cournot's judge, the verdict's ``prompt_spec_hash``, ``evidence_root`` and ``reasoning_root``
are the real PoR commitments from :mod:`engine.commitments`, ``selected_leaf_refs`` is in first-seen
order, and ``metadata`` holds only values derived from the inputs (no clock, no set iteration), so
``verdict_hash`` and ``por_root`` are identical in every process.

``metadata`` keys: ``engine_version``, ``trace_id``, ``bundle_id``, ``step_count``,
``evidence_leaf_count``, ``reasoning_leaf_count``, ``evaluation_step_id`` (when found),
``market_type``, ``strict_mode``, ``trace_policy``, ``confidence_policy`` (effective values),
``confidence_factors`` (``conflict`` / ``fallback`` as applied) and ``rule_trail``.
"""

from __future__ import annotations

import math
from typing import Any

from engine.commitments import InputCommitments, commit_inputs
from engine.judge.rules import INVALID, Decision, map_to_verdict
from engine.judge.schema_lock import SchemaLock
from engine.judge.variables import EvaluationSource
from engine.schemas import (
    ChallengeRef,
    CheckResult,
    DeterministicVerdict,
    EvidenceBundle,
    PromptSpec,
    ReasoningTrace,
    TracePolicy,
    VerificationResult,
)
from engine.schemas.trusted import trusted
from engine.version import ENGINE_VERSION

__all__ = ["JudgeAgent", "selected_leaf_refs"]


def selected_leaf_refs(decision: Decision, trace: ReasoningTrace) -> list[str]:
    """Evidence ids behind the verdict, de-duplicated in first-seen order (never set order).

    ``source_summary`` when the variables were readable, else every step's ``evidence_ids``.
    """
    if decision.variables is not None:
        ids: list[str] = list(decision.variables.source_summary)
    else:
        ids = [evidence_id for step in trace.steps for evidence_id in step.evidence_ids]
    return list(dict.fromkeys(ids))


def _metadata(
    prompt_spec: PromptSpec,
    evidence: EvidenceBundle,
    trace: ReasoningTrace,
    decision: Decision,
    leaf_counts: tuple[int, int],
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "bundle_id": evidence.bundle_id,
        "confidence_factors": list(decision.confidence_factors),
        "confidence_policy": decision.policy.as_dict(),
        "engine_version": ENGINE_VERSION,
        "evidence_leaf_count": leaf_counts[0],
        "market_type": prompt_spec.market.market_type,
        "reasoning_leaf_count": leaf_counts[1],
        "rule_trail": [dict(entry) for entry in decision.rule_trail],
        "step_count": len(trace.steps),
        "strict_mode": prompt_spec.extra.get("strict_mode") is True,
        "trace_id": trace.trace_id,
        "trace_policy": _policy_dump(trace.policy),
    }
    if decision.source is not None:
        metadata["evaluation_step_id"] = decision.source.step_id
    return metadata


_POLICY_FIELDS: tuple[str, ...] = tuple(TracePolicy.model_fields)


def _policy_dump(policy: TracePolicy) -> dict[str, Any]:
    """``policy.model_dump(mode="json", exclude_none=True)``, read from the model's fields when every
    value is one that dump returns as it is: an exact ``TracePolicy`` whose fields are exact ``str``,
    ``int`` or ``bool`` and whose ``extra`` is an exact dict of ``str`` keys and ``str``, ``int``,
    ``bool``, finite ``float`` or ``None`` values (the auditor's policy always is; a fresh dict, as
    the dump makes). Anything else (nested values, a non-finite float, a subclass) is dumped by pydantic.
    """
    if type(policy) is TracePolicy:
        data: dict[str, Any] = policy.__dict__
        out: dict[str, Any] = {}
        for name in _POLICY_FIELDS:
            value: Any = data.get(name)
            kind = type(value)
            if kind is str or kind is int or kind is bool:
                out[name] = value
            elif name == "extra" and kind is dict and _plain_extra(value):
                out[name] = dict(value)
            else:
                return policy.model_dump(mode="json", exclude_none=True)
        return out
    return policy.model_dump(mode="json", exclude_none=True)


def _plain_extra(extra: dict[Any, Any]) -> bool:
    for key, value in extra.items():
        if type(key) is not str:
            return False
        kind = type(value)
        if kind is float:
            number: float = value
            if not math.isfinite(number):
                return False
        elif not (kind is str or kind is int or kind is bool or value is None):
            return False
    return True


class JudgeAgent:
    """Deterministic judge: same (prompt spec, evidence, trace) → byte-identical verdict."""

    role = "judge"

    def judge(
        self,
        prompt_spec: PromptSpec,
        evidence: EvidenceBundle,
        trace: ReasoningTrace,
        *,
        commitments: InputCommitments | None = None,
    ) -> tuple[DeterministicVerdict, VerificationResult]:
        """Decide the market and return the verdict with the checks behind it.

        ``VerificationResult.ok`` is true only for a decided outcome (not INVALID) with every check
        passing; ``challenge`` points at the artifact to dispute when the verdict is INVALID.
        ``commitments`` lets a caller that already hashed the inputs avoid hashing them again.
        """
        verdict, verification, _ = self.judge_located(prompt_spec, evidence, trace, commitments=commitments)
        return verdict, verification

    def judge_located(
        self,
        prompt_spec: PromptSpec,
        evidence: EvidenceBundle,
        trace: ReasoningTrace,
        *,
        commitments: InputCommitments | None = None,
    ) -> tuple[DeterministicVerdict, VerificationResult, EvaluationSource | None]:
        """:meth:`judge`, plus the step the evaluation variables were located in
        (``locate_evaluation_variables(trace)``, which the rules locate once: the pipeline reads it
        instead of locating again)."""
        decision = map_to_verdict(prompt_spec, evidence, trace)
        if commitments is None:
            commitments = commit_inputs(prompt_spec, evidence, trace)
        evidence_hex, evidence_count = commitments.evidence_root, commitments.evidence_leaf_count
        reasoning_hex, reasoning_count = commitments.reasoning_root, commitments.reasoning_leaf_count
        verdict = _verdict(
            {
                "market_id": prompt_spec.market.market_id,
                "outcome": decision.outcome,
                "confidence": decision.confidence,
                "resolution_time": None,
                "resolution_rule_id": decision.rule_id,
                "prompt_spec_hash": commitments.prompt_spec_hash,
                "evidence_root": evidence_hex,
                "reasoning_root": reasoning_hex,
                "selected_leaf_refs": selected_leaf_refs(decision, trace),
                "metadata": _metadata(
                    prompt_spec, evidence, trace, decision, (evidence_count, reasoning_count)
                ),
            }
        )
        checks = [*decision.checks, *SchemaLock.verify_verdict(verdict, prompt_spec.market)]
        ok = verdict.outcome != INVALID and all(check.ok for check in checks)
        return verdict, _verification(ok, checks, decision.challenge), decision.located


def _verdict(values: dict[str, Any]) -> DeterministicVerdict:
    """``DeterministicVerdict(**values)``, without re-validation when every value visibly satisfies
    its field (exact types, ``confidence`` a float in ``[0, 1]``, non-blank ids, string keys and refs:
    the judge's own values always do); anything else is validated, and refused there, as before."""
    confidence = values["confidence"]
    market_id, rule_id = values["market_id"], values["resolution_rule_id"]
    refs, metadata = values["selected_leaf_refs"], values["metadata"]
    if (
        type(market_id) is str
        and market_id != ""
        and type(values["outcome"]) is str
        and type(confidence) is float
        and 0.0 <= confidence <= 1.0
        and values["resolution_time"] is None
        and type(rule_id) is str
        and rule_id.strip() != ""
        and all(_optional_str(values[name]) for name in _HASH_FIELDS)
        and type(refs) is list
        and all(type(ref) is str for ref in refs)
        and type(metadata) is dict
        and all(type(key) is str for key in metadata)
    ):
        return trusted(DeterministicVerdict, **values)
    return DeterministicVerdict(**values)


_HASH_FIELDS = ("prompt_spec_hash", "evidence_root", "reasoning_root")


def _optional_str(value: Any) -> bool:
    return value is None or type(value) is str


def _verification(ok: bool, checks: list[CheckResult], challenge: ChallengeRef | None) -> VerificationResult:
    """``VerificationResult(ok=..., checks=..., challenge=...)``, without re-validation for the judge's
    own values (a bool, a fresh list of checks, a challenge or None); anything else is validated."""
    if (
        type(ok) is bool
        and type(checks) is list
        and all(type(check) is CheckResult for check in checks)
        and (challenge is None or type(challenge) is ChallengeRef)
    ):
        return trusted(VerificationResult, ok=ok, checks=checks, challenge=challenge)
    return VerificationResult(ok=ok, checks=checks, challenge=challenge)
