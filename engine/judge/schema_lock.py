"""SchemaLock: the Judge only runs on schema-locked, strict-mode inputs.

Check ids (all ``severity="error"`` when they fail):

* ``schema_lock.output_schema_ref``  PromptSpec.output_schema_ref is the DeterministicVerdict ref;
* ``schema_lock.strict_mode``        ``PromptSpec.extra["strict_mode"] is True``;
* ``schema_lock.created_at``         ``PromptSpec.created_at is None`` (a wall-clock value would make
  ``prompt_spec_hash`` differ between otherwise identical submissions);
* ``schema_lock.confidence_policy``  ``extra["confidence_policy"]`` is absent or well formed;
* ``schema_lock.market_id``          the evidence bundle belongs to the prompt's market;
* ``schema_lock.evaluation_variables`` the trace has a final map/aggregate step with them;
* ``schema_lock.outcome`` / ``schema_lock.resolution_time`` (verdict): outcome is a market outcome
  or INVALID, and no resolution time is set.
"""

from __future__ import annotations

from engine.auditor.checks import failed as check_failed
from engine.auditor.checks import passed as check_passed
from engine.judge.policy import ConfidencePolicy
from engine.judge.variables import EvaluationSource, locate_evaluation_variables
from engine.schemas import (
    CheckResult,
    DeterministicVerdict,
    EvidenceBundle,
    MarketSpec,
    PromptSpec,
    ReasoningTrace,
)

__all__ = ["DETERMINISTIC_VERDICT_REF", "SchemaLock"]

DETERMINISTIC_VERDICT_REF = "core.schemas.verdict.DeterministicVerdict"


class SchemaLock:
    """Static checks that keep non-strict inputs from reaching the decision rules."""

    @staticmethod
    def verify_prompt_spec(prompt_spec: PromptSpec) -> list[CheckResult]:
        """Output schema, strict mode, ``created_at`` and confidence policy checks, in that order."""
        return SchemaLock.prompt_spec_checks(prompt_spec, ConfidencePolicy.from_extra(prompt_spec.extra)[1])

    @staticmethod
    def prompt_spec_checks(prompt_spec: PromptSpec, policy_problems: list[str]) -> list[CheckResult]:
        """:meth:`verify_prompt_spec` given the problems ``ConfidencePolicy.from_extra`` found in
        ``prompt_spec.extra`` (the judge reads the policy once for both uses)."""
        checks: list[CheckResult] = []
        ref = prompt_spec.output_schema_ref
        if ref == DETERMINISTIC_VERDICT_REF:
            checks.append(
                check_passed("schema_lock.output_schema_ref", "output schema is DeterministicVerdict")
            )
        else:
            checks.append(
                check_failed(
                    "schema_lock.output_schema_ref",
                    f"output_schema_ref must be {DETERMINISTIC_VERDICT_REF}",
                    {"output_schema_ref": ref},
                )
            )
        strict = prompt_spec.extra.get("strict_mode")
        if strict is True:
            checks.append(check_passed("schema_lock.strict_mode", "strict_mode is true"))
        else:
            checks.append(
                check_failed(
                    "schema_lock.strict_mode", "extra.strict_mode must be true", {"strict_mode": repr(strict)}
                )
            )
        if prompt_spec.created_at is None:
            checks.append(check_passed("schema_lock.created_at", "created_at is unset"))
        else:
            checks.append(
                check_failed(
                    "schema_lock.created_at",
                    "strict mode requires created_at to be unset",
                    {"created_at": prompt_spec.created_at.isoformat()},
                )
            )
        if policy_problems:
            checks.append(
                check_failed(
                    "schema_lock.confidence_policy",
                    "confidence_policy is malformed",
                    {"problems": list(policy_problems)},
                )
            )
        else:
            checks.append(check_passed("schema_lock.confidence_policy", "confidence_policy is valid"))
        return checks

    @staticmethod
    def verify_evidence(prompt_spec: PromptSpec, evidence: EvidenceBundle) -> list[CheckResult]:
        """The bundle is for the prompt's market."""
        market_id = prompt_spec.market.market_id
        if evidence.market_id == market_id:
            return [check_passed("schema_lock.market_id", "evidence bundle matches the market")]
        return [
            check_failed(
                "schema_lock.market_id",
                "evidence bundle is for another market",
                {"market_id": market_id, "evidence_market_id": evidence.market_id},
            )
        ]

    @staticmethod
    def verify_trace(trace: ReasoningTrace) -> list[CheckResult]:
        """The trace carries evaluation variables in a final map (or aggregate) step."""
        return SchemaLock.trace_checks(trace, locate_evaluation_variables(trace))

    @staticmethod
    def trace_checks(trace: ReasoningTrace, source: EvaluationSource | None) -> list[CheckResult]:
        """:meth:`verify_trace` given ``locate_evaluation_variables(trace)`` (the judge locates once)."""
        if source is None:
            return [
                check_failed(
                    "schema_lock.evaluation_variables",
                    "trace has no map or aggregate step with evaluation_variables",
                    {"step_count": len(trace.steps)},
                )
            ]
        return [
            check_passed(
                "schema_lock.evaluation_variables",
                "evaluation_variables found",
                {"step_id": source.step_id, "step_index": source.step_index},
            )
        ]

    @staticmethod
    def verify_verdict(verdict: DeterministicVerdict, market: MarketSpec) -> list[CheckResult]:
        """The outcome is a market outcome or INVALID, and ``resolution_time`` is unset."""
        allowed = [*market.possible_outcomes, "INVALID"]
        checks: list[CheckResult] = []
        if verdict.outcome in allowed:
            checks.append(check_passed("schema_lock.outcome", "outcome is allowed"))
        else:
            checks.append(
                check_failed(
                    "schema_lock.outcome",
                    "outcome is not allowed",
                    {"outcome": verdict.outcome, "allowed": allowed},
                )
            )
        if verdict.resolution_time is None:
            checks.append(check_passed("schema_lock.resolution_time", "resolution_time is unset"))
        else:
            checks.append(check_failed("schema_lock.resolution_time", "resolution_time must be unset"))
        return checks
