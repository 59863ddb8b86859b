"""The Auditor (Module 06): a deterministic, checkable reasoning trace for one evidence bundle.

``AuditorAgent.audit(prompt_spec, evidence)`` follows the module's algorithm: build a strict,
bounded :class:`TracePolicy`; extract claims; run logic sanity and contradiction checks; reconcile
sources under each requirement's selection policy; deduce the evaluation state; lay it out as
grounded steps; verify the trace against its policy; return ``(trace, verification)``.

The auditor never decides YES/NO/INVALID. It is pure: no clock, environment, network or
randomness, and no iteration over sets into output, so the same inputs give the same bytes.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from engine.auditor.analysis import analyse
from engine.auditor.built_models import policy_model, trace_model, verification_model
from engine.auditor.checks import failed as check_failed
from engine.auditor.config import DEFAULT_AUDITOR_NAME, AuditConfig
from engine.auditor.reasoning.claim_extraction import ClaimExtractor, short_sha256_hex
from engine.auditor.trace_builder import build_trace_parts
from engine.auditor.verification.logic_sanity import LogicSanityChecker
from engine.auditor.verification.trace_policy import TracePolicyVerifier, built_step_count, passing_check
from engine.schemas import (
    CheckResult,
    EvidenceBundle,
    PromptSpec,
    ReasoningTrace,
    VerificationResult,
)
from engine.version import ENGINE_VERSION

__all__ = ["AuditOutcome", "AuditorAgent", "policy_extra", "trace_id_for"]

_SCALARS: Final = frozenset({str, int, float, bool})


def trace_id_for(bundle_id: str) -> str:
    """Cournot's trace id: ``trace_`` + the first 8 bytes of ``sha256(bundle_id)`` as hex."""
    return "trace_" + short_sha256_hex(bundle_id.encode("utf-8"))[:16]


class AuditOutcome(NamedTuple):
    """An audit with each step's committed form, made as the step was built.

    ``step_plains[i]`` is ``canonicalize_value(trace.steps[i])`` and ``step_preimages[i]`` its
    canonical bytes (the preimage of its step hash); reports and commitments reuse them.
    """

    trace: ReasoningTrace
    verification: VerificationResult
    step_plains: list[Any]
    step_preimages: list[bytes]


class AuditorAgent:
    """Deterministic rule-based auditor.

    ``llm`` is accepted for interface compatibility with Cournot's agents and is never called: the
    audit path is rule-based, so ``decoding_policy`` is always ``strict`` (see ``dspy_programs`` for
    the optional, unused scaffold). ``ctx`` is accepted and ignored for the same reason; the audit
    reads no clock.
    """

    role = "auditor"

    def __init__(
        self, llm: Any | None = None, *, name: str | None = None, config: AuditConfig | None = None
    ) -> None:
        self.llm = llm
        self.name = name or DEFAULT_AUDITOR_NAME
        self.config = config or AuditConfig()
        # The last ``policy_extra`` built for an exact (frozen) ``AuditConfig``: ``(config, name, extra)``.
        self._extra: tuple[Any, Any, dict[str, Any]] | None = None

    def audit(
        self, prompt_spec: PromptSpec, evidence: EvidenceBundle, *, ctx: Any | None = None
    ) -> tuple[ReasoningTrace, VerificationResult]:
        """Audit ``evidence`` against ``prompt_spec``; returns the trace and every check's result."""
        del ctx
        trace, verification, _, _ = self._run(prompt_spec, evidence, commit=False)
        return trace, verification

    def audit_committed(self, prompt_spec: PromptSpec, evidence: EvidenceBundle) -> AuditOutcome:
        """:meth:`audit`, plus each step's canonical plain value and bytes (see :class:`AuditOutcome`)."""
        return AuditOutcome(*self._run(prompt_spec, evidence, commit=True))

    def _run(
        self, prompt_spec: PromptSpec, evidence: EvidenceBundle, *, commit: bool
    ) -> tuple[ReasoningTrace, VerificationResult, list[Any], list[bytes]]:
        overrides = prompt_spec.extra.get("audit_policy")
        base = self.config
        policy_problems: list[str]
        if overrides is None and type(base) is AuditConfig:
            config, policy_problems = base, []  # what ``with_overrides(None)`` returns, without the call
        else:
            config, policy_problems = base.with_overrides(overrides)
        # ``Any``: the config's values are recorded as they are (a compiled read of a declared
        # ``int``/``float`` field would unbox and rebox it).
        settings: Any = config
        max_steps = settings.max_steps
        policy = policy_model(max_steps, self._policy_extra(config))
        claims = ClaimExtractor(config).extract(prompt_spec, evidence)
        sanity = LogicSanityChecker(config).assess(prompt_spec, evidence, claims)
        analysis = analyse(prompt_spec, claims, sanity, config)
        steps, sound, plains, preimages, evidence_ids = build_trace_parts(
            prompt_spec, evidence, claims, sanity, analysis, config, commit
        )
        # Built without re-validation: the builder checked the per-step rules as it built the steps
        # and ``built_step_count`` adds the rest (count, final variables); any doubt runs every rule.
        # ``evidence_ids`` is the bundle's evidence ids, first occurrences in order (a fresh list).
        trace = trace_model(trace_id_for(evidence.bundle_id), policy, steps, evidence_ids)
        # ``TracePolicyVerifier().verify_built`` without its wrapper model: the passing check alone
        # when the built trace passes (``built_passes``, from the values the trace was built of),
        # else every rule's result (``verify``), whose fields are carried over.
        count = built_step_count(steps, max_steps, set(evidence_ids), sound)
        if count:
            structure_checks = [passing_check(count)]
            challenge, error = None, None
        else:
            structure = TracePolicyVerifier().verify(trace, prompt_spec, evidence)
            structure_checks, challenge, error = structure.checks, structure.challenge, structure.error
        checks: list[CheckResult] = []
        if policy_problems:
            message = "audit_policy settings ignored: " + "; ".join(policy_problems)
            checks.append(check_failed("sanity.audit_policy", message, {"problems": policy_problems}))
        checks.extend(sanity.checks)
        checks.extend(analysis.event_checks)
        checks.extend(analysis.contradictions)
        checks.extend(structure_checks)
        verification = verification_model(all(check.ok for check in checks), checks, challenge, error)
        return trace, verification, plains, preimages

    def _policy_extra(self, config: AuditConfig) -> dict[str, Any]:
        """``policy_extra(config, self.name)``: a copy of the last one built for this same exact
        config and name (its values are immutable scalars, so a shallow copy equals a fresh build)."""
        name: Any = self.name
        last = self._extra
        if last is not None and last[0] is config and last[1] is name:
            return dict(last[2])
        extra = policy_extra(config, name)
        if type(config) is AuditConfig and all(type(value) in _SCALARS for value in extra.values()):
            self._extra = (config, name, dict(extra))
        return extra


def policy_extra(config: AuditConfig, name: str) -> dict[str, Any]:
    """``config.policy_extra(name)``, built here (compiled) for an exact :class:`AuditConfig`.

    The keys and values are those of :meth:`AuditConfig.policy_extra` (pinned by a unit test); a
    subclass, which may override that method, is asked itself.
    """
    if type(config) is not AuditConfig:
        return config.policy_extra(name)
    settings: Any = config  # values as they are: no unboxing of the declared int/float fields
    return {
        "auditor": name,
        "engine_version": ENGINE_VERSION,
        "max_capture_chars": settings.max_capture_chars,
        "max_claims_per_item": settings.max_claims_per_item,
        "max_pattern_chars": settings.max_pattern_chars,
        "max_search_depth": settings.max_search_depth,
        "max_text_chars": settings.max_text_chars,
        "numeric_tolerance": settings.numeric_tolerance,
        "role": "auditor",
        "timestamp_slack_seconds": settings.timestamp_slack_seconds,
    }
