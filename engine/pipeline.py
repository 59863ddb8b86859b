"""The one deterministic pipeline: Auditor → Judge → PoR commitments.

``run_pipeline`` is pure: the same PromptSpec and EvidenceBundle give a byte-identical
:class:`PipelineResult` (``canonical_json()``) in every process, whatever ``PYTHONHASHSEED``, time
zone or locale. Consumers call it to produce artifacts and ``ledger replay`` calls it to re-prove them.
"""

from __future__ import annotations

from typing import Any, Final, Protocol, cast

from pydantic import BaseModel, ConfigDict, PrivateAttr

from engine.auditor import AuditorAgent
from engine.canonical import canonical_bytes, dumps_canonical
from engine.commitments import ItemCanonical, commit_inputs, compute_roots
from engine.judge import EvaluationSource, JudgeAgent, locate_evaluation_variables
from engine.pipeline_fields import engine_made
from engine.schemas import (
    DeterministicVerdict,
    EvidenceBundle,
    PoRRoots,
    PromptSpec,
    ReasoningTrace,
    VerificationResult,
)
from engine.schemas.trusted import instance_from_state
from engine.version import ENGINE_VERSION

__all__ = ["Auditor", "Judge", "PipelineResult", "run_pipeline"]


class Auditor(Protocol):
    """Anything that audits like :class:`engine.auditor.AuditorAgent`."""

    def audit(
        self, prompt_spec: PromptSpec, evidence: EvidenceBundle
    ) -> tuple[ReasoningTrace, VerificationResult]: ...


class Judge(Protocol):
    """Anything that judges like :class:`engine.judge.JudgeAgent`."""

    def judge(
        self, prompt_spec: PromptSpec, evidence: EvidenceBundle, trace: ReasoningTrace
    ) -> tuple[DeterministicVerdict, VerificationResult]: ...


class PipelineResult(BaseModel):
    """Everything one run commits to, plus the checks behind it. Immutable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    trace: ReasoningTrace
    audit_verification: VerificationResult
    verdict: DeterministicVerdict
    judge_verification: VerificationResult
    roots: PoRRoots
    step_hashes: list[str]
    evaluation_variables: dict[str, Any] | None = None
    engine_version: str
    _step_canonical: tuple[bytes, ...] = PrivateAttr(default=())
    _prompt_spec_canonical: bytes = PrivateAttr(default=b"")
    _verdict_canonical: bytes = PrivateAttr(default=b"")

    @property
    def step_canonical(self) -> tuple[bytes, ...]:
        """Canonical UTF-8 bytes of each step, the preimages of ``step_hashes`` (made once, by the engine).

        Not a field: it is derived from ``trace`` and never part of ``canonical_json()``. Empty for a
        result built outside :func:`run_pipeline`.
        """
        return cast(tuple[bytes, ...], self._private("_step_canonical"))

    @property
    def prompt_spec_canonical(self) -> bytes:
        """Canonical UTF-8 bytes of the prompt spec, the preimage of ``roots.prompt_spec_hash`` (not a field)."""
        return cast(bytes, self._private("_prompt_spec_canonical"))

    @property
    def verdict_canonical(self) -> bytes:
        """Canonical UTF-8 bytes of the verdict, the preimage of ``roots.verdict_hash`` (not a field;
        empty for a result built outside :func:`run_pipeline`)."""
        return cast(bytes, self._private("_verdict_canonical"))

    def _private(self, name: str) -> Any:
        """A private attribute read from pydantic's private dict directly: ``self.<name>`` goes
        through ``BaseModel.__getattr__`` after a failed lookup (an exception, ~5 µs per read); a
        result without that dict or that key reads it the usual way."""
        private = self.__pydantic_private__
        if type(private) is dict and name in private:
            return private[name]
        return getattr(self, name)

    def canonical_json(self) -> str:
        """Canonical JSON of the whole result (the replay and determinism tests compare these bytes)."""
        return dumps_canonical(self)


_DEFAULT_AUDITOR: Final = AuditorAgent()
_DEFAULT_JUDGE: Final = JudgeAgent()
"""The agents :func:`run_pipeline` uses when given none: one each, shared by every run, as replay
shares its own (``ledger.replay.runner``). Neither keeps state between runs that could change a
result: the judge holds nothing, the auditor a frozen default ``AuditConfig`` and a cache of the
policy extra keyed on that very config object and name. Building them per run cost a dataclass
``__init__`` and ``__post_init__`` and the policy extra, every message."""


def _evaluation_variables(source: EvaluationSource | None) -> dict[str, Any] | None:
    return None if source is None else dict(source.raw)


def run_pipeline(
    prompt_spec: PromptSpec,
    evidence: EvidenceBundle,
    *,
    auditor: Auditor | None = None,
    judge: Judge | None = None,
    prompt_spec_canonical: bytes = b"",
    evidence_items_canonical: ItemCanonical | None = None,
) -> PipelineResult:
    """Audit, judge and commit. Defaults: ``AuditorAgent()`` and ``JudgeAgent()``.

    ``prompt_spec_canonical``: the prompt spec's canonical bytes when the caller already made them
    from this very ``prompt_spec`` (the envelope decoder does); they become the preimage of
    ``prompt_spec_hash``. Replay passes the bytes its own decoder made from the stored inputs.
    ``evidence_items_canonical``: the evidence items' canonical bytes the decoder made
    (``DecodedEnvelope.evidence_items_canonical``), used for ``evidence_root`` only when bound to
    these very item objects (:class:`engine.commitments.ItemCanonical`); else the items are hashed here.
    """
    if auditor is None:
        auditor = _DEFAULT_AUDITOR
    if judge is None:
        judge = _DEFAULT_JUDGE
    if isinstance(auditor, AuditorAgent) and type(auditor).audit is AuditorAgent.audit:
        # The steps' canonical bytes come with the audit, made as the steps were built.
        trace, audit_verification, _, preimages = auditor.audit_committed(prompt_spec, evidence)
        inputs = commit_inputs(
            prompt_spec,
            evidence,
            trace,
            preimages=preimages,
            prompt_spec_canonical=prompt_spec_canonical,
            evidence_items=evidence_items_canonical,
        )
    else:
        trace, audit_verification = auditor.audit(prompt_spec, evidence)
        inputs = commit_inputs(
            prompt_spec,
            evidence,
            trace,
            prompt_spec_canonical=prompt_spec_canonical,
            evidence_items=evidence_items_canonical,
        )
    if (
        isinstance(judge, JudgeAgent)
        and type(judge).judge is JudgeAgent.judge
        and type(judge).judge_located is JudgeAgent.judge_located
    ):
        # the judge's rules locate the evaluation variables once; the result takes that step's
        verdict, judge_verification, located = judge.judge_located(
            prompt_spec, evidence, trace, commitments=inputs
        )
    elif isinstance(judge, JudgeAgent):
        verdict, judge_verification = judge.judge(prompt_spec, evidence, trace, commitments=inputs)
        located = locate_evaluation_variables(trace)
    else:
        verdict, judge_verification = judge.judge(prompt_spec, evidence, trace)
        located = locate_evaluation_variables(trace)
    verdict_bytes = canonical_bytes(verdict)  # hashed into the roots; replay compares the stored text with it
    return _result(
        {
            "trace": trace,
            "audit_verification": audit_verification,
            "verdict": verdict,
            "judge_verification": judge_verification,
            "roots": compute_roots(
                prompt_spec, evidence, trace, verdict, inputs=inputs, verdict_canonical=verdict_bytes
            ),
            "step_hashes": list(inputs.step_hashes),
            "evaluation_variables": _evaluation_variables(located),
            "engine_version": ENGINE_VERSION,
        },
        {
            "_step_canonical": inputs.step_canonical,
            "_prompt_spec_canonical": inputs.prompt_spec_canonical,
            "_verdict_canonical": verdict_bytes,
        },
    )


_RESULT_TYPES: dict[str, type] = {
    "trace": ReasoningTrace,
    "audit_verification": VerificationResult,
    "verdict": DeterministicVerdict,
    "judge_verification": VerificationResult,
    "roots": PoRRoots,
    "step_hashes": list,
    "engine_version": str,
}


_RESULT_TYPE_PAIRS: Final = tuple(_RESULT_TYPES.items())


def _result(fields: dict[str, Any], private: dict[str, Any]) -> PipelineResult:
    """The :class:`PipelineResult` of these fields with these private attributes.

    The engine's own values (models it built, a fresh list of hash strings, a fresh dict of string
    keys or None) are stored as they are, as validation would keep them (it accepts model instances
    without re-validating them), at a fraction of its cost; anything of another type goes through
    the validating constructor, and is refused there as before. ``fields`` are in declared order.
    """
    if engine_made(fields, _RESULT_TYPE_PAIRS):
        made: PipelineResult = instance_from_state(PipelineResult, fields, set(fields), private)
        return made
    result = PipelineResult(**fields)
    for name, value in private.items():
        setattr(result, name, value)
    return result
