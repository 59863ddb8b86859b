"""Logic sanity: does the evidence fit the market's window, requirements and event definition?

:meth:`LogicSanityChecker.assess` returns the checks together with what the auditor needs next:
the parsed :class:`EventSpec`, each item's eligibility (with a reason code when excluded) and the
reasons, if any, that make the evidence insufficient. Exclusion codes: ``fetch_failed``,
``confidence_out_of_bounds``, ``unknown_requirement``, ``source_not_allowed``, ``below_min_tier``,
``outside_window``, ``fetched_before_window``, ``no_value``, ``value_kind_mismatch``.

Time rule: a time read from the payload must fall within ``resolution_window`` widened by the
declared slack on both sides. When only ``provenance.fetched_at`` is known it bounds the
observation from above, so a fetch before the window excludes the item, while a fetch after it is
kept with a warning (historical APIs are fetched after the fact).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, ClassVar, Final, NamedTuple

from engine.auditor.checks import failed as check_failed
from engine.auditor.checks import passed as check_passed
from engine.auditor.checks import warning as check_warning
from engine.auditor.config import AuditConfig
from engine.auditor.reasoning.claim_extraction import ClaimSet, ItemClaims
from engine.auditor.reasoning.semantics import EventSpec, derive_event_spec
from engine.auditor.reasoning.values import format_time, is_finite_number
from engine.auditor.record import Record
from engine.schemas import (
    CheckResult,
    DataRequirement,
    EvidenceBundle,
    EvidenceItem,
    PromptSpec,
    SourcePolicy,
)

__all__ = [
    "ItemAssessment",
    "LogicSanityChecker",
    "SanityReport",
    "primary_requirement_id",
    "requirement_order",
]


class ItemAssessment(Record):
    """Whether one evidence item may be used, and why not."""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "index",
        "evidence_id",
        "requirement_id",
        "source_id",
        "tier",
        "eligible",
        "reason",
        "time_status",
    )
    __slots__ = FIELDS

    def __init__(
        self,
        index: int,
        evidence_id: str,
        requirement_id: str,
        source_id: str,
        tier: int,
        eligible: bool,
        reason: str | None,
        time_status: str,
    ) -> None:
        self.index: Final = index
        self.evidence_id: Final = evidence_id
        self.requirement_id: Final = requirement_id
        self.source_id: Final = source_id
        self.tier: Final = tier
        self.eligible: Final = eligible
        self.reason: Final = reason
        self.time_status: Final = time_status

    def to_output(self) -> dict[str, Any]:
        """The assessment as committed inside a check step."""
        return {
            "eligible": self.eligible,
            "evidence_id": self.evidence_id,
            "reason": self.reason,
            "source_id": self.source_id,
            "tier": self.tier,
            "time_status": self.time_status,
        }


class SanityReport(Record):
    """Checks plus the parsed event, per-item eligibility and insufficiency reasons."""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "checks",
        "event",
        "items",
        "requirement_ids",
        "primary_requirement_id",
        "insufficient",
    )
    __slots__ = FIELDS

    def __init__(
        self,
        checks: tuple[CheckResult, ...],
        event: EventSpec,
        items: tuple[ItemAssessment, ...],
        requirement_ids: tuple[str, ...],
        primary_requirement_id: str | None,
        insufficient: tuple[str, ...],
    ) -> None:
        self.checks: Final = checks
        self.event: Final = event
        self.items: Final = items
        self.requirement_ids: Final = requirement_ids
        self.primary_requirement_id: Final = primary_requirement_id
        self.insufficient: Final = insufficient


def requirement_order(prompt_spec: PromptSpec, evidence: EvidenceBundle) -> list[str]:
    """Declared requirement ids in order; without declarations, those of the bundle, first seen first."""
    declared = [requirement.requirement_id for requirement in prompt_spec.data_requirements]
    if declared:
        return list(dict.fromkeys(declared))
    return list(dict.fromkeys(item.requirement_id for item in evidence.items))


def primary_requirement_id(prompt_spec: PromptSpec, order: Sequence[str]) -> str | None:
    """``extra.primary_requirement`` when it names a requirement, else the first requirement."""
    named = prompt_spec.extra.get("primary_requirement")
    if isinstance(named, str) and named in order:
        return named
    return order[0] if order else None


class LogicSanityChecker:
    """Time window, requirement coverage, event variables and confidence bounds."""

    def __init__(self, config: AuditConfig | None = None) -> None:
        self.config = config or AuditConfig()

    def check(self, prompt_spec: PromptSpec, evidence: EvidenceBundle, claims: ClaimSet) -> list[CheckResult]:
        """The sanity checks only (see :meth:`assess` for the structured report)."""
        return list(self.assess(prompt_spec, evidence, claims).checks)

    def assess(self, prompt_spec: PromptSpec, evidence: EvidenceBundle, claims: ClaimSet) -> SanityReport:
        """Run every sanity check and decide each item's eligibility."""
        market = prompt_spec.market
        event = derive_event_spec(prompt_spec)
        order = requirement_order(prompt_spec, evidence)
        primary = primary_requirement_id(prompt_spec, order)
        requirements = {req.requirement_id: req for req in prompt_spec.data_requirements}
        window = market.resolution_window
        audit = _PerAudit(
            window.start,
            window.end,
            timedelta(seconds=self.config.timestamp_slack_seconds),
            market.min_provenance_tier,
            market.allowed_sources,
        )
        items = tuple(
            self._assess_item(audit, item, extraction, requirements, event, primary)
            for item, extraction in zip(evidence.items, claims.items, strict=True)
        )
        checks: list[CheckResult] = []
        insufficient: list[str] = []
        self._bundle_checks(prompt_spec, evidence, checks, insufficient)
        if claims.problems:
            checks.append(
                check_failed(
                    "sanity.extraction_config",
                    f"{len(claims.problems)} extraction setting(s) ignored: " + "; ".join(claims.problems),
                    {"problems": list(claims.problems)},
                )
            )
        if market.resolution_window.start > market.resolution_window.end:
            checks.append(check_failed("sanity.window_order", "resolution_window.start is after its end"))
            insufficient.append("window_reversed")
        else:
            checks.append(check_passed("sanity.window_order", "resolution_window.start is not after its end"))
        checks.append(self._time_check(prompt_spec, items))
        checks.append(_eligibility(items))
        self._coverage(order, evidence, checks, insufficient)
        checks.extend(_event_checks(event))
        insufficient.extend(code for code, _ in event.problems)
        checks.append(self._event_variables(event, primary, items, insufficient))
        checks.append(self._confidence(claims, items))
        return SanityReport(tuple(checks), event, items, tuple(order), primary, tuple(insufficient))

    def _assess_item(
        self,
        audit: _PerAudit,
        item: EvidenceItem,
        extraction: ItemClaims,
        requirements: dict[str, DataRequirement],
        event: EventSpec,
        primary: str | None,
    ) -> ItemAssessment:
        time_status = _time_status(audit, extraction)
        reason = None
        # Each model field is read once into a local: a Pydantic attribute read is not cheap.
        provenance = item.provenance
        source_id = provenance.source_id
        tier = provenance.tier
        requirement_id = item.requirement_id
        confidence = item.extracted_fields.get("confidence")
        requirement = requirements.get(requirement_id)
        if not item.is_valid:
            reason = "fetch_failed"
        elif confidence is not None and not (is_finite_number(confidence) and 0 <= confidence <= 1):
            reason = "confidence_out_of_bounds"
        elif requirement is None and requirements:
            reason = "unknown_requirement"
        elif (policy_tier := _source_tier(audit.allowed_sources, source_id)) is None:
            reason = "source_not_allowed"
        elif tier < max(
            audit.min_tier,
            requirement.min_provenance_tier if requirement else 0,
            policy_tier,
        ):
            reason = "below_min_tier"
        elif time_status in ("outside_window", "fetched_before_window"):
            reason = time_status
        else:
            value = extraction.value_claim()
            if value is None:
                reason = "no_value"
            elif requirement_id == primary and value.kind != event.needed_kind:
                reason = "value_kind_mismatch"
        return ItemAssessment(
            index=extraction.index,
            evidence_id=item.evidence_id,
            requirement_id=requirement_id,
            source_id=source_id,
            tier=tier,
            eligible=reason is None,
            reason=reason,
            time_status=time_status,
        )

    @staticmethod
    def _bundle_checks(
        prompt_spec: PromptSpec, evidence: EvidenceBundle, checks: list[CheckResult], insufficient: list[str]
    ) -> None:
        count = len(evidence.items)
        if count:
            checks.append(check_passed("bundle.non_empty", f"bundle holds {count} evidence item(s)"))
        else:
            checks.append(check_failed("bundle.non_empty", "bundle holds no evidence items"))
            insufficient.append("empty_bundle")
        market_id = prompt_spec.market.market_id
        if evidence.market_id == market_id:
            checks.append(check_passed("bundle.market_id", f"bundle is for market {market_id}"))
        else:
            message = f"bundle is for market {evidence.market_id!r}, the prompt spec for {market_id!r}"
            checks.append(check_failed("bundle.market_id", message))
            insufficient.append("market_id_mismatch")
        duplicates = evidence.duplicate_evidence_ids()
        if duplicates:
            message = (
                "evidence ids occur more than once, so steps cannot cite them unambiguously: "
                + ", ".join(duplicates)
            )
            checks.append(check_failed("bundle.unique_evidence_ids", message, {"duplicates": duplicates}))
            insufficient.append("duplicate_evidence_ids")
        else:
            checks.append(check_passed("bundle.unique_evidence_ids", "every evidence id is unique"))

    def _time_check(self, prompt_spec: PromptSpec, items: Sequence[ItemAssessment]) -> CheckResult:
        window = prompt_spec.market.resolution_window
        details: dict[str, Any] = {
            "slack_seconds": self.config.timestamp_slack_seconds,
            "window_end": format_time(window.end),
            "window_start": format_time(window.start),
        }
        for status in ("outside_window", "fetched_before_window", "fetched_after_window", "no_timestamp"):
            ids = [item.evidence_id for item in items if item.time_status == status]
            if ids:
                details[status] = ids
        excluded = details.get("outside_window", []) + details.get("fetched_before_window", [])
        unknown = details.get("fetched_after_window", []) + details.get("no_timestamp", [])
        if excluded:
            return check_warning(
                "sanity.time_window",
                f"{len(excluded)} item(s) observed outside the window were excluded",
                details,
            )
        if unknown:
            return check_warning(
                "sanity.time_window",
                f"{len(unknown)} item(s) have no observation time inside the payload",
                details,
            )
        return check_passed("sanity.time_window", "every timed observation falls within the window", details)

    @staticmethod
    def _coverage(
        order: Sequence[str], evidence: EvidenceBundle, checks: list[CheckResult], insufficient: list[str]
    ) -> None:
        present = {item.requirement_id for item in evidence.items}
        missing = [requirement_id for requirement_id in order if requirement_id not in present]
        if missing:
            message = "no evidence item for requirement(s): " + ", ".join(missing)
            checks.append(check_failed("sanity.requirement_coverage", message, {"missing": missing}))
            insufficient.extend(f"requirement_missing:{requirement_id}" for requirement_id in missing)
        else:
            message = f"each of {len(order)} requirement(s) has at least one evidence item"
            checks.append(check_passed("sanity.requirement_coverage", message, {"requirements": list(order)}))

    @staticmethod
    def _event_variables(
        event: EventSpec, primary: str | None, items: Sequence[ItemAssessment], insufficient: list[str]
    ) -> CheckResult:
        details: dict[str, Any] = {"needed_kind": event.needed_kind, "requirement_id": primary}
        usable = [item.evidence_id for item in items if item.requirement_id == primary and item.eligible]
        if usable:
            details["evidence_ids"] = usable
            message = f"{len(usable)} item(s) of {primary} carry a usable {event.needed_kind} value"
            return check_passed("sanity.event_variables", message, details)
        reasons = [f"{item.evidence_id}: {item.reason}" for item in items if item.requirement_id == primary]
        details["excluded"] = reasons
        insufficient.append("value_missing")
        message = f"no item of {primary} carries a usable {event.needed_kind} value"
        return check_failed(
            "sanity.event_variables", message + (" (" + "; ".join(reasons) + ")" if reasons else ""), details
        )

    @staticmethod
    def _confidence(claims: ClaimSet, items: Sequence[ItemAssessment]) -> CheckResult:
        bad_claims = [claim.claim_id for claim in claims if not 0 <= claim.confidence <= 1]
        bad_items = [item.evidence_id for item in items if item.reason == "confidence_out_of_bounds"]
        if bad_claims or bad_items:
            details = {"claim_ids": bad_claims, "evidence_ids": bad_items}
            return check_failed("sanity.confidence_bounds", "confidence outside [0, 1]", details)
        return check_passed(
            "sanity.confidence_bounds", "every claim and evidence confidence is within [0, 1]"
        )


class _PerAudit(NamedTuple):
    """What every item's assessment reads from the prompt spec and config, read once per audit."""

    start: datetime
    end: datetime
    slack: timedelta
    min_tier: int
    allowed_sources: list[SourcePolicy]


def _source_tier(allowed_sources: list[SourcePolicy], source_id: str) -> int | None:
    """The source policy's minimum tier, 0 when unlisted, None when the source is disallowed."""
    for policy in allowed_sources:
        if policy.source_id == source_id:
            return policy.min_provenance_tier if policy.allow else None
    return 0


def _time_status(audit: _PerAudit, extraction: ItemClaims) -> str:
    moment = extraction.observed_at
    if moment is None:
        return "no_timestamp"
    slack = audit.slack
    # Compared as differences: ``window.start - slack`` overflows for a window starting in year 1
    # (and ``window.end + slack`` in year 9999), while a difference of two datetimes never does.
    early = moment - audit.start < -slack
    late = moment - audit.end > slack
    if extraction.observed_from == "provenance.fetched_at":
        if early:
            return "fetched_before_window"
        return "fetched_after_window" if late else "fetched_in_window"
    return "outside_window" if early or late else "in_window"


def _eligibility(items: Sequence[ItemAssessment]) -> CheckResult:
    """One check listing every excluded item by reason (fetch, tier, source policy, window, value)."""
    excluded: dict[str, list[str]] = {}
    for item in items:
        if item.reason is not None:
            excluded.setdefault(item.reason, []).append(item.evidence_id)
    usable = sum(1 for item in items if item.eligible)
    if not excluded:
        return check_passed("sanity.eligibility", f"all {usable} item(s) are usable", {"usable": usable})
    reasons = "; ".join(f"{reason}: {', '.join(ids)}" for reason, ids in excluded.items())
    message = f"{len(items) - usable} of {len(items)} item(s) excluded ({reasons})"
    return check_warning("sanity.eligibility", message, {"excluded": excluded, "usable": usable})


_Recipe = tuple[tuple[str, str, str, dict[str, Any]], tuple[str, str, str, dict[str, Any]]]


def _event_checks(event: EventSpec) -> list[CheckResult]:
    """The threshold and comparator checks, built fresh from the event's cached recipe."""
    return [
        _make(severity, check_id, message, dict(details))
        for severity, check_id, message, details in _recipe_of(event)
    ]


_RECIPES_BY_EVENT: dict[int, tuple[EventSpec, _Recipe]] = {}
_RECIPES_BY_EVENT_LIMIT: Final = 1024


def _recipe_of(event: EventSpec) -> _Recipe:
    """:func:`_event_recipe` of ``event``, found by identity first.

    ``derive_event_spec`` hands the bundles of one market the same (cached, immutable) event
    object, and hashing it for the value-keyed cache costs more than the rest of the lookup. An
    entry holds its event, so the ``id`` cannot be reused while the entry lives; any other object
    takes the value-keyed path.
    """
    found = _RECIPES_BY_EVENT.get(id(event))
    if found is not None and found[0] is event:
        return found[1]
    recipe = _event_recipe(event, _value_type(event))
    if len(_RECIPES_BY_EVENT) >= _RECIPES_BY_EVENT_LIMIT:
        _RECIPES_BY_EVENT.clear()
    _RECIPES_BY_EVENT[id(event)] = (event, recipe)
    return recipe


def _value_type(event: EventSpec) -> str:
    return type(event.threshold.value).__name__ if event.threshold is not None else ""


def _make(severity: str, check_id: str, message: str, details: dict[str, Any]) -> CheckResult:
    """The check of that severity name (direct calls: a compiled build makes them native)."""
    if severity == "passed":
        return check_passed(check_id, message, details)
    if severity == "warning":
        return check_warning(check_id, message, details)
    if severity == "failed":
        return check_failed(check_id, message, details)
    raise KeyError(severity)


@lru_cache(maxsize=1024)
def _event_recipe(event: EventSpec, value_type: str) -> _Recipe:
    """``(severity, check_id, message, details)`` of both checks (events are immutable values;
    callers copy ``details`` so the cached dicts are never handed out). ``value_type`` keeps a
    threshold of ``1`` and one of ``1.0`` (equal, so one cache key otherwise) apart."""
    del value_type
    threshold: tuple[str, str, str, dict[str, Any]]
    comparator: tuple[str, str, str, dict[str, Any]]
    problems = dict(event.problems)
    threshold_problem = problems.get("threshold_unparseable") or problems.get("threshold_missing")
    if threshold_problem:
        threshold = ("failed", "sanity.threshold", threshold_problem, {"text": event.threshold_text})
    elif event.threshold is not None:
        quantity = event.threshold
        details = {"text": quantity.text, "unit": quantity.unit, "value": quantity.value}
        threshold = (
            "passed",
            "sanity.threshold",
            f"threshold {quantity.text!r} is {quantity.value!r}",
            details,
        )
    elif event.kind == "text_equals":
        threshold = (
            "passed",
            "sanity.threshold",
            "threshold is compared as exact text",
            {"text": event.threshold_text},
        )
    elif event.kind == "threshold":
        threshold = ("failed", "sanity.threshold", "no threshold given", {"text": event.threshold_text})
    else:
        threshold = (
            "passed",
            "sanity.threshold",
            f"{event.kind} event: no threshold needed",
            {"event_kind": event.kind},
        )
    comparator_problem = problems.get("comparator_unparseable") or problems.get("comparator_missing")
    details = {
        "comparator": event.comparator,
        "phrase": event.comparator_phrase,
        "source": event.comparator_source,
    }
    if comparator_problem:
        comparator = ("failed", "sanity.comparator", comparator_problem, details)
    elif event.comparator is None:
        comparator = (
            "passed",
            "sanity.comparator",
            f"{event.kind} event: no comparison needed",
            {"event_kind": event.kind},
        )
    elif event.warnings:
        comparator = ("warning", "sanity.comparator", "; ".join(event.warnings), details)
    else:
        message = f"'{event.comparator_phrase}' in the {event.comparator_source} means {event.comparator}"
        comparator = ("passed", "sanity.comparator", message, details)
    return threshold, comparator
