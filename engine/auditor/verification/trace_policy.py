"""Hard structural verification of a reasoning trace against its policy and its evidence.

The verifier never relies on the model validators of :class:`ReasoningTrace`: a trace made with
``model_construct`` (or one whose steps are plain dicts) is checked field by field. Rules:

``trace.step_schema``  every step has a string id, a known type, an action, dict inputs/output and
                       string lists of evidence ids and prior step ids;
``trace.step_count``   no more steps than ``policy.max_steps`` (and the verifier's own cap);
``trace.step_ids``     ids are ``step_<digits>``, unique, strictly increasing;
``trace.prior_steps``  every prior step id names an earlier step;
``trace.evidence_refs`` every evidence id a step (or the trace) cites exists in the bundle;
``trace.grounding``    every step cites at least one evidence id (unless the bundle is empty);
``trace.external_facts`` no step input carries external-fact fields when the policy forbids them;
``trace.no_verdict``   no step outputs an outcome or verdict: the auditor never decides;
``trace.final_evaluation_variables`` the last step is a map/aggregate step whose output holds
                       well-typed ``evaluation_variables`` citing only bundle evidence;
``trace.hash_commitments`` a step that carries ``hash_commitment`` matches its recomputed hash.

Each failed rule is one failed check (carrying the offending step); when every rule holds, one
passing ``trace.policy`` check lists the rules verified. The first failure is reported as
``ChallengeRef(kind="reasoning_leaf", step_id=..., leaf_index=...)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from pydantic import BaseModel

from engine.auditor import checks as _checks
from engine.auditor.verification.key_scan import _find_key, holds_key, is_mapping
from engine.commitments import step_hash
from engine.schemas import (
    ChallengeRef,
    CheckResult,
    CournotError,
    EvidenceBundle,
    PromptSpec,
    ReasoningStep,
    ReasoningTrace,
    TracePolicy,
    VerificationResult,
)
from engine.schemas.trusted import trusted

__all__ = [
    "EXTERNAL_FACT_KEYS",
    "REQUIRED_VARIABLES",
    "VERDICT_KEYS",
    "TracePolicyVerifier",
    "built_step_count",
    "holds_key",
]

STEP_TYPES: Final = frozenset({"search", "extract", "check", "deduce", "aggregate", "map"})
EXTERNAL_FACT_KEYS: Final = frozenset(
    {"external_facts", "external_sources", "external_data", "web_search", "search_results", "llm_knowledge",
     "assumed_facts", "background_knowledge"}
)  # fmt: skip
VERDICT_ORDER: Final[tuple[str, ...]] = ("outcome", "preliminary_outcome", "recommended_outcome", "verdict")
REQUIRED_VARIABLES: Final[tuple[str, ...]] = ("source_summary", "conflict_detected", "insufficient_evidence")
OPTIONAL_VARIABLES: Final[tuple[str, ...]] = ("event_observed", "numeric_value", "timestamp")
_STEP_ID: Final = re.compile(r"step_(\d{1,9})")


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    if isinstance(obj, BaseModel):
        return getattr(obj, name, default)
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


class _View(NamedTuple):
    """The fields of one step, read once whatever the step is (model, constructed model or dict)."""

    step_id: Any
    type: Any
    action: Any
    inputs: Any
    output: Any
    evidence_ids: Any
    prior_step_ids: Any
    hash_commitment: Any
    step: Any


def _view(step: Any) -> _View:
    if type(step) is ReasoningStep:
        return _View(
            step.step_id,
            step.type,
            step.action,
            step.inputs,
            step.output,
            step.evidence_ids,
            step.prior_step_ids,
            step.hash_commitment,
            step,
        )
    return _View._make([*(_get(step, name) for name in _View._fields[:-1]), step])


def _string_list(value: Any) -> bool:
    if type(value) is list and (not value or set(map(type, value)) == _STR_ONLY):
        return True
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


_STR_ONLY = {str}


class _Findings:
    """Collects failed rules (one check each) and remembers the first failure as the challenge."""

    def __init__(self) -> None:
        self.rules: list[str] = []
        self.checks: list[CheckResult] = []
        self.challenge: ChallengeRef | None = None

    def record(self, check_id: str, failure: tuple[int, str, str, str | None] | None) -> None:
        """``failure`` is ``(leaf_index, step_id, message, evidence_id)`` of the first offending step."""
        self.rules.append(check_id)
        if failure is None:
            return
        index, step_id, message, evidence_id = failure
        details = {"leaf_index": index, "step_id": step_id, "evidence_id": evidence_id}
        self.checks.append(_checks.failed(check_id, message, details))
        if self.challenge is None:
            self.challenge = trusted(
                ChallengeRef,
                kind="reasoning_leaf",
                leaf_index=index,
                step_id=step_id or None,
                evidence_id=evidence_id,
                reason=f"{check_id}: {message}",
            )


Failure = tuple[int, str, str, str | None] | None
"""``(leaf_index, step_id, message, evidence_id)`` of the first offending step, or None."""


def _label(view: _View) -> str:
    return view.step_id if isinstance(view.step_id, str) else ""


class TracePolicyVerifier:
    """Verify structure and grounding of a trace; ``max_steps`` optionally caps the trace's own policy."""

    def __init__(self, *, max_steps: Any = None) -> None:
        """``max_steps``: an ``int`` or None. Typed ``Any`` so the compiled build does not unbox it at
        the call (it refused a float with another message and turned ``True`` into ``1``, where the
        pure engine ran on): both refuse anything but an exact ``int`` here."""
        if max_steps is not None and type(max_steps) is not int:
            raise TypeError(f"max_steps must be an int or None, got {type(max_steps).__name__}")
        self.max_steps = max_steps

    def verify(
        self, trace: ReasoningTrace, prompt_spec: PromptSpec, evidence: EvidenceBundle
    ) -> VerificationResult:
        """Run every rule; ``ok`` is False with a reasoning-leaf challenge on the first failure."""
        del prompt_spec  # the rules need only the trace and the bundle's evidence ids
        known = {item.evidence_id for item in evidence.items}
        if type(trace) is ReasoningTrace and self._every_rule_holds(trace, known):
            return _passing(len(trace.steps))
        views = [_view(step) for step in (_get(trace, "steps", None) or [])]
        policy = _get(trace, "policy", None)
        count = len(views)
        allow_external = bool(_get(policy, "allow_external_sources", False))
        findings = _Findings()
        findings.record("trace.step_schema", _schema(views))
        findings.record("trace.step_count", self._count(views, policy))
        findings.record("trace.step_ids", _ids(views))
        findings.record("trace.prior_steps", _priors(views))
        findings.record("trace.evidence_refs", _refs(trace, views, known))
        findings.record("trace.grounding", _grounding(views, bool(known)))
        findings.record("trace.external_facts", _external(views, allow_external))
        findings.record("trace.no_verdict", _verdicts(views))
        findings.record("trace.final_evaluation_variables", _final(views, known))
        findings.record("trace.hash_commitments", _commitments(views))
        ok = findings.challenge is None
        error = None
        if ok:
            message = f"{count} step(s) satisfy every trace policy rule"
            details = {"rules": findings.rules, "steps": count}
            findings.checks.append(_checks.passed("trace.policy", message, details))
        else:
            failed_ids = [check.check_id for check in findings.checks]
            error = trusted(
                CournotError,
                code="trace_policy_violation",
                message="trace violates its policy: " + ", ".join(failed_ids),
                details={"failed_checks": failed_ids},
            )
        return trusted(
            VerificationResult, ok=ok, checks=findings.checks, challenge=findings.challenge, error=error
        )

    def _every_rule_holds(self, trace: ReasoningTrace, known: set[str]) -> bool:
        """One pass over a model-built trace: True only when every rule below would pass.

        A fast screen, not a second rule set: any doubt (an unusual type, a hash commitment to
        recompute, any rule failing) answers False and the rule-by-rule path decides and explains.
        The two paths are tested to agree on the corpus and on broken traces.
        """
        steps = trace.steps
        policy = trace.policy
        limit = policy.max_steps if type(policy) is TracePolicy else None
        if type(limit) is not int or limit < 1:
            return False
        if self.max_steps is not None:
            limit = min(limit, self.max_steps)
        if not steps or len(steps) > limit:
            return False
        check_external = not policy.allow_external_sources
        earlier: set[str] = set()
        previous = -1
        for step in steps:
            if type(step) is not ReasoningStep or step.hash_commitment is not None:
                return False
            step_id, inputs, output = step.step_id, step.inputs, step.output
            evidence_ids, prior_ids = step.evidence_ids, step.prior_step_ids
            if (
                type(step_id) is not str
                or step.type not in STEP_TYPES
                or type(step.action) is not str
                or type(inputs) is not dict
                or type(output) is not dict
                or type(evidence_ids) is not list
                or type(prior_ids) is not list
            ):
                return False
            match = _STEP_ID.fullmatch(step_id)
            if match is None or step_id in earlier:
                return False
            number = int(match.group(1))
            if number <= previous:
                return False
            for prior in prior_ids:
                if type(prior) is not str or prior not in earlier:
                    return False
            for evidence_id in evidence_ids:
                if type(evidence_id) is not str or evidence_id not in known:
                    return False
            if known and not evidence_ids:
                return False
            if check_external and holds_key(inputs, EXTERNAL_FACT_KEYS, 0):
                return False
            if not VERDICT_KEYS.isdisjoint(output):
                return False
            variables = output.get("evaluation_variables")
            if variables is not None and is_mapping(variables) and not VERDICT_KEYS.isdisjoint(variables):
                return False
            earlier.add(step_id)
            previous = number
        refs = trace.evidence_refs
        if type(refs) is not list or any(evidence_id not in known for evidence_id in refs):
            return False
        return _final([_view(steps[-1])], known) is None

    def verify_built(
        self, trace: ReasoningTrace, spec: PromptSpec, evidence: EvidenceBundle, sound: bool
    ) -> VerificationResult:
        """Verify a trace built in this process; ``sound``: ``build_steps_checked`` saw every per-step rule hold.
        Adds step count and final variables; any doubt, and every stored or foreign trace, uses :meth:`verify`."""
        count = self.built_passes(trace, evidence, sound)
        return _passing(count) if count else self.verify(trace, spec, evidence)

    def built_passes(self, trace: ReasoningTrace, evidence: EvidenceBundle, sound: bool) -> int:
        """Step count if :meth:`verify_built` passes ``trace`` with :func:`passing_check` alone, else 0."""
        steps, limit = trace.steps, trace.policy.max_steps
        if sound and steps and type(limit) is int and limit >= 1 and self.max_steps is None:
            return built_step_count(steps, limit, {item.evidence_id for item in evidence.items}, sound)
        return 0

    def _count(self, views: Sequence[_View], policy: Any) -> Failure:
        limit = _get(policy, "max_steps", 200)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            return 0, "", f"policy.max_steps {limit!r} is not a positive integer", None
        if self.max_steps is not None:
            limit = min(limit, self.max_steps)
        if len(views) > limit:
            return limit, _label(views[limit]), f"{len(views)} steps exceed max_steps {limit}", None
        return None


RULES: Final[tuple[str, ...]] = (
    "trace.step_schema", "trace.step_count", "trace.step_ids", "trace.prior_steps", "trace.evidence_refs",
    "trace.grounding", "trace.external_facts", "trace.no_verdict", "trace.final_evaluation_variables",
    "trace.hash_commitments",
)  # fmt: skip
"""Every rule, in the order :meth:`TracePolicyVerifier.verify` records them."""
VERDICT_KEYS: Final = frozenset(VERDICT_ORDER)


def passing_check(count: int) -> CheckResult:
    """The one check of a trace that satisfies every rule (the same value the rule-by-rule path builds)."""
    message = f"{count} step(s) satisfy every trace policy rule"
    return _checks.passed_taking("trace.policy", message, {"rules": list(RULES), "steps": count})


def built_step_count(steps: list[Any], limit: Any, known: set[str], sound: bool) -> int:
    """:meth:`TracePolicyVerifier.built_passes` (verifier without ``max_steps``) of a trace with these
    steps, ``policy.max_steps`` ``limit`` and a bundle with the evidence ids ``known``."""
    if not (sound and steps and type(limit) is int and limit >= 1 and len(steps) <= limit):
        return 0
    last = steps[-1]
    if type(last) is ReasoningStep:
        # An exact step's field dict (one attribute read instead of one per field, and no view).
        fields = last.__dict__
        failure = _final_step(0, fields["step_id"], fields["type"], fields["output"], known)
    else:
        view = _view(last)
        failure = _final_step(0, view.step_id, view.type, view.output, known)
    return len(steps) if failure is None else 0


def _passing(count: int) -> VerificationResult:  # every rule holds: passing_check alone
    return trusted(VerificationResult, ok=True, checks=[passing_check(count)], challenge=None, error=None)


def _schema(views: Sequence[_View]) -> Failure:
    for index, view in enumerate(views):
        problems = []
        if not isinstance(view.step_id, str) or not view.step_id:
            problems.append("step_id must be a non-empty string")
        if view.type not in STEP_TYPES:
            problems.append(f"type must be one of {', '.join(sorted(STEP_TYPES))}")
        if not isinstance(view.action, str):
            problems.append("action must be a string")
        if not is_mapping(view.inputs) or not is_mapping(view.output):
            problems.append("inputs and output must be objects")
        if not _string_list(view.evidence_ids) or not _string_list(view.prior_step_ids):
            problems.append("evidence_ids and prior_step_ids must be lists of strings")
        if problems:
            return index, _label(view), f"step {index}: " + "; ".join(problems), None
    return None


def _ids(views: Sequence[_View]) -> Failure:
    previous = -1
    seen: set[str] = set()
    for index, view in enumerate(views):
        label = _label(view)
        match = _STEP_ID.fullmatch(label)
        if match is None:
            return index, label, f"step id {view.step_id!r} is not of the form step_<digits>", None
        if label in seen:
            return index, label, f"step id {label} occurs more than once", None
        number = int(match.group(1))
        if number <= previous:
            return index, label, f"step id {label} does not increase on the previous step", None
        seen.add(label)
        previous = number
    return None


def _priors(views: Sequence[_View]) -> Failure:
    earlier: set[str] = set()
    for index, view in enumerate(views):
        for prior in view.prior_step_ids or ():
            if prior not in earlier:
                message = f"step {view.step_id} cites {prior!r}, which is not an earlier step"
                return index, _label(view), message, None
        if isinstance(view.step_id, str):
            earlier.add(view.step_id)
    return None


def _refs(trace: Any, views: Sequence[_View], known: set[str]) -> Failure:
    for index, view in enumerate(views):
        for evidence_id in view.evidence_ids or ():
            if evidence_id not in known:
                message = f"step {view.step_id} cites unknown evidence {evidence_id!r}"
                return index, _label(view), message, str(evidence_id)
    for evidence_id in _get(trace, "evidence_refs", None) or ():
        if evidence_id not in known:
            return 0, "", f"trace.evidence_refs names unknown evidence {evidence_id!r}", str(evidence_id)
    return None


def _grounding(views: Sequence[_View], bundle_has_items: bool) -> Failure:
    if not bundle_has_items:
        return None
    for index, view in enumerate(views):
        if not view.evidence_ids:
            return index, _label(view), f"step {view.step_id} cites no evidence", None
    return None


def _external(views: Sequence[_View], allowed: bool) -> Failure:
    if allowed:
        return None
    for index, view in enumerate(views):
        if not holds_key(view.inputs, EXTERNAL_FACT_KEYS, 0):
            continue
        found = _find_key(view.inputs, EXTERNAL_FACT_KEYS, "inputs", 0)
        if found:
            return index, _label(view), f"step {view.step_id} carries external facts at {found}", None
    return None


def _verdicts(views: Sequence[_View]) -> Failure:
    for index, view in enumerate(views):
        output = view.output
        if not is_mapping(output):
            continue
        variables = output.get("evaluation_variables")
        scopes = [output] + ([variables] if is_mapping(variables) else [])
        for scope in scopes:
            for key in VERDICT_ORDER:
                if key in scope:
                    message = f"step {view.step_id} outputs {key!r}: the auditor must not decide"
                    return index, _label(view), message, None
    return None


def _final(views: Sequence[_View], known: set[str]) -> Failure:
    if not views:
        return 0, "", "trace has no steps, so no evaluation variables", None
    index = len(views) - 1
    view = views[index]
    return _final_step(index, view.step_id, view.type, view.output, known)


def _final_step(index: int, step_id: Any, step_type: Any, output: Any, known: set[str]) -> Failure:
    """:func:`_final` of the step at ``index`` with these fields (its last step)."""
    label = step_id if isinstance(step_id, str) else ""
    variables = output.get("evaluation_variables") if is_mapping(output) else None
    if step_type not in ("map", "aggregate") or not is_mapping(variables):
        message = f"final step {step_id} is not a map/aggregate step with evaluation_variables"
        return index, label, message, None
    get = variables.get  # bound once: a method lookup per read costs more than the read
    problems = [f"{key} is missing" for key in REQUIRED_VARIABLES if key not in variables]
    summary = get("source_summary")
    if "source_summary" in variables and not _string_list(summary):
        problems.append("source_summary must be a list of evidence ids")
    elif isinstance(summary, list):
        problems.extend(
            f"source_summary names unknown evidence {eid!r}" for eid in summary if eid not in known
        )
    for key in ("conflict_detected", "insufficient_evidence"):
        if key in variables and not isinstance(variables[key], bool):
            problems.append(f"{key} must be a bool")
    observed = get("event_observed")
    if observed is not None and not isinstance(observed, bool):
        problems.append("event_observed must be a bool or null")
    number = get("numeric_value")
    if number is not None and (isinstance(number, bool) or not isinstance(number, (int, float))):
        problems.append("numeric_value must be a number or null")
    if get("timestamp") is not None and not isinstance(get("timestamp"), str):
        problems.append("timestamp must be a string or null")
    if problems:
        return index, label, f"evaluation_variables of {step_id}: " + "; ".join(problems), None
    return None


def _commitments(views: Sequence[_View]) -> Failure:
    for index, view in enumerate(views):
        claimed = view.hash_commitment
        if claimed is None:
            continue
        if not isinstance(view.step, ReasoningStep):
            return index, _label(view), "hash_commitment on a step that is not a ReasoningStep", None
        actual = step_hash(view.step)
        if claimed != actual:
            return index, _label(view), f"hash_commitment {claimed} != recomputed {actual}", None
    return None
