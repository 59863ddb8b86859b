"""The audit report: trace, verification, step hashes and Cournot-compatible roots as plain JSON.

This is what ``ledger audit --format json`` prints and what the golden files pin. Every hash is
computed here, in the engine, with :mod:`engine.commitments`:

* ``step_hashes``: ``0x`` + sha256(canonical(step)), in step order;
* ``reasoning_root``: Cournot's Merkle root over those hashes, with ``reasoning_leaf_count``;
* ``evidence_root`` (with ``evidence_leaf_count``) and ``prompt_spec_hash``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.auditor.agent import AuditorAgent
from engine.canonical import canonicalize_value
from engine.commitments import evidence_root, prompt_spec_hash, step_commitments, step_preimages
from engine.schemas import EvidenceBundle, PromptSpec, ReasoningTrace, TracePolicy
from engine.version import ENGINE_VERSION

__all__ = ["audit_report", "evaluation_variables"]


def evaluation_variables(trace: ReasoningTrace) -> Mapping[str, Any] | None:
    """The ``evaluation_variables`` of the last map step (the Judge's input), if present."""
    for step in reversed(trace.steps):
        variables = step.output.get("evaluation_variables")
        if step.type == "map" and isinstance(variables, Mapping):
            return variables
    return None


def _trace_plain(trace: ReasoningTrace, step_plains: list[Any]) -> dict[str, Any]:
    """``canonicalize_value(trace)``, reusing the steps' plain values made for their hashes.

    An exact trace with an exact policy is read field by field (its dump is its fields); any other
    is dumped first."""
    if type(trace) is ReasoningTrace and type(trace.policy) is TracePolicy:
        header: dict[str, Any] = trace.__dict__
    else:
        header = trace.model_dump(mode="python", by_alias=True, exclude_none=True, exclude={"steps"})
    plain: dict[str, Any] = {}
    for name in ReasoningTrace.model_fields:
        if name == "steps":
            plain[name] = step_plains
        else:
            value = header.get(name)
            if value is not None:
                plain[name] = canonicalize_value(value)
    return plain


def audit_report(
    prompt_spec: PromptSpec, evidence: EvidenceBundle, *, agent: AuditorAgent | None = None
) -> dict[str, Any]:
    """Audit and commit: a JSON-ready dict (None values dropped, as in canonical JSON)."""
    agent = agent or AuditorAgent()
    if type(agent).audit is AuditorAgent.audit:  # the steps' committed form comes with the audit
        trace, verification, step_plains, preimages = agent.audit_committed(prompt_spec, evidence)
    else:  # an overridden audit: commit to whatever trace it returns
        trace, verification = agent.audit(prompt_spec, evidence)
        step_plains, preimages = step_preimages(trace.steps)
    hashes, reasoning_root = step_commitments(preimages)
    ev_root, ev_count = evidence_root(evidence)
    report = {
        "bundle_id": evidence.bundle_id,
        "engine_version": ENGINE_VERSION,
        "evaluation_variables": evaluation_variables(trace),
        "evidence_leaf_count": ev_count,
        "evidence_root": ev_root,
        "market_id": prompt_spec.market.market_id,
        "prompt_spec_hash": prompt_spec_hash(prompt_spec),
        "reasoning_leaf_count": len(hashes),
        "reasoning_root": reasoning_root,
        "step_hashes": hashes,
        "trace": _trace_plain(trace, step_plains),
        "trace_id": trace.trace_id,
        "verification": verification,
    }
    # canonicalize_value(report), key by key, so the steps' plain values are not walked twice.
    result: dict[str, Any] = {}
    for key, value in report.items():
        if key == "trace":
            result[key] = value
        elif value is not None:
            result[key] = canonicalize_value(value)
    return result
