"""From claims and sanity to the evaluation state: selection, contradictions and deduction.

The auditor derives *what the evidence says* (``event_observed``, ``numeric_value``, the observed
outcome of a multi-choice market) and never maps it to YES/NO/INVALID: that is the Judge's job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final

from engine.auditor.checks import failed as check_failed
from engine.auditor.checks import failed_taking, passed_taking, warning_taking
from engine.auditor.checks import passed as check_passed
from engine.auditor.config import AuditConfig
from engine.auditor.reasoning.claim_extraction import Claim, ClaimSet
from engine.auditor.reasoning.contradiction_checks import ContradictionChecker, relative_spread
from engine.auditor.reasoning.selection import Candidate, Selection, select
from engine.auditor.reasoning.semantics import EventSpec, compare
from engine.auditor.reasoning.values import format_time
from engine.auditor.record import Record
from engine.auditor.verification.logic_sanity import SanityReport
from engine.schemas import CheckResult, DataRequirement, PromptSpec

__all__ = ["Analysis", "analyse"]


class Analysis(Record):
    """Everything the trace builder needs after sanity checks (``variables`` and ``deduction`` are
    filled in once the event state is deduced)."""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "selections",
        "contradictions",
        "event_checks",
        "conflict_detected",
        "insufficient",
        "variables",
        "deduction",
        "decisive_keys",
    )
    __slots__ = FIELDS

    def __init__(
        self,
        selections: list[Selection],
        contradictions: list[CheckResult],
        event_checks: list[CheckResult],
        conflict_detected: bool,
        insufficient: list[str],
        variables: dict[str, Any],
        deduction: dict[str, Any],
        decisive_keys: list[str] | None = None,
    ) -> None:
        self.selections: Final = selections
        self.contradictions: Final = contradictions
        self.event_checks: Final = event_checks
        self.conflict_detected: Final = conflict_detected
        self.insufficient: Final = insufficient
        self.variables = variables
        self.deduction = deduction
        self.decisive_keys: Final = [] if decisive_keys is None else decisive_keys


def _candidates(claims: ClaimSet, sanity: SanityReport, requirement_id: str) -> list[Candidate]:
    found: list[Candidate] = []
    assessments, extractions = sanity.items, claims.items
    if len(assessments) != len(extractions):
        list(zip(assessments, extractions, strict=True))  # raises the ValueError of a strict zip
    for position in range(len(assessments)):  # a native loop (``zip(strict=True)`` is a keyword call)
        assessment, extraction = assessments[position], extractions[position]
        claim = extraction.value_claim()
        if assessment.requirement_id == requirement_id and assessment.eligible and claim is not None:
            found.append(
                Candidate(
                    index=assessment.index,
                    evidence_id=assessment.evidence_id,
                    source_id=assessment.source_id,
                    tier=assessment.tier,
                    claim=claim,
                    observed_at=extraction.observed_at,
                )
            )
    return found


def _cluster_key(candidates: Sequence[Candidate], tolerance: float) -> Callable[[Candidate], Any]:
    """Group numeric values within tolerance of a cluster's first value; other values by equality."""
    anchors: list[int | float] = []
    keys: dict[int, Any] = {}
    for candidate in candidates:
        value = candidate.claim.value
        if candidate.claim.kind != "numeric":
            keys[candidate.index] = value
            continue
        anchor = next(
            (a for a in anchors if float(relative_spread(min(a, value), max(a, value))) <= tolerance), None
        )
        if anchor is None:
            anchors.append(value)
            anchor = value
        keys[candidate.index] = anchor
    return lambda candidate: keys[candidate.index]


def _event_key(event: EventSpec) -> Callable[[Candidate], Any] | None:
    """What a candidate of the primary requirement states about the event, when that is computable."""
    if event.kind == "threshold" and event.computable and event.threshold and event.comparator:
        threshold, comparator = event.threshold.value, event.comparator
        return lambda candidate: compare(candidate.claim.value, comparator, threshold)
    if event.kind in ("boolean", "text_equals", "multi_choice"):
        return lambda candidate: candidate.claim.value
    return None


def _agrees(event: EventSpec) -> Callable[[Sequence[Claim]], bool] | None:
    if event.kind == "threshold" and event.computable and event.threshold and event.comparator:
        threshold, comparator = event.threshold.value, event.comparator
        return lambda group: (
            all(claim.kind == "numeric" for claim in group)
            and (len({compare(claim.value, comparator, threshold) for claim in group}) == 1)
        )
    return None


def _selection_check(selection: Selection) -> CheckResult:
    check_id = f"selection:{selection.requirement_id}"
    policy = selection.policy
    details: dict[str, Any] = {
        "failure": selection.failure,
        "fallback_used": selection.fallback_used,
        "selected": selection.selected_ids(),
        "strategy": policy.strategy,
        "tie_breaker": policy.tie_breaker,
    }
    message = f"{policy.strategy}: {selection.message}"
    if not selection.ok:
        return failed_taking(check_id, message, details)
    if selection.disagreement:
        return warning_taking(check_id, message + "; other candidates disagree about the event", details)
    return passed_taking(check_id, message, details)


def analyse(prompt_spec: PromptSpec, claims: ClaimSet, sanity: SanityReport, config: AuditConfig) -> Analysis:
    """Select per requirement, check contradictions and derive the evaluation variables."""
    event = sanity.event
    requirements: dict[str, DataRequirement] = {r.requirement_id: r for r in prompt_spec.data_requirements}
    selections: list[Selection] = []
    for requirement_id in sanity.requirement_ids:
        candidates = _candidates(claims, sanity, requirement_id)
        key_of = _event_key(event) if requirement_id == sanity.primary_requirement_id else None
        key_of = key_of or _cluster_key(candidates, config.numeric_tolerance)
        requirement = requirements.get(requirement_id)
        policy = requirement.selection_policy if requirement else None
        selections.append(select(requirement_id, policy, requirement, candidates, key_of))
    eligible = {item.index for item in sanity.items if item.eligible}
    primary_id = sanity.primary_requirement_id
    decisive_first = {  # first occurrences, in order (``dict.fromkeys`` without the call)
        item.value_key: None
        for item in claims.items
        if item.requirement_id == primary_id and item.value_key is not None
    }
    decisive = list(decisive_first)
    compared = [claim for item in claims.items if item.index in eligible for claim in item.claims]
    contradictions = ContradictionChecker(config.numeric_tolerance).check(
        compared, decisive_keys=frozenset(decisive), agrees=_agrees(event)
    )
    primary = next((s for s in selections if s.requirement_id == sanity.primary_requirement_id), None)
    conflict = any(
        check.details.get("decisive") is True for check in contradictions if ":" in check.check_id
    ) or bool(primary and primary.disagreement)
    insufficient = list(sanity.insufficient)
    insufficient.extend(f"selection_failed:{s.requirement_id}" for s in selections if not s.ok)
    analysis = Analysis(
        selections=selections,
        contradictions=contradictions,
        event_checks=[_selection_check(selection) for selection in selections],
        conflict_detected=conflict,
        insufficient=insufficient,
        variables={},
        deduction={},
        decisive_keys=decisive,
    )
    _deduce(event, primary, analysis)
    return analysis


def _deduce(event: EventSpec, primary: Selection | None, analysis: Analysis) -> None:
    representative = primary.representative if primary and primary.ok else None
    value: Any = representative.claim.value if representative else None
    observed: bool | None = None
    outcome: str | None = None
    if representative is not None and event.computable:
        if event.kind == "threshold" and event.threshold and event.comparator:
            observed = compare(value, event.comparator, event.threshold.value)
        elif event.kind == "boolean":
            observed = bool(value)
        elif event.kind == "text_equals":
            observed = value == (event.threshold_text or "").strip()
        elif event.kind == "multi_choice":
            if value in event.outcomes:
                outcome, observed = value, True
                analysis.event_checks.append(
                    check_passed("event.outcome_match", f"evidence names the listed outcome {value!r}")
                )
            else:
                analysis.insufficient.append("outcome_not_listed")
                message = (
                    f"evidence names {value!r}, which is not exactly one of the market's possible_outcomes"
                )
                details = {"outcomes": list(event.outcomes), "value": value}
                analysis.event_checks.append(check_failed("event.outcome_match", message, details))
    insufficient = bool(analysis.insufficient)
    if insufficient:
        observed, outcome = None, None
        message = "evidence is insufficient: " + ", ".join(analysis.insufficient)
        analysis.event_checks.append(
            check_failed("event.evaluation", message, {"reasons": list(analysis.insufficient)})
        )
    else:
        analysis.event_checks.append(
            check_passed(
                "event.evaluation", f"{event.kind} event evaluated from {representative_id(primary)}"
            )
        )
    numeric = value if representative is not None and representative.claim.kind == "numeric" else None
    selected = primary.selected_ids() if primary else []
    source_summary = _source_summary(analysis.selections)
    analysis.variables = {
        "comparator": event.comparator,
        "conflict_detected": analysis.conflict_detected,
        "event_observed": observed,
        "insufficient_evidence": insufficient,
        "numeric_value": numeric,
        "observed_outcome": outcome,
        "selection": {
            "evidence_ids": selected,
            "fallback_used": bool(primary and primary.fallback_used),
            "requirement_id": primary.requirement_id if primary else None,
            "strategy": primary.policy.strategy if primary else None,
            "tie_breaker": primary.policy.tie_breaker if primary else None,
        },
        "source_summary": source_summary,
        "threshold": event.threshold.value if event.threshold else None,
        "timestamp": format_time(representative.observed_at)
        if representative and representative.observed_at
        else None,
    }
    analysis.deduction = {
        "comparator": event.comparator,
        "comparator_phrase": event.comparator_phrase,
        "comparator_source": event.comparator_source,
        "conflict_detected": analysis.conflict_detected,
        "event_kind": event.kind,
        "event_observed": observed,
        "insufficient_reasons": list(analysis.insufficient),
        "observed_outcome": outcome,
        "threshold": event.threshold.value if event.threshold else None,
        "threshold_unit": event.threshold.unit if event.threshold else None,
        "value": value,
        "value_claim_id": representative.claim.claim_id if representative else None,
        "value_evidence_id": representative.evidence_id if representative else None,
    }


def representative_id(selection: Selection | None) -> str:
    """The representative evidence id of a selection, or ``"nothing"``."""
    representative = selection.representative if selection else None
    return representative.evidence_id if representative else "nothing"


def _source_summary(selections: Sequence[Selection]) -> list[str]:
    by_index = {c.index: c.evidence_id for s in selections if s.ok for c in s.selected}
    if len(by_index) <= 1:
        return list(by_index.values())  # one chosen item (or none) is already in order and unique
    chosen = sorted(by_index.items())
    return list(dict.fromkeys(evidence_id for _, evidence_id in chosen))
