"""The auditor's one-read-per-model fast paths equal the attribute reads and methods they replace.

Exact models are read through their field dicts; subclasses (which may override a field with a
property) take the attribute path. Both must give the same values, and a whole audit of subclassed
models must commit the same bytes as one of the exact models.
"""

from __future__ import annotations

import json
from collections import UserDict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.auditor import AuditorAgent
from engine.auditor.agent import policy_extra
from engine.auditor.config import AuditConfig
from engine.auditor.reasoning.claims import Claim
from engine.auditor.reasoning.item_fields import item_fields
from engine.auditor.reasoning.selection import Candidate, select
from engine.auditor.trace_builder import _aggregate_inputs, _conflicts
from engine.auditor.verification.key_scan import _find_key, holds_key
from engine.auditor.verification.logic_sanity import _duplicates, _source_tier
from engine.auditor.verification.trace_policy import (
    EXTERNAL_FACT_KEYS,
    TracePolicyVerifier,
    built_step_count,
)
from engine.canonical import canonical_bytes
from engine.schemas import (
    CheckResult,
    EvidenceBundle,
    EvidenceItem,
    PromptSpec,
    Provenance,
    ReasoningStep,
    ReasoningTrace,
    SelectionPolicy,
    SourcePolicy,
)
from tests.golden.regenerate import CORPUS_DIR


class _Item(EvidenceItem):
    """A subclass: the fast paths must take the attribute path for it."""


class _Origin(Provenance):
    pass


class _Policy(SelectionPolicy):
    pass


class _Source(SourcePolicy):
    pass


class _Check(CheckResult):
    pass


def _corpus() -> list[tuple[PromptSpec, EvidenceBundle]]:
    out = []
    for path in sorted(CORPUS_DIR.glob("*.json")):
        document = json.loads(path.read_bytes())
        try:
            out.append(
                (
                    PromptSpec.model_validate(document["prompt_spec"]),
                    EvidenceBundle.model_validate(document["evidence_bundle"]),
                )
            )
        except ValueError:
            continue
    return out


def _subclassed(bundle: EvidenceBundle) -> EvidenceBundle:
    items = [
        _Item(**{**item.model_dump(), "provenance": _Origin(**item.provenance.model_dump())})
        for item in bundle.items
    ]
    return bundle.model_copy(update={"items": items})


def test_policy_extra_equals_the_config_method_key_for_key() -> None:
    for config in (AuditConfig(), AuditConfig(numeric_tolerance=0, timestamp_slack_seconds=0, max_steps=8)):
        made = policy_extra(config, "auditor.x")
        expected = config.policy_extra("auditor.x")
        assert list(made.items()) == list(expected.items())
        assert [type(value) for value in made.values()] == [type(value) for value in expected.values()]


def test_repeated_audits_record_a_fresh_policy_extra_equal_to_the_config_method() -> None:
    """The agent reuses the last ``policy_extra`` of the same config and name, as a fresh copy."""
    spec, bundle = _corpus()[0]
    agent = AuditorAgent(name="auditor.first")
    first, _ = agent.audit(spec, bundle)
    second, _ = agent.audit(spec, bundle)
    assert first.policy.extra == second.policy.extra == agent.config.policy_extra("auditor.first")
    assert first.policy.extra is not second.policy.extra
    second.policy.extra["role"] = "changed"  # a caller's change reaches no later audit
    agent.name = "auditor.second"
    third, _ = agent.audit(spec, bundle)
    assert third.policy.extra == agent.config.policy_extra("auditor.second")
    agent.config = AuditConfig(max_steps=64)
    fourth, _ = agent.audit(spec, bundle)
    assert fourth.policy.extra == agent.config.policy_extra("auditor.second")
    assert fourth.policy.max_steps == 64


def test_policy_extra_asks_a_config_subclass_itself() -> None:
    class Custom(AuditConfig):
        def policy_extra(self, auditor_name: str) -> dict[str, Any]:
            return {"custom": auditor_name}

    assert policy_extra(Custom(), "a") == {"custom": "a"}


def test_item_fields_equal_the_attribute_reads_for_exact_and_subclassed_items() -> None:
    for _, bundle in _corpus():
        for exact, sub in zip(bundle.items, _subclassed(bundle).items, strict=True):
            for item in (exact, sub):
                fields = item_fields(item)
                assert fields.field_values() == (
                    item.evidence_id,
                    item.requirement_id,
                    item.content_type,
                    item.raw_content,
                    item.parsed_value,
                    item.is_valid,
                    item.extracted_fields,
                    item.provenance.tier,
                    item.provenance.fetched_at,
                )


def test_a_subclassed_bundle_is_audited_to_the_same_bytes() -> None:
    agent = AuditorAgent()
    for spec, bundle in _corpus():
        exact_trace, exact_verification = agent.audit(spec, bundle)
        sub_trace, sub_verification = agent.audit(spec, _subclassed(bundle))
        assert canonical_bytes(sub_trace) == canonical_bytes(exact_trace)
        assert canonical_bytes(sub_verification) == canonical_bytes(exact_verification)


def test_built_step_count_equals_built_passes_on_the_corpus_and_on_broken_last_steps() -> None:
    agent = AuditorAgent()
    verifier = TracePolicyVerifier()
    for spec, bundle in _corpus():
        trace, _ = agent.audit(spec, bundle)
        known = {item.evidence_id for item in bundle.items}
        last = trace.steps[-1]
        broken_output = ReasoningStep.model_construct(**{**dict(last), "output": {"other": 1}})
        broken_type = ReasoningStep(**{**dict(last), "type": "check"})
        variants: list[list[Any]] = [trace.steps, [*trace.steps[:-1], broken_output]]
        variants += [[*trace.steps[:-1], broken_type], [*trace.steps[:-1], dict(last)], []]
        for steps in variants:
            for sound in (True, False):
                # Not an int (the pure rule's ``type(limit) is int``): never the built path.
                assert built_step_count(steps, True, known, sound) == 0
                assert built_step_count(steps, 9.0, known, sound) == 0
            for limit in (trace.policy.max_steps, len(steps), max(len(steps) - 1, 1), 0):
                for sound in (True, False):
                    candidate = ReasoningTrace.model_construct(
                        trace_id=trace.trace_id,
                        policy=trace.policy.model_copy(update={"max_steps": limit}),
                        steps=steps,
                        evidence_refs=trace.evidence_refs,
                    )
                    expected = verifier.built_passes(candidate, bundle, sound)
                    assert built_step_count(steps, limit, known, sound) == expected


@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=8))
@settings(max_examples=200)
def test_duplicates_equal_the_bundle_method(ids: list[str]) -> None:
    items = [
        EvidenceItem(
            evidence_id=eid, requirement_id="r", provenance=Provenance(source_id="s", source_uri="u")
        )
        for eid in ids
    ]
    bundle = EvidenceBundle(bundle_id="b", market_id="m", plan_id="p", items=items)
    assert _duplicates(ids) == bundle.duplicate_evidence_ids()


def _reference_tier(allowed: list[SourcePolicy], source_id: str) -> int | None:
    for policy in allowed:
        if policy.source_id == source_id:
            return policy.min_provenance_tier if policy.allow else None
    return 0


_sources = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.booleans(), st.integers(0, 4), st.booleans()),
    max_size=5,
)


@given(_sources, st.sampled_from(["a", "b", "c", "z"]))
@settings(max_examples=200)
def test_source_tier_equals_the_attribute_reads(
    raw: list[tuple[str, bool, int, bool]], source_id: str
) -> None:
    allowed: list[SourcePolicy] = [
        (_Source if sub else SourcePolicy)(source_id=sid, kind="api", allow=allow, min_provenance_tier=tier)
        for sid, allow, tier, sub in raw
    ]
    assert _source_tier(allowed, source_id) == _reference_tier(allowed, source_id)


def test_conflicts_and_aggregate_inputs_read_exact_and_subclassed_models_alike() -> None:
    checks = [
        CheckResult(check_id="contradiction.scan", ok=True, severity="info", message="m", details={"n": 1}),
        CheckResult(
            check_id="contradiction.numeric:p", ok=False, severity="error", message="m", details={"k": 1}
        ),
    ]
    subclassed = [_Check(**check.model_dump()) for check in checks]
    expected = [{"check_id": "contradiction.numeric:p", "severity": "error", "k": 1}]
    assert _conflicts(checks) == _conflicts(subclassed) == expected
    for policy in (
        SelectionPolicy(strategy="multi_source_quorum", max_sources=4, quorum=2, tie_breaker="most_recent"),
        _Policy(strategy="fallback_chain", min_sources=2, max_sources=2),
    ):
        selection = select("r", policy, None, [], lambda candidate: None)
        assert _aggregate_inputs(selection) == {
            "candidates": [],
            "max_sources": policy.max_sources,
            "min_sources": policy.min_sources,
            "quorum": policy.quorum,
            "requirement_id": "r",
            "strategy": policy.strategy,
            "tie_breaker": policy.tie_breaker,
        }


def _candidate(index: int, source_id: str, value: int) -> Candidate:
    claim = Claim(f"cl_{index}", "numeric", "price", "parsed_value.price", value, f"e{index}", "r", 0.9, 0)
    return Candidate(index, f"e{index}", source_id, index % 3, claim, None)


def test_selection_reads_a_subclassed_policy_like_an_exact_one() -> None:
    candidates = [_candidate(0, "a", 10), _candidate(1, "b", 10), _candidate(2, "c", 11)]
    policies = [
        SelectionPolicy(strategy="single_best", min_sources=2, max_sources=3),
        SelectionPolicy(strategy="single_best", min_sources=3, max_sources=3, tie_breaker="most_recent"),
        SelectionPolicy(strategy="multi_source_quorum", max_sources=3, quorum=2),
        SelectionPolicy(strategy="fallback_chain", tie_breaker="source_priority"),
    ]
    for exact in policies:
        sub = _Policy(**exact.model_dump())
        for pool in (candidates, candidates[:1], []):
            made = select("r", exact, None, pool, lambda c: c.claim.value)
            again = select("r", sub, None, pool, lambda c: c.claim.value)
            assert made.field_values()[2:] == again.field_values()[2:]
            assert made.to_output() == again.to_output()


_scan_keys = st.sampled_from(["a", "b", "external_facts", "web_search", "z"])
_scan_values = st.recursive(
    st.none() | st.integers() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(_scan_keys, children, max_size=3)
        | st.dictionaries(_scan_keys, children, max_size=3).map(UserDict)
    ),
    max_leaves=40,
)


@given(_scan_values)
@settings(max_examples=400)
def test_key_scan_over_dicts_lists_and_other_mappings_agrees_with_the_path_walk(value: object) -> None:
    assert holds_key(value, EXTERNAL_FACT_KEYS, 0) == (
        _find_key(value, EXTERNAL_FACT_KEYS, "inputs", 0) is not None
    )


@given(st.integers(0, 31 * 24 * 3600) | st.floats(0, 1e6, allow_nan=False))
@settings(max_examples=200)
def test_slack_delta_equals_a_fresh_timedelta(seconds: float) -> None:
    from datetime import timedelta

    from engine.auditor.verification.logic_sanity import slack_delta

    made = slack_delta(seconds)
    assert made == timedelta(seconds=seconds) and type(made) is timedelta
    assert slack_delta(seconds) == made


@given(st.integers(0, 30), st.integers(1, 7))
@settings(max_examples=200)
def test_step_chunks_equal_list_slices(count: int, size: int) -> None:
    from engine.auditor.trace_builder import _chunks, _index_chunks

    values = [f"r{index}" for index in range(count)]
    assert _chunks(values, size) == [values[start : start + size] for start in range(0, count, size)]
    positions = list(range(count))
    assert _index_chunks(count, size) == [positions[start : start + size] for start in range(0, count, size)]


@given(st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.booleans() | st.text(max_size=8))
@settings(max_examples=300)
def test_canonical_scalar_equals_the_type_reprs_and_canonical_json(value: object) -> None:
    from engine.auditor.reasoning.claim_extraction import _canonical_scalar
    from engine.canonical import dumps_canonical

    made = _canonical_scalar(value)
    if type(value) is int:
        assert made == int.__repr__(value)
    elif type(value) is float:
        assert made == float.__repr__(value)
    assert made == dumps_canonical(value)
