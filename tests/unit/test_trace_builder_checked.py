"""The trace builder's per-step rule check, and ``verify_built``, agree with the rule-by-rule verifier."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.auditor import TracePolicyVerifier
from engine.auditor.analysis import analyse
from engine.auditor.config import AuditConfig
from engine.auditor.reasoning.claim_extraction import ClaimExtractor
from engine.auditor.trace_builder import _Steps, build_steps_checked
from engine.auditor.verification.logic_sanity import LogicSanityChecker
from engine.schemas import EvidenceBundle, PromptSpec, ReasoningTrace, TracePolicy
from engine.schemas.trusted import trusted
from tests.golden.regenerate import CORPUS_DIR


def _parts(path: Any) -> tuple[PromptSpec, EvidenceBundle, Any, Any, Any, AuditConfig]:
    document = json.loads(path.read_bytes())
    spec = PromptSpec.model_validate(document["prompt_spec"])
    bundle = EvidenceBundle.model_validate(document["evidence_bundle"])
    config = AuditConfig()
    claims = ClaimExtractor(config).extract(spec, bundle)
    sanity = LogicSanityChecker(config).assess(spec, bundle, claims)
    return spec, bundle, claims, sanity, analyse(spec, claims, sanity, config), config


def _trace(steps: list[Any], bundle: EvidenceBundle, max_steps: int = 200) -> ReasoningTrace:
    policy = trusted(TracePolicy, decoding_policy="strict", allow_external_sources=False, max_steps=max_steps)
    refs = list(dict.fromkeys(item.evidence_id for item in bundle.items))
    return trusted(ReasoningTrace, trace_id="trace_x", policy=policy, steps=steps, evidence_refs=refs)


@pytest.mark.parametrize("path", sorted(CORPUS_DIR.glob("[0-9][0-9]_*.json")), ids=lambda p: p.name)
def test_built_traces_are_sound_and_verify_built_equals_verify(path: Any) -> None:
    spec, bundle, claims, sanity, analysis, config = _parts(path)
    steps, sound = build_steps_checked(spec, bundle, claims, sanity, analysis, config)
    trace = _trace(steps, bundle)
    verifier = TracePolicyVerifier()
    full = verifier.verify(trace, spec, bundle)
    assert sound is full.ok
    assert verifier.verify_built(trace, spec, bundle, sound) == full
    short = _trace(steps, bundle, max_steps=len(steps) - 1)  # count is verify_built's to check
    assert verifier.verify_built(short, spec, bundle, sound) == verifier.verify(short, spec, bundle)
    assert not verifier.verify_built(short, spec, bundle, sound).ok


def test_analysis_citing_unknown_evidence_is_not_sound_and_fails_the_trace() -> None:
    spec, bundle, claims, sanity, analysis, config = _parts(CORPUS_DIR / "18_quorum_met.json")
    analysis.variables["source_summary"] = ["not_in_bundle"]
    steps, sound = build_steps_checked(spec, bundle, claims, sanity, analysis, config)
    assert sound is False
    result = TracePolicyVerifier().verify_built(_trace(steps, bundle), spec, bundle, sound)
    assert not result.ok
    assert {check.check_id for check in result.checks} >= {"trace.evidence_refs"}


@pytest.mark.parametrize(
    ("inputs", "output", "cited"),
    [
        ({"nested": [{"web_search": "x"}]}, {}, ["e1"]),
        ({}, {"outcome": "YES"}, ["e1"]),
        ({}, {"evaluation_variables": {"verdict": "YES"}}, ["e1"]),
        ({}, {}, ["e2"]),
        ({}, {}, [1]),
    ],
)
def test_each_per_step_rule_turns_the_builder_unsound(inputs: Any, output: Any, cited: Any) -> None:
    steps = _Steps(["e1"])
    steps.add("check", "first", {"a": 1}, {"b": 2}, ["e1"], [])
    assert steps.sound
    steps.add("check", "second", inputs, output, cited, [])
    assert not steps.sound
    steps.add("check", "third", {"a": 1}, {"b": 2}, ["e1"], [])
    assert not steps.sound  # once unsound, it stays unsound
