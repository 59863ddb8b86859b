"""The Auditor (Module 06): a deterministic, checkable reasoning trace for one evidence bundle.

``AuditorAgent.audit(prompt_spec, evidence)`` follows the module's algorithm: build a strict,
bounded :class:`TracePolicy`; extract claims; run logic sanity and contradiction checks; reconcile
sources under each requirement's selection policy; deduce the evaluation state; lay it out as
grounded steps; verify the trace against its policy; return ``(trace, verification)``.

The auditor never decides YES/NO/INVALID. It is pure: no clock, environment, network or
randomness, and no iteration over sets into output, so the same inputs give the same bytes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from engine.auditor.analysis import analyse
from engine.auditor.checks import failed as check_failed
from engine.auditor.config import DEFAULT_AUDITOR_NAME, AuditConfig
from engine.auditor.reasoning.claim_extraction import ClaimExtractor, short_sha256_hex
from engine.auditor.trace_builder import build_steps_committed
from engine.auditor.verification.logic_sanity import LogicSanityChecker
from engine.auditor.verification.trace_policy import TracePolicyVerifier, passing_check
from engine.schemas import (
    CheckResult,
    EvidenceBundle,
    PromptSpec,
    ReasoningTrace,
    TracePolicy,
    VerificationResult,
)
from engine.schemas.trusted import trusted

__all__ = ["AuditOutcome", "AuditorAgent", "trace_id_for"]


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

    def audit(
        self, prompt_spec: PromptSpec, evidence: EvidenceBundle, *, ctx: Any | None = None
    ) -> tuple[ReasoningTrace, VerificationResult]:
        """Audit ``evidence`` against ``prompt_spec``; returns the trace and every check's result."""
        del ctx
        outcome = self._run(prompt_spec, evidence, commit=False)
        return outcome.trace, outcome.verification

    def audit_committed(self, prompt_spec: PromptSpec, evidence: EvidenceBundle) -> AuditOutcome:
        """:meth:`audit`, plus each step's canonical plain value and bytes (see :class:`AuditOutcome`)."""
        return self._run(prompt_spec, evidence, commit=True)

    def _run(self, prompt_spec: PromptSpec, evidence: EvidenceBundle, *, commit: bool) -> AuditOutcome:
        config, policy_problems = self.config.with_overrides(prompt_spec.extra.get("audit_policy"))
        policy = trusted(
            TracePolicy,
            decoding_policy="strict",
            allow_external_sources=False,
            max_steps=config.max_steps,
            extra=config.policy_extra(self.name),
        )
        claims = ClaimExtractor(config).extract(prompt_spec, evidence)
        sanity = LogicSanityChecker(config).assess(prompt_spec, evidence, claims)
        analysis = analyse(prompt_spec, claims, sanity, config)
        built = build_steps_committed(prompt_spec, evidence, claims, sanity, analysis, config, commit=commit)
        # Built without re-validation: the builder checked the per-step rules as it built the steps
        # and verify_built adds the rest (count, final variables); any doubt runs every rule.
        trace = trusted(
            ReasoningTrace,
            trace_id=trace_id_for(evidence.bundle_id),
            policy=policy,
            steps=built.steps,
            evidence_refs=list(dict.fromkeys(item.evidence_id for item in evidence.items)),
        )
        # ``verify_built`` without its wrapper model: the passing check alone when the built trace
        # passes, else every rule's result (``verify``), whose fields are carried over.
        verifier = TracePolicyVerifier()
        count = verifier.built_passes(trace, evidence, built.sound)
        if count:
            structure_checks = [passing_check(count)]
            challenge, error = None, None
        else:
            structure = verifier.verify(trace, prompt_spec, evidence)
            structure_checks, challenge, error = structure.checks, structure.challenge, structure.error
        checks: list[CheckResult] = []
        if policy_problems:
            message = "audit_policy settings ignored: " + "; ".join(policy_problems)
            checks.append(check_failed("sanity.audit_policy", message, {"problems": policy_problems}))
        checks.extend(sanity.checks)
        checks.extend(analysis.event_checks)
        checks.extend(analysis.contradictions)
        checks.extend(structure_checks)
        verification = trusted(
            VerificationResult,
            ok=all(check.ok for check in checks),
            checks=checks,
            challenge=challenge,
            error=error,
        )
        return AuditOutcome(trace, verification, built.plains, built.preimages)
