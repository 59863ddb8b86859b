"""Module 06 §4–§7 and the Judge contract: the trace the AuditorAgent produces."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.auditor import AuditConfig, AuditorAgent, audit_report, trace_id_for
from engine.commitments import evidence_root, prompt_spec_hash, reasoning_root, step_hash
from engine.schemas import EvidenceBundle, PromptSpec
from engine.version import ENGINE_VERSION
from tests.golden.regenerate import CORPUS_DIR, corpus_paths

CONTRACT_KEYS = {"event_observed", "numeric_value", "timestamp", "source_summary", "conflict_detected"}
CONTRACT_KEYS |= {"insufficient_evidence", "threshold", "comparator", "observed_outcome", "selection"}
LAYOUT = [
    ("extract", "extract_claims"),
    ("check", "check_requirement_evidence"),
    ("aggregate", "aggregate_by_selection_policy"),
    ("check", "check_contradictions"),
    ("deduce", "deduce_event_state"),
    ("map", "map_evaluation_variables"),
]


def load(name: str) -> dict[str, Any]:
    return json.loads((CORPUS_DIR / f"{name}.json").read_text(encoding="utf-8"))


def models(document: dict[str, Any]) -> tuple[PromptSpec, EvidenceBundle]:
    return PromptSpec.model_validate(document["prompt_spec"]), EvidenceBundle.model_validate(
        document["evidence_bundle"]
    )


def audit(document: dict[str, Any], agent: AuditorAgent | None = None) -> Any:
    return (agent or AuditorAgent()).audit(*models(document))


def test_step_layout_ids_and_grounding() -> None:
    document = load("18_quorum_met")
    trace, verification = audit(document)
    items = document["evidence_bundle"]["items"]
    expected = [LAYOUT[0]] * len(items) + LAYOUT[1:]
    assert [(step.type, step.action) for step in trace.steps] == expected
    assert [step.step_id for step in trace.steps] == [f"step_{n:04d}" for n in range(1, len(expected) + 1)]
    assert [step.evidence_ids for step in trace.steps[: len(items)]] == [
        [item["evidence_id"]] for item in items
    ]
    known = {item["evidence_id"] for item in items}
    assert all(step.evidence_ids and set(step.evidence_ids) <= known for step in trace.steps)
    assert trace.evidence_refs == [item["evidence_id"] for item in items]
    assert trace.trace_id == trace_id_for(document["evidence_bundle"]["bundle_id"])
    assert verification.ok is False or verification.ok is True
    assert any(check.check_id == "trace.policy" and check.ok for check in verification.checks)


def test_trace_records_engine_version_and_policy() -> None:
    trace, _ = audit(load("01_clean_threshold"), AuditorAgent(name="auditor.test"))
    assert trace.policy.decoding_policy == "strict" and trace.policy.allow_external_sources is False
    assert trace.policy.extra["engine_version"] == ENGINE_VERSION
    assert trace.policy.extra["auditor"] == "auditor.test"
    assert trace.policy.extra["numeric_tolerance"] == 0.01


@pytest.mark.parametrize("path", corpus_paths(), ids=lambda path: path.stem)
def test_every_corpus_bundle_yields_the_judge_contract_and_never_a_verdict(path: Path) -> None:
    trace, verification = audit(json.loads(path.read_text(encoding="utf-8")))
    final = trace.steps[-1]
    assert final.type == "map"
    variables = final.output["evaluation_variables"]
    assert set(variables) == CONTRACT_KEYS
    assert isinstance(variables["conflict_detected"], bool) and isinstance(
        variables["insufficient_evidence"], bool
    )
    assert variables["event_observed"] in (True, False, None)
    if variables["insufficient_evidence"]:
        assert variables["event_observed"] is None and variables["observed_outcome"] is None
    assert variables["comparator"] in (None, ">", ">=", "<", "<=", "==")
    for step in trace.steps:
        assert not {"outcome", "verdict", "preliminary_outcome"} & set(step.output)
    assert verification.challenge is None  # findings about evidence never break the trace
    assert verification.ok == all(check.ok for check in verification.checks)


def test_judge_variables_for_known_cases() -> None:
    def variables(name: str) -> dict[str, Any]:
        return audit(load(name))[0].steps[-1].output["evaluation_variables"]

    assert variables("04_at_least_boundary")["event_observed"] is True  # 4000 >= 4000
    assert variables("34_strict_above_boundary")["event_observed"] is False  # 100000 > 100000 is false
    assert variables("07_at_most_boundary")["comparator"] == "<="
    assert variables("29_multi_choice")["observed_outcome"] == "Philadelphia Eagles"
    assert variables("20_fallback_chain_used")["selection"]["fallback_used"] is True
    assert variables("12_unparseable_threshold")["insufficient_evidence"] is True
    assert variables("13_ambiguous_comparator")["insufficient_evidence"] is True
    assert variables("19_quorum_not_met")["source_summary"] == []
    assert variables("03_conflicting_sources")["conflict_detected"] is True


def test_step_count_is_bounded_by_max_steps_by_sharing_steps() -> None:
    document = load("18_quorum_met")
    template = document["evidence_bundle"]["items"][0]
    items = []
    for n in range(12):
        item = copy.deepcopy(template)
        item["evidence_id"] = f"ev_{n:016x}"
        items.append(item)
    document["evidence_bundle"]["items"] = items
    trace, verification = audit(document, AuditorAgent(config=AuditConfig(max_steps=8)))
    assert len(trace.steps) <= 8
    extracted = [
        item["evidence_id"] for step in trace.steps if step.type == "extract" for item in step.output["items"]
    ]
    assert extracted == [item["evidence_id"] for item in items]  # every item, once, in bundle order
    assert any(check.check_id == "trace.policy" for check in verification.checks)
    with pytest.raises(ValueError):
        AuditConfig(max_steps=7)


def test_empty_bundle_and_wrong_market_are_insufficient() -> None:
    document = load("01_clean_threshold")
    document["evidence_bundle"]["items"] = []
    trace, verification = audit(document)
    assert trace.steps[-1].output["evaluation_variables"]["insufficient_evidence"] is True
    assert {c.check_id for c in verification.checks if not c.ok} >= {"bundle.non_empty", "event.evaluation"}
    document = load("01_clean_threshold")
    document["evidence_bundle"]["market_id"] = "mk_other"
    _, verification = audit(document)
    assert "bundle.market_id" in {c.check_id for c in verification.checks if not c.ok}


def test_invalid_audit_policy_settings_are_reported() -> None:
    document = load("01_clean_threshold")
    document["prompt_spec"]["extra"]["audit_policy"] = {"numeric_tolerance": 7, "colour": "red"}
    trace, verification = audit(document)
    [check] = [c for c in verification.checks if c.check_id == "sanity.audit_policy"]
    assert not check.ok and len(check.details["problems"]) == 2
    assert trace.policy.extra["numeric_tolerance"] == 0.01


def test_report_commitments_match_engine_commitments() -> None:
    spec, bundle = models(load("02_two_sources_agree"))
    report = audit_report(spec, bundle)
    trace, _ = AuditorAgent().audit(spec, bundle)
    assert report["step_hashes"] == [step_hash(step) for step in trace.steps]
    assert (report["reasoning_root"], report["reasoning_leaf_count"]) == reasoning_root(trace)
    assert (report["evidence_root"], report["evidence_leaf_count"]) == evidence_root(bundle)
    assert report["prompt_spec_hash"] == prompt_spec_hash(spec)


def permute(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: permute(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [permute(item, rng) for item in value]
    return value


REPORTS = {
    path.stem: audit_report(*models(json.loads(path.read_text(encoding="utf-8")))) for path in corpus_paths()
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(REPORTS)), seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_key_order_inside_payloads_changes_nothing(name: str, seed: int) -> None:
    document = load(name)
    rng = random.Random(seed)
    for item in document["evidence_bundle"]["items"]:
        for field in ("parsed_value", "extracted_fields"):
            if field in item:
                item[field] = permute(item[field], rng)
    document["prompt_spec"]["extra"] = permute(document["prompt_spec"]["extra"], rng)
    assert audit_report(*models(document)) == REPORTS[name]


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_whole_document_key_order_changes_nothing(name: str) -> None:
    document = permute(load(name), random.Random(name))
    assert audit_report(*models(document)) == REPORTS[name]


@pytest.mark.parametrize(
    ("start", "end"),
    [("0001-01-01T00:00:00Z", "2026-02-01T00:00:00Z"), ("2026-01-31T23:00:00Z", "9999-12-31T23:59:59Z")],
)
def test_a_resolution_window_at_the_ends_of_the_calendar_is_audited_not_an_overflow(
    start: str, end: str
) -> None:
    document = load("01_clean_threshold")
    document["prompt_spec"]["market"]["resolution_window"] = {"start": start, "end": end}
    prompt_spec, evidence = models(document)
    _, verification = AuditorAgent().audit(prompt_spec, evidence)
    checks = {check.check_id: check for check in verification.checks}
    assert any("time" in check_id or "window" in check_id for check_id in checks), sorted(checks)
