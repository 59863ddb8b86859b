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
from datetime import timedelta
from typing import Any, ClassVar, Final

from engine.auditor.checks import failed as check_failed
from engine.auditor.checks import failed_taking, passed_taking, warning_taking
from engine.auditor.checks import passed as check_passed
from engine.auditor.config import AuditConfig
from engine.auditor.reasoning.claim_extraction import ClaimSet, ItemClaims
from engine.auditor.reasoning.semantics import EventSpec, derive_event_spec
from engine.auditor.reasoning.values import format_time, is_finite_number
from engine.auditor.record import Record
from engine.auditor.verification.event_checks import event_checks
from engine.schemas import (
    CheckResult,
    DataRequirement,
    EvidenceBundle,
    EvidenceItem,
    PromptSpec,
    Provenance,
    SourcePolicy,
)

__all__ = [
    "ItemAssessment",
    "LogicSanityChecker",
    "SanityReport",
    "primary_requirement_id",
    "requirement_order",
]

# Imported model classes as ``Final`` names: a compiled build reads them from C statics, not
# from the module dict at each use (they are defined in interpreted modules).
_EVIDENCE_ITEM: Final = EvidenceItem
_PROVENANCE: Final = Provenance
_SOURCE_POLICY: Final = SourcePolicy


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
        return list({requirement_id: None for requirement_id in declared})  # first occurrences, in order
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
            slack_delta(self.config.timestamp_slack_seconds),
            market.min_provenance_tier,
            market.allowed_sources,
        )
        bundle_items, extractions = evidence.items, claims.items
        if len(bundle_items) != len(extractions):
            list(zip(bundle_items, extractions, strict=True))  # raises the ValueError of a strict zip
        # A native loop by position (``zip(strict=True)`` is a keyword call through Python).
        items = tuple(
            [
                self._assess_item(
                    audit, bundle_items[position], extractions[position], requirements, event, primary
                )
                for position in range(len(bundle_items))
            ]
        )
        checks: list[CheckResult] = []
        insufficient: list[str] = []
        self._bundle_checks(market.market_id, evidence, items, checks, insufficient)
        if claims.problems:
            checks.append(
                check_failed(
                    "sanity.extraction_config",
                    f"{len(claims.problems)} extraction setting(s) ignored: " + "; ".join(claims.problems),
                    {"problems": list(claims.problems)},
                )
            )
        if audit.start > audit.end:
            checks.append(check_failed("sanity.window_order", "resolution_window.start is after its end"))
            insufficient.append("window_reversed")
        else:
            checks.append(check_passed("sanity.window_order", "resolution_window.start is not after its end"))
        checks.append(self._time_check(audit, items))
        checks.append(_eligibility(items))
        self._coverage(order, items, checks, insufficient)
        checks.extend(event_checks(event))
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
        if type(item) is _EVIDENCE_ITEM and type(provenance) is _PROVENANCE:
            # The models' own field dicts (one read each instead of one per field); ``valid`` is
            # the ``is_valid`` property's expression. Subclasses take the attribute path below.
            fields, origin = item.__dict__, provenance.__dict__
            source_id, tier = origin["source_id"], origin["tier"]
            evidence_id, requirement_id = fields["evidence_id"], fields["requirement_id"]
            extracted, valid = fields["extracted_fields"], fields["success"] and fields["error"] is None
        else:
            source_id, tier = provenance.source_id, provenance.tier
            evidence_id, requirement_id = item.evidence_id, item.requirement_id
            extracted, valid = item.extracted_fields, item.is_valid
        confidence = extracted.get("confidence")
        requirement = requirements.get(requirement_id)
        if not valid:
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
            evidence_id=evidence_id,
            requirement_id=requirement_id,
            source_id=source_id,
            tier=tier,
            eligible=reason is None,
            reason=reason,
            time_status=time_status,
        )

    @staticmethod
    def _bundle_checks(
        market_id: str,
        evidence: EvidenceBundle,
        items: Sequence[ItemAssessment],
        checks: list[CheckResult],
        insufficient: list[str],
    ) -> None:
        count = len(items)
        if count:
            checks.append(check_passed("bundle.non_empty", f"bundle holds {count} evidence item(s)"))
        else:
            checks.append(check_failed("bundle.non_empty", "bundle holds no evidence items"))
            insufficient.append("empty_bundle")
        if evidence.market_id == market_id:
            checks.append(check_passed("bundle.market_id", f"bundle is for market {market_id}"))
        else:
            message = f"bundle is for market {evidence.market_id!r}, the prompt spec for {market_id!r}"
            checks.append(check_failed("bundle.market_id", message))
            insufficient.append("market_id_mismatch")
        duplicates = (
            _duplicates([item.evidence_id for item in items])
            if type(evidence) is EvidenceBundle
            else evidence.duplicate_evidence_ids()
        )
        if duplicates:
            message = (
                "evidence ids occur more than once, so steps cannot cite them unambiguously: "
                + ", ".join(duplicates)
            )
            checks.append(check_failed("bundle.unique_evidence_ids", message, {"duplicates": duplicates}))
            insufficient.append("duplicate_evidence_ids")
        else:
            checks.append(check_passed("bundle.unique_evidence_ids", "every evidence id is unique"))

    def _time_check(self, audit: _PerAudit, items: Sequence[ItemAssessment]) -> CheckResult:
        details: dict[str, Any] = {
            "slack_seconds": self.config.timestamp_slack_seconds,
            "window_end": format_time(audit.end),
            "window_start": format_time(audit.start),
        }
        for status in ("outside_window", "fetched_before_window", "fetched_after_window", "no_timestamp"):
            ids = [item.evidence_id for item in items if item.time_status == status]
            if ids:
                details[status] = ids
        excluded = details.get("outside_window", []) + details.get("fetched_before_window", [])
        unknown = details.get("fetched_after_window", []) + details.get("no_timestamp", [])
        if excluded:
            return warning_taking(
                "sanity.time_window",
                f"{len(excluded)} item(s) observed outside the window were excluded",
                details,
            )
        if unknown:
            return warning_taking(
                "sanity.time_window",
                f"{len(unknown)} item(s) have no observation time inside the payload",
                details,
            )
        return passed_taking("sanity.time_window", "every timed observation falls within the window", details)

    @staticmethod
    def _coverage(
        order: Sequence[str],
        items: Sequence[ItemAssessment],
        checks: list[CheckResult],
        insufficient: list[str],
    ) -> None:
        present = {item.requirement_id for item in items}
        missing = [requirement_id for requirement_id in order if requirement_id not in present]
        if missing:
            message = "no evidence item for requirement(s): " + ", ".join(missing)
            checks.append(failed_taking("sanity.requirement_coverage", message, {"missing": missing}))
            insufficient.extend(f"requirement_missing:{requirement_id}" for requirement_id in missing)
        else:
            message = f"each of {len(order)} requirement(s) has at least one evidence item"
            checks.append(
                passed_taking("sanity.requirement_coverage", message, {"requirements": list(order)})
            )

    @staticmethod
    def _event_variables(
        event: EventSpec, primary: str | None, items: Sequence[ItemAssessment], insufficient: list[str]
    ) -> CheckResult:
        details: dict[str, Any] = {"needed_kind": event.needed_kind, "requirement_id": primary}
        usable = [item.evidence_id for item in items if item.requirement_id == primary and item.eligible]
        if usable:
            details["evidence_ids"] = usable
            message = f"{len(usable)} item(s) of {primary} carry a usable {event.needed_kind} value"
            return passed_taking("sanity.event_variables", message, details)
        reasons = [f"{item.evidence_id}: {item.reason}" for item in items if item.requirement_id == primary]
        details["excluded"] = reasons
        insufficient.append("value_missing")
        message = f"no item of {primary} carries a usable {event.needed_kind} value"
        return failed_taking(
            "sanity.event_variables", message + (" (" + "; ".join(reasons) + ")" if reasons else ""), details
        )

    @staticmethod
    def _confidence(claims: ClaimSet, items: Sequence[ItemAssessment]) -> CheckResult:
        bad_claims = [claim.claim_id for claim in claims if not 0 <= claim.confidence <= 1]
        bad_items = [item.evidence_id for item in items if item.reason == "confidence_out_of_bounds"]
        if bad_claims or bad_items:
            details = {"claim_ids": bad_claims, "evidence_ids": bad_items}
            return failed_taking("sanity.confidence_bounds", "confidence outside [0, 1]", details)
        return check_passed(
            "sanity.confidence_bounds", "every claim and evidence confidence is within [0, 1]"
        )


class _PerAudit:
    """What every item's assessment reads from the prompt spec and config, read once per audit
    (a native class when compiled: a NamedTuple is built through an interpreted ``__new__``)."""

    __slots__ = ("allowed_sources", "end", "min_tier", "slack", "start")

    def __init__(self, start: Any, end: Any, slack: timedelta, min_tier: Any, allowed_sources: Any) -> None:
        # ``Any``: the models' values as they are (no compiled type check the NamedTuple did not make).
        self.start: Final = start
        self.end: Final = end
        self.slack: Final = slack
        self.min_tier: Final = min_tier
        self.allowed_sources: Final = allowed_sources


_SLACKS: dict[int, timedelta] = {}
_SLACKS_LIMIT: Final = 64


def slack_delta(seconds: Any) -> timedelta:
    """``timedelta(seconds=seconds)``, made once per int value (timedeltas are immutable values)."""
    if type(seconds) is not int:
        return timedelta(seconds=seconds)
    found = _SLACKS.get(seconds)
    if found is None:
        if len(_SLACKS) >= _SLACKS_LIMIT:
            _SLACKS.clear()
        found = _SLACKS[seconds] = timedelta(seconds=seconds)
    return found


def _source_tier(allowed_sources: list[SourcePolicy], source_id: str) -> int | None:
    """The source policy's minimum tier, 0 when unlisted, None when the source is disallowed."""
    for policy in allowed_sources:
        if type(policy) is _SOURCE_POLICY:
            fields = policy.__dict__  # an exact policy's field dict: one read instead of three
            if fields["source_id"] == source_id:
                return fields["min_provenance_tier"] if fields["allow"] else None
        elif policy.source_id == source_id:
            return policy.min_provenance_tier if policy.allow else None
    return 0


def _duplicates(evidence_ids: list[str]) -> list[str]:
    """:meth:`EvidenceBundle.duplicate_evidence_ids` of a bundle whose items have these evidence ids."""
    seen: set[str] = set()
    duplicates: list[str] = []
    for evidence_id in evidence_ids:
        if evidence_id in seen and evidence_id not in duplicates:
            duplicates.append(evidence_id)
        seen.add(evidence_id)
    return duplicates


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
        return passed_taking("sanity.eligibility", f"all {usable} item(s) are usable", {"usable": usable})
    reasons = "; ".join(f"{reason}: {', '.join(ids)}" for reason, ids in excluded.items())
    message = f"{len(items) - usable} of {len(items)} item(s) excluded ({reasons})"
    return warning_taking("sanity.eligibility", message, {"excluded": excluded, "usable": usable})
