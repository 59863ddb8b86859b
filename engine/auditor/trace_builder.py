"""Lay the audit out as grounded, ordered steps: Extract → Check → Aggregate → Check → Deduce → Map.

Step layout (ids ``step_0001`` upward):

1. ``extract``   ``extract_claims``: one step per evidence item, in bundle order;
2. ``check``     ``check_requirement_evidence``: one per requirement (eligibility, window, coverage);
3. ``aggregate`` ``aggregate_by_selection_policy``: one per requirement;
4. ``check``     ``check_contradictions``: once, across sources;
5. ``deduce``    ``deduce_event_state``: once, the derived value and event state;
6. ``map``       ``map_evaluation_variables``: once, ``output.evaluation_variables`` for the Judge.

When ``items + 2 * requirements + 3`` would exceed ``max_steps``, consecutive items (and then
requirements) share a step, so the bound always holds. Every step cites evidence ids: its own
items when it has any, else the whole bundle (a finding about absence is a finding about the
bundle). Outputs hold JSON numbers, bools and plain strings only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

from engine.auditor.analysis import Analysis
from engine.auditor.config import AuditConfig
from engine.auditor.reasoning.claim_extraction import ClaimSet
from engine.auditor.reasoning.selection import Selection
from engine.auditor.reasoning.values import format_time
from engine.auditor.verification.key_scan import holds_key, is_mapping
from engine.auditor.verification.logic_sanity import SanityReport
from engine.auditor.verification.trace_policy import EXTERNAL_FACT_KEYS, VERDICT_KEYS
from engine.commitments import step_preimage
from engine.schemas import (
    CheckResult,
    DataRequirement,
    EvidenceBundle,
    EvidenceItem,
    PromptSpec,
    Provenance,
    ReasoningStep,
    SelectionPolicy,
    StepType,
)
from engine.schemas.trusted import trusted_step

__all__ = [
    "BuiltSteps",
    "build_steps",
    "build_steps_checked",
    "build_steps_committed",
    "build_trace_parts",
    "plan_chunks",
]

# Imported model classes as ``Final`` names: a compiled build reads them from C statics, not
# from the module dict at each use (they are defined in interpreted modules).
_EVIDENCE_ITEM: Final = EvidenceItem
_PROVENANCE: Final = Provenance
_SELECTION_POLICY: Final = SelectionPolicy
_CHECK_RESULT: Final = CheckResult


def _ceil_div(count: int, size: int) -> int:
    return -(-count // size)


def plan_chunks(items: int, requirements: int, max_steps: int) -> tuple[int, int]:
    """Items per extract step and requirements per check/aggregate step that fit ``max_steps``."""
    available = max_steps - 3
    item_chunk = requirement_chunk = 1
    while _ceil_div(items, item_chunk) + 2 * _ceil_div(requirements, requirement_chunk) > available:
        if (
            _ceil_div(items, item_chunk) >= 2 * _ceil_div(requirements, requirement_chunk)
            and items > item_chunk
        ):
            item_chunk += 1
        elif requirements > requirement_chunk:
            requirement_chunk += 1
        else:
            item_chunk += 1
    return item_chunk, requirement_chunk


_STEP_IDS: Final = tuple(f"step_{number:04d}" for number in range(1, 257))
"""Step ids by position (a format call per step costs more than the rest of the id logic)."""


_STEP_MODEL: Final = ReasoningStep
"""``ReasoningStep`` as a ``Final`` name: a compiled build reads it from a C static, not from the
module dict once per step."""


def _step_id(number: int) -> str:
    """``step_`` + ``number`` zero-padded to four digits."""
    return _STEP_IDS[number - 1] if 0 < number <= len(_STEP_IDS) else f"step_{number:04d}"


def _unique(values: Iterable[Any]) -> list[Any]:
    """``list(dict.fromkeys(values))``: first occurrences, in order (compiled, a native loop).

    ``Any``, not ``str``: a compiled build must not refuse a stray non-string id with a
    ``TypeError`` before :meth:`_Steps._holds` can answer False for it."""
    if type(values) is list:
        listed: list[Any] = values
        if len(listed) <= 1:
            return listed.copy()  # nothing to drop (and a copy, as the general path makes)
        firsts: dict[Any, None] = {}
        for value in listed:  # a native list loop (the general path iterates through the protocol)
            firsts[value] = None
        return list(firsts)
    return list({value: None for value in values})


def _chunks(values: list[str], size: int) -> list[list[str]]:
    """Consecutive runs of ``size`` values (the last may be shorter)."""
    if size == 1:
        return [[value] for value in values]
    return [values[start : start + size] for start in range(0, len(values), size)]


def _index_chunks(count: int, size: int) -> list[list[int]]:
    """:func:`_chunks` of ``list(range(count))``: typed ``int``, so indexing with them stays native."""
    return [list(range(start, min(start + size, count))) for start in range(0, count, size)]


class BuiltSteps(NamedTuple):
    """The builder's steps, whether each per-step rule held, and each step's committed form.

    ``plains[i]`` is ``canonicalize_value(steps[i])`` and ``preimages[i]`` its canonical bytes (the
    step-hash preimage), made as the step was built so the commitments do not walk it again.
    """

    steps: list[ReasoningStep]
    sound: bool
    plains: list[Any]
    preimages: list[bytes]


class _Steps:
    """Adds steps and checks, as it adds them, the trace-policy rules construction does not settle.

    With ``commit``, each step's canonical plain value and bytes are made as it is added
    (``plains``, ``preimages``).
    Ids (``step_<4+ digits>``, increasing), prior ids (returned by earlier ``add`` calls), types,
    actions and grounding (the whole bundle when a step names nothing) hold by construction. What
    comes from the analysis is checked per step: cited ids are strings of the bundle, inputs carry
    no external-fact key, outputs no verdict key. ``sound`` turns False on any doubt.
    """

    def __init__(self, all_ids: list[str], commit: bool = False) -> None:
        self.commit = commit
        self.steps: list[ReasoningStep] = []
        self.plains: list[Any] = []
        self.preimages: list[bytes] = []
        self.all_ids = all_ids
        self.known = frozenset(all_ids)
        self.sound = True

    def add(
        self,
        step_type: StepType,
        action: str,
        inputs: dict[str, Any],
        output: dict[str, Any],
        evidence_ids: Iterable[str],
        prior: Iterable[str],
    ) -> str:
        step_id = _step_id(len(self.steps) + 1)
        cited = _unique(evidence_ids) or list(self.all_ids)
        if self.sound:
            self.sound = self._holds(inputs, output, cited)
        # ``inputs`` and ``output`` are taken as they are: every caller passes dicts it made for
        # this step (the deduce step a copy of the analysis's ``deduction``).
        step = trusted_step(_STEP_MODEL, step_id, step_type, inputs, action, output, cited, _unique(prior))
        self.steps.append(step)
        if self.commit:
            plain, preimage = step_preimage(step)
            self.plains.append(plain)
            self.preimages.append(preimage)
        return step_id

    def _holds(self, inputs: dict[str, Any], output: dict[str, Any], cited: list[object]) -> bool:
        # ``object``, not ``str``: the ids are checked here, and a compiled build (engine.build)
        # must not turn a stray non-string into a TypeError before the check can answer False.
        known = self.known
        for evidence_id in cited:
            if type(evidence_id) is not str or evidence_id not in known:
                return False
        for key in output:  # ``VERDICT_KEYS.isdisjoint(output)`` as a native loop
            if key in VERDICT_KEYS:
                return False
        variables = output.get("evaluation_variables")
        if type(variables) is dict:
            table: dict[Any, Any] = variables
            for key in table:  # ``VERDICT_KEYS.isdisjoint(variables)`` as a native loop
                if key in VERDICT_KEYS:
                    return False
        elif variables is not None and is_mapping(variables) and not VERDICT_KEYS.isdisjoint(variables):
            return False
        return not holds_key(inputs, EXTERNAL_FACT_KEYS, 0)


def _item_inputs(item: EvidenceItem) -> dict[str, Any]:
    """An extract step's input for one item (``valid`` is :attr:`EvidenceItem.is_valid`)."""
    provenance = item.provenance
    if type(item) is _EVIDENCE_ITEM and type(provenance) is _PROVENANCE:
        # The models' own field dicts (one attribute read each instead of one per field); ``valid``
        # is the ``is_valid`` property's expression. Subclasses, which may override a field with a
        # property, take the attribute path below.
        fields, origin = item.__dict__, provenance.__dict__
        return {
            "content_type": fields["content_type"],
            "evidence_id": fields["evidence_id"],
            "requirement_id": fields["requirement_id"],
            "source_id": origin["source_id"],
            "tier": origin["tier"],
            "valid": fields["success"] and fields["error"] is None,
        }
    return {
        "content_type": item.content_type,
        "evidence_id": item.evidence_id,
        "requirement_id": item.requirement_id,
        "source_id": provenance.source_id,
        "tier": provenance.tier,
        "valid": item.is_valid,
    }


def _requirement_inputs(
    requirement_id: str, requirement: DataRequirement | None, sanity: SanityReport, market_tier: Any
) -> dict[str, Any]:
    """A check step's input for one requirement (``market_tier``: the market's ``min_provenance_tier``)."""
    primary = requirement_id == sanity.primary_requirement_id
    tier = max(market_tier, requirement.min_provenance_tier if requirement else 0)
    return {
        "declared": requirement is not None,
        "min_provenance_tier": tier,
        "needed_kind": sanity.event.needed_kind if primary else None,
        "primary": primary,
        "requirement_id": requirement_id,
    }


def _aggregate_inputs(selection: Selection) -> dict[str, Any]:
    """An aggregate step's input for one requirement's selection."""
    policy = selection.policy
    candidates = [candidate.evidence_id for candidate in selection.ordered]
    if type(policy) is _SELECTION_POLICY:
        fields = policy.__dict__  # an exact policy's field dict: one read instead of five
        return {
            "candidates": candidates,
            "max_sources": fields["max_sources"],
            "min_sources": fields["min_sources"],
            "quorum": fields["quorum"],
            "requirement_id": selection.requirement_id,
            "strategy": fields["strategy"],
            "tie_breaker": fields["tie_breaker"],
        }
    return {
        "candidates": candidates,
        "max_sources": policy.max_sources,
        "min_sources": policy.min_sources,
        "quorum": policy.quorum,
        "requirement_id": selection.requirement_id,
        "strategy": policy.strategy,
        "tie_breaker": policy.tie_breaker,
    }


def _conflicts(contradictions: Sequence[CheckResult]) -> list[dict[str, Any]]:
    """The contradiction step's ``contradictions``: each conflict check's id, severity and details."""
    conflicts: list[dict[str, Any]] = []
    for check in contradictions:
        # An exact check's field dict: one attribute read instead of three (subclasses read attributes).
        fields = check.__dict__ if type(check) is _CHECK_RESULT else None
        check_id = fields["check_id"] if fields is not None else check.check_id
        if ":" not in check_id:
            continue
        if fields is not None:
            severity, details = fields["severity"], fields["details"]
        else:
            severity, details = check.severity, check.details
        conflicts.append({"check_id": check_id, "severity": severity, **details})
    return conflicts


def build_steps(
    prompt_spec: PromptSpec,
    evidence: EvidenceBundle,
    claims: ClaimSet,
    sanity: SanityReport,
    analysis: Analysis,
    config: AuditConfig,
) -> list[ReasoningStep]:
    """The trace's steps, in order (see the module docstring for the layout)."""
    return build_steps_checked(prompt_spec, evidence, claims, sanity, analysis, config)[0]


def build_steps_checked(
    prompt_spec: PromptSpec,
    evidence: EvidenceBundle,
    claims: ClaimSet,
    sanity: SanityReport,
    analysis: Analysis,
    config: AuditConfig,
) -> tuple[list[ReasoningStep], bool]:
    """The steps, and whether every per-step trace-policy rule held as they were built.

    True is not the whole verdict: step count and the final step's evaluation variables are for
    ``TracePolicyVerifier.verify_built``. False means "verify rule by rule".
    """
    built = build_steps_committed(prompt_spec, evidence, claims, sanity, analysis, config, commit=False)
    return built.steps, built.sound


def build_steps_committed(
    prompt_spec: PromptSpec,
    evidence: EvidenceBundle,
    claims: ClaimSet,
    sanity: SanityReport,
    analysis: Analysis,
    config: AuditConfig,
    *,
    commit: bool = True,
) -> BuiltSteps:
    """:func:`build_steps_checked` plus, with ``commit``, each step's canonical plain value and bytes
    (empty lists without it)."""
    steps, sound, plains, preimages, _ = build_trace_parts(
        prompt_spec, evidence, claims, sanity, analysis, config, commit
    )
    return BuiltSteps(steps, sound, plains, preimages)


def build_trace_parts(
    prompt_spec: PromptSpec,
    evidence: EvidenceBundle,
    claims: ClaimSet,
    sanity: SanityReport,
    analysis: Analysis,
    config: AuditConfig,
    commit: bool,
) -> tuple[list[ReasoningStep], bool, list[Any], list[bytes], list[str]]:
    """:func:`build_steps_committed` as a plain tuple, plus the bundle's evidence ids (first
    occurrences, in order; a fresh list, ``ReasoningTrace.evidence_refs`` of the built trace)."""
    items = evidence.items  # each model field is read once: a Pydantic attribute read is not cheap
    item_inputs = [_item_inputs(item) for item in items]
    all_ids = _unique([entry["evidence_id"] for entry in item_inputs])
    steps = _Steps(all_ids, commit)
    order = list(sanity.requirement_ids)
    item_chunk, requirement_chunk = plan_chunks(len(items), len(order), config.max_steps)
    extract_of: dict[int, str] = {}
    claim_items = claims.items
    for positions in _index_chunks(len(items), item_chunk):
        inputs = [item_inputs[index] for index in positions]
        outputs = [claim_items[index].to_output() for index in positions]
        ids = [item_inputs[index]["evidence_id"] for index in positions]
        step_id = steps.add("extract", "extract_claims", {"items": inputs}, {"items": outputs}, ids, [])
        for index in positions:  # ``extract_of.update(dict.fromkeys(positions, step_id))`` as a native loop
            extract_of[index] = step_id
    requirements = {r.requirement_id: r for r in prompt_spec.data_requirements}
    market = prompt_spec.market  # each model field is read once
    market_tier = market.min_provenance_tier
    market_type = market.market_type
    window = market.resolution_window
    window_inputs = {
        "end": format_time(window.end),
        "slack_seconds": config.timestamp_slack_seconds,
        "start": format_time(window.start),
    }
    selection_of = {selection.requirement_id: selection for selection in analysis.selections}
    check_ids: list[str] = []
    aggregate_ids: list[str] = []
    for chunk in _chunks(order, requirement_chunk):
        members = [item for item in sanity.items if item.requirement_id in chunk]
        ids = [item.evidence_id for item in members]
        prior = [extract_of[item.index] for item in members] or _unique(extract_of.values())
        check_output = [
            {
                "covered": any(item.requirement_id == rid for item in members),
                "eligible": [
                    item.evidence_id for item in members if item.requirement_id == rid and item.eligible
                ],
                "items": [item.to_output() for item in members if item.requirement_id == rid],
                "requirement_id": rid,
            }
            for rid in chunk
        ]
        check_inputs = {
            "requirements": [
                _requirement_inputs(rid, requirements.get(rid), sanity, market_tier) for rid in chunk
            ],
            "resolution_window": window_inputs,
        }
        check_id = steps.add(
            "check", "check_requirement_evidence", check_inputs, {"requirements": check_output}, ids, prior
        )
        check_ids.append(check_id)
        selections = [selection_of[rid] for rid in chunk]
        aggregate_inputs = [_aggregate_inputs(selection) for selection in selections]
        candidate_ids = [c.evidence_id for selection in selections for c in selection.ordered]
        aggregate_ids.append(
            steps.add(
                "aggregate",
                "aggregate_by_selection_policy",
                {"selections": aggregate_inputs},
                {"selections": [selection.to_output() for selection in selections]},
                sorted(candidate_ids, key=all_ids.index) or ids,
                [check_id],
            )
        )
    conflicts = _conflicts(analysis.contradictions)
    eligible_ids = [item.evidence_id for item in sanity.items if item.eligible]
    contradiction_id = steps.add(
        "check",
        "check_contradictions",
        {"decisive_keys": analysis.decisive_keys, "relative_tolerance": config.numeric_tolerance},
        {"conflict_detected": analysis.conflict_detected, "contradictions": conflicts},
        eligible_ids,
        check_ids,
    )
    deduce_inputs = {
        "event_kind": sanity.event.kind,
        "market_type": market_type,
        "outcomes": list(sanity.event.outcomes),
        "predicate": prompt_spec.prediction_semantics.predicate,
        "requirement_id": sanity.primary_requirement_id,
        "threshold_text": sanity.event.threshold_text,
    }
    variables = analysis.variables
    deduce_id = steps.add(
        "deduce",
        "deduce_event_state",
        deduce_inputs,
        dict(analysis.deduction),
        variables["selection"]["evidence_ids"],
        [*aggregate_ids, contradiction_id],
    )
    map_inputs = {"market_id": market.market_id, "market_type": market_type}
    steps.add(
        "map",
        "map_evaluation_variables",
        map_inputs,
        {"evaluation_variables": variables},
        variables["source_summary"],
        [deduce_id],
    )
    return steps.steps, steps.sound, steps.plains, steps.preimages, list(all_ids)
