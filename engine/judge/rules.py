"""Module 07 decision rules: validity → conflict → decision → confidence.

================================================================  ========  =====================
condition (first match wins, in this order)                        outcome   resolution_rule_id
================================================================  ========  =====================
a schema-lock check fails (see :mod:`engine.judge.schema_lock`)    INVALID   ``R_VALIDITY``
evaluation_variables malformed, citing unknown evidence, a step
citing unknown evidence, or ``event_observed`` contradicting
``numeric_value <comparator> threshold``                           INVALID   ``R_VALIDITY``
``insufficient_evidence`` true, or ``source_summary`` empty        INVALID   ``R_INVALID_FALLBACK``
``conflict_detected`` and policy ``conflict_action == "invalid"``  INVALID   ``R_CONFLICT``
binary: ``event_observed`` (else the comparison) is None           INVALID   ``R_INVALID_FALLBACK``
multi_choice: ``observed_outcome`` absent or not an outcome        INVALID   ``R_INVALID_FALLBACK``
decided, but confidence < ``min_confidence_for_yesno``             INVALID   ``R_CONFIDENCE``
binary decided                                                     YES / NO  ``R_BINARY_DECISION``
multi_choice decided                                               outcome   ``R_MULTI_CHOICE``
================================================================  ========  =====================

Binary markets take ``event_observed`` when present, else the comparison; multi_choice markets take
``observed_outcome`` and ignore ``event_observed``. Confidence (see :mod:`engine.judge.policy`): a
decided outcome gets ``default × conflict_multiplier? × fallback_multiplier?``; ``R_VALIDITY`` gives
0.0; ``R_INVALID_FALLBACK`` and ``R_CONFLICT`` give ``invalid_confidence``; ``R_CONFIDENCE`` keeps the
computed value. Every INVALID confidence is capped at ``min_confidence_for_yesno``.

The rule trail lists, in order, one ``{rule_id, status, detail}`` entry per stage that ran
(status ``pass`` / ``fail`` / ``applied``); ``R_INVALID_FALLBACK`` is listed when it decides and
``R_CONFIDENCE`` always comes last.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final, get_args

from engine.auditor.checks import failed as check_failed
from engine.auditor.checks import passed as check_passed
from engine.auditor.checks import warning as check_warning
from engine.auditor.record import Record
from engine.judge.policy import ConfidencePolicy
from engine.judge.schema_lock import SchemaLock
from engine.judge.variables import (
    EvaluationSource,
    EvaluationVariables,
    locate_evaluation_variables,
    parse_evaluation_variables,
)
from engine.schemas import ChallengeRef, CheckResult, EvidenceBundle, PromptSpec, ReasoningTrace
from engine.schemas.trusted import model_layout, trusted

__all__ = [
    "R_BINARY_DECISION",
    "R_CONFIDENCE",
    "R_CONFLICT",
    "R_INVALID_FALLBACK",
    "R_MULTI_CHOICE",
    "R_VALIDITY",
    "Decision",
    "challenge_ref",
    "map_to_verdict",
]

R_VALIDITY = "R_VALIDITY"
R_CONFLICT = "R_CONFLICT"
R_BINARY_DECISION = "R_BINARY_DECISION"
R_MULTI_CHOICE = "R_MULTI_CHOICE"
R_CONFIDENCE = "R_CONFIDENCE"
R_INVALID_FALLBACK = "R_INVALID_FALLBACK"
INVALID = "INVALID"


class Decision(Record):
    """What the rules decided, with the checks, rule trail and challenge hint behind it."""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "outcome",
        "confidence",
        "rule_id",
        "checks",
        "rule_trail",
        "challenge",
        "source",
        "variables",
        "confidence_factors",
        "policy",
        "located",
    )
    __slots__ = FIELDS

    def __init__(
        self,
        outcome: str,
        confidence: float,
        rule_id: str,
        checks: tuple[CheckResult, ...],
        rule_trail: tuple[dict[str, str], ...],
        challenge: ChallengeRef | None,
        source: EvaluationSource | None,
        variables: EvaluationVariables | None,
        confidence_factors: tuple[str, ...],
        policy: ConfidencePolicy,
        located: EvaluationSource | None = None,
    ) -> None:
        self.outcome: Final = outcome
        self.confidence: Final = confidence
        self.rule_id: Final = rule_id
        self.checks: Final = checks
        self.rule_trail: Final = rule_trail
        self.challenge: Final = challenge
        self.source: Final = source
        self.variables: Final = variables
        self.confidence_factors: Final = confidence_factors
        self.policy: Final = policy
        self.located: Final = located  # where the variables are, whether or not a stage read them


_CHALLENGE_KINDS: Final = frozenset(
    ("evidence_leaf", "reasoning_leaf", "verdict_hash", "por_bundle", "provenance_tier")
)
_CHALLENGE_OPTIONAL: Final = (("leaf_index", int), ("evidence_id", str), ("step_id", str), ("reason", str))
_CHALLENGE_FAST: Final = (
    model_layout(ChallengeRef)
    == (
        "kind: typing.Literal['evidence_leaf', 'reasoning_leaf', 'verdict_hash', 'por_bundle', 'provenance_tier'] [] PydanticUndefined",
        "leaf_index: int | None [] None",
        "evidence_id: str | None [] None",
        "step_id: str | None [] None",
        "reason: str | None [] None",
        "field validators {}",
        "model validators []",
        "serializers [] []",
        "config {'extra': 'forbid'}",
    )
    and frozenset(get_args(ChallengeRef.model_fields["kind"].annotation)) == _CHALLENGE_KINDS
)
"""Whether ``ChallengeRef`` still has exactly the layout :func:`challenge_ref` restates (its
fields, their annotations, constraints and defaults, no validators or serializers); else every
call validates, so a constraint added to the model later is never skipped."""


def challenge_ref(values: dict[str, Any]) -> ChallengeRef:
    """``ChallengeRef(**values)``, without re-validation when every value is one validation stores
    as it is: ``kind`` an exact ``str`` among the declared kinds, ``leaf_index`` None or an exact
    ``int`` (never a ``bool``), the other fields None or an exact ``str``, and no other name. The
    fields set are the names given, as in validation. Anything else is validated (and refused
    there) as before. Property-tested equal to the validating constructor."""
    kind = values.get("kind")
    if _CHALLENGE_FAST and type(kind) is str and kind in _CHALLENGE_KINDS:
        given = 1
        for name, exact in _CHALLENGE_OPTIONAL:
            if name in values:
                given += 1
                value = values[name]
                if value is not None and type(value) is not exact:
                    return ChallengeRef(**values)
        if given == len(values):
            made: ChallengeRef = trusted(ChallengeRef, **values)
            return made
    return ChallengeRef(**values)


class _Invalid(Exception):
    """Raised by a stage to stop with INVALID under ``rule_id``."""

    def __init__(self, rule_id: str, confidence: float, challenge: ChallengeRef | None) -> None:
        super().__init__(rule_id)
        self.rule_id = rule_id
        self.confidence = confidence
        self.challenge = challenge


class _Run:
    """One evaluation: accumulates checks and the rule trail as the stages run."""

    def __init__(self, prompt_spec: PromptSpec, evidence: EvidenceBundle, trace: ReasoningTrace) -> None:
        self.prompt_spec = prompt_spec
        self.evidence = evidence
        self.trace = trace
        self.policy, self.policy_problems = ConfidencePolicy.from_extra(prompt_spec.extra)
        self.located = locate_evaluation_variables(trace)  # read by the schema lock and validity
        self.checks: list[CheckResult] = []
        self.trail: list[dict[str, str]] = []
        self.source: EvaluationSource | None = None
        self.variables: EvaluationVariables | None = None
        self.factors: list[str] = []

    def note(self, rule_id: str, status: str, detail: str) -> None:
        self.trail.append({"detail": detail, "rule_id": rule_id, "status": status})

    def reasoning_challenge(self, reason: str, step_index: int | None = None) -> ChallengeRef:
        if step_index is None and self.source is not None:
            step_index = self.source.step_index
        if step_index is None and self.trace.steps:
            step_index = len(self.trace.steps) - 1
        step_id = self.trace.steps[step_index].step_id if step_index is not None else None
        return challenge_ref(
            {"kind": "reasoning_leaf", "leaf_index": step_index, "step_id": step_id, "reason": reason}
        )

    def fail_validity(self, message: str, details: Mapping[str, Any], challenge: ChallengeRef) -> _Invalid:
        self.checks.append(check_failed("validity", message, dict(details)))
        self.note(R_VALIDITY, "fail", message)
        return _Invalid(R_VALIDITY, 0.0, challenge)

    def fallback(self, check_id: str, message: str, challenge: ChallengeRef | None) -> _Invalid:
        self.checks.append(check_failed(check_id, message))
        self.note(_STAGE_RULE.get(check_id, R_VALIDITY), "fail", message)
        self.note(R_INVALID_FALLBACK, "applied", "market cannot be resolved from the evidence")
        return _Invalid(
            R_INVALID_FALLBACK, self.policy.invalid_cap(self.policy.invalid_confidence), challenge
        )

    # -- stages -------------------------------------------------------------------------------

    def schema_lock(self) -> None:
        lock = [
            *SchemaLock.prompt_spec_checks(self.prompt_spec, self.policy_problems),
            *SchemaLock.verify_evidence(self.prompt_spec, self.evidence),
            *SchemaLock.trace_checks(self.trace, self.located),
        ]
        self.checks.extend(lock)
        failed = [check.check_id for check in lock if not check.ok]
        if not failed:
            return
        if failed[0] == "schema_lock.evaluation_variables":
            challenge = self.reasoning_challenge("no final map/aggregate step with evaluation_variables")
        else:
            challenge = challenge_ref({"kind": "por_bundle", "reason": f"{failed[0]} failed"})
        raise self.fail_validity(
            "schema lock failed: " + ", ".join(failed), {"failed_checks": failed}, challenge
        )

    def validity(self) -> EvaluationVariables:
        source = self.located
        if source is None:  # the schema lock has already failed in this case
            raise self.fail_validity("no evaluation_variables", {}, self.reasoning_challenge("no variables"))
        self.source = source
        variables, problems = parse_evaluation_variables(source.raw)
        if variables is None:
            challenge = self.reasoning_challenge("malformed evaluation_variables")
            raise self.fail_validity("evaluation_variables are malformed", {"problems": problems}, challenge)
        self.variables = variables
        known = {item.evidence_id for item in self.evidence.items}
        unknown = [evidence_id for evidence_id in variables.source_summary if evidence_id not in known]
        if unknown:
            challenge = self.reasoning_challenge("source_summary cites unknown evidence")
            raise self.fail_validity("source_summary cites unknown evidence", {"unknown": unknown}, challenge)
        for index, step in enumerate(self.trace.steps):
            missing = [evidence_id for evidence_id in step.evidence_ids if evidence_id not in known]
            if missing:
                challenge = self.reasoning_challenge("step cites unknown evidence", index)
                details: dict[str, Any] = {"step_id": step.step_id, "unknown": missing}
                raise self.fail_validity("a trace step cites unknown evidence", details, challenge)
        comparison = variables.comparison()
        if (
            variables.event_observed is not None
            and comparison is not None
            and comparison != variables.event_observed
        ):
            challenge = self.reasoning_challenge("event_observed contradicts the comparison")
            values = {"comparison": comparison, "event_observed": variables.event_observed}
            raise self.fail_validity(
                "event_observed contradicts numeric_value vs threshold", values, challenge
            )
        if variables.insufficient_evidence or not variables.source_summary:
            why = "insufficient_evidence" if variables.insufficient_evidence else "source_summary is empty"
            raise self.fallback(
                "validity",
                f"evidence is insufficient ({why})",
                challenge_ref({"kind": "evidence_leaf", "reason": why}),
            )
        self.checks.append(check_passed("validity", "evaluation variables are well formed and grounded"))
        self.note(R_VALIDITY, "pass", f"{len(variables.source_summary)} evidence item(s) cited")
        return variables

    def conflict(self, variables: EvaluationVariables) -> None:
        if not variables.conflict_detected:
            self.checks.append(check_passed("conflict", "no conflict detected"))
            self.note(R_CONFLICT, "pass", "no conflict detected")
            return
        if self.policy.conflict_action == "invalid":
            message = "conflicting evidence and conflict_action is 'invalid'"
            self.checks.append(check_failed("conflict", message))
            self.note(R_CONFLICT, "fail", message)
            challenge = challenge_ref({"kind": "evidence_leaf", "reason": "conflicting evidence"})
            raise _Invalid(R_CONFLICT, self.policy.invalid_cap(self.policy.invalid_confidence), challenge)
        self.factors.append("conflict")
        multiplier = self.policy.conflict_multiplier
        self.checks.append(
            check_warning("conflict", "conflicting evidence lowers confidence", {"multiplier": multiplier})
        )
        self.note(R_CONFLICT, "applied", f"confidence multiplied by {multiplier!r}")

    def decide(self, variables: EvaluationVariables) -> tuple[str, str]:
        market = self.prompt_spec.market
        if market.market_type == "multi_choice":
            observed = variables.observed_outcome
            if observed is None or observed not in market.possible_outcomes:
                message = f"observed_outcome {observed!r} is not one of the market outcomes"
                raise self.fallback("multi_choice_decision", message, self.reasoning_challenge(message))
            self.checks.append(check_passed("multi_choice_decision", f"outcome {observed}"))
            self.note(R_MULTI_CHOICE, "pass", f"observed_outcome {observed}")
            return observed, R_MULTI_CHOICE
        observed_bool = variables.event_observed
        basis = "event_observed"
        if observed_bool is None:
            observed_bool, basis = variables.comparison(), "comparison"
        if observed_bool is None:
            message = "event_observed is unknown and no comparison is possible"
            raise self.fallback("binary_decision", message, self.reasoning_challenge(message))
        outcome = "YES" if observed_bool else "NO"
        self.checks.append(check_passed("binary_decision", f"outcome {outcome} from {basis}"))
        self.note(R_BINARY_DECISION, "pass", f"{basis} is {observed_bool!r}")
        return outcome, R_BINARY_DECISION

    def confidence(self, variables: EvaluationVariables) -> tuple[float, bool]:
        if variables.fallback_used:
            self.factors.append("fallback")
        value = self.policy.decided_confidence(
            conflict=variables.conflict_detected, fallback=variables.fallback_used
        )
        floor = self.policy.min_confidence_for_yesno
        details = {"confidence": value, "factors": list(self.factors), "min_confidence_for_yesno": floor}
        if value < floor:
            message = f"confidence {value!r} is below min_confidence_for_yesno {floor!r}"
            self.checks.append(check_failed("confidence", message, details))
            self.note(R_CONFIDENCE, "fail", message)
            return value, False
        self.checks.append(check_passed("confidence", f"confidence {value!r}", details))
        self.note(R_CONFIDENCE, "pass", f"confidence {value!r}")
        return value, True


_STAGE_RULE = {
    "validity": R_VALIDITY,
    "binary_decision": R_BINARY_DECISION,
    "multi_choice_decision": R_MULTI_CHOICE,
}


def map_to_verdict(prompt_spec: PromptSpec, evidence: EvidenceBundle, trace: ReasoningTrace) -> Decision:
    """Run the stages in order and return the decision (pure; same inputs, same decision)."""
    run = _Run(prompt_spec, evidence, trace)
    try:
        run.schema_lock()
        variables = run.validity()
        run.conflict(variables)
        outcome, rule_id = run.decide(variables)
        confidence, decided = run.confidence(variables)
        challenge = None
        if not decided:
            outcome, rule_id, confidence = INVALID, R_CONFIDENCE, run.policy.invalid_cap(confidence)
    except _Invalid as stop:
        outcome, rule_id, confidence, challenge = INVALID, stop.rule_id, stop.confidence, stop.challenge
        run.checks.append(
            check_passed("confidence", f"INVALID confidence {confidence!r}", {"confidence": confidence})
        )
        run.note(R_CONFIDENCE, "pass", f"INVALID confidence {confidence!r}")
    return Decision(
        outcome=outcome,
        confidence=confidence,
        rule_id=rule_id,
        checks=tuple(run.checks),
        rule_trail=tuple(run.trail),
        challenge=challenge,
        source=run.source,
        variables=run.variables,
        confidence_factors=tuple(run.factors),
        policy=run.policy,
        located=run.located,
    )
