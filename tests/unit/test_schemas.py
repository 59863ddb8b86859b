"""The wire models accept real Cournot artifacts unchanged and refuse what Cournot refuses."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from engine.canonical import dumps_canonical
from engine.schemas import (
    DataRequirement,
    DeterministicVerdict,
    EvidenceBundle,
    MarketSpec,
    PoRRoots,
    PromptSpec,
    ReasoningStep,
    ReasoningTrace,
    SelectionPolicy,
    TracePolicy,
)

SAMPLE = json.loads((Path(__file__).parent.parent / "data" / "cournot_minimal.json").read_text())


def sample() -> dict[str, Any]:
    return copy.deepcopy(SAMPLE)


def test_real_cournot_artifacts_parse_unchanged() -> None:
    spec = PromptSpec.model_validate(sample()["prompt_spec"])
    bundle = EvidenceBundle.model_validate(sample()["evidence_bundle"])
    assert spec.market.market_id == bundle.market_id
    assert spec.data_requirements[0].expected_fields == ["bitcoin.usd"]


def test_datetimes_normalised_to_utc_z_at_parse_time() -> None:
    spec = PromptSpec.model_validate(sample()["prompt_spec"])
    canonical = json.loads(dumps_canonical(spec))
    assert canonical["market"]["resolution_window"]["end"] == "2026-02-01T00:00:00Z"
    assert canonical["market"]["resolution_deadline"] == "2026-02-02T00:00:00Z"


def test_naive_timestamps_refused_with_field_path() -> None:
    doc = sample()["prompt_spec"]
    doc["market"]["resolution_deadline"] = "2026-02-02T00:00:00"
    with pytest.raises(ValidationError) as info:
        PromptSpec.model_validate(doc)
    assert info.value.errors()[0]["loc"] == ("market", "resolution_deadline")
    assert "time zone" in info.value.errors()[0]["msg"]


def test_int_and_float_keep_their_json_type_in_untyped_fields() -> None:
    bundle = EvidenceBundle.model_validate(sample()["evidence_bundle"])
    text = dumps_canonical(bundle)
    assert '"usd":101234.5' in text and '"volume":42' in text
    # a float field given an int is coerced exactly as Cournot's lax pydantic does
    assert '"weight":1.0' in text


@pytest.mark.parametrize(
    ("where", "key"),
    [
        (("prompt_spec",), "surprise"),
        (("prompt_spec", "market"), "colour"),
        (("evidence_bundle",), "signature"),
    ],
)
def test_unknown_fields_rejected(where: tuple[str, ...], key: str) -> None:
    doc = sample()
    target = doc
    for part in where:
        target = target[part]
    target[key] = 1
    model = PromptSpec if where[0] == "prompt_spec" else EvidenceBundle
    with pytest.raises(ValidationError) as info:
        model.model_validate(doc[where[0]])
    assert info.value.errors()[0]["type"] == "extra_forbidden"


def test_binary_market_needs_yes_no_in_order() -> None:
    doc = sample()["prompt_spec"]["market"]
    doc["possible_outcomes"] = ["NO", "YES"]
    with pytest.raises(ValidationError, match="binary"):
        MarketSpec.model_validate(doc)


def test_multi_choice_market_must_not_list_invalid() -> None:
    doc = sample()["prompt_spec"]["market"]
    doc.update(market_type="multi_choice", possible_outcomes=["A", "B", "INVALID"])
    with pytest.raises(ValidationError, match="INVALID"):
        MarketSpec.model_validate(doc)
    doc["possible_outcomes"] = ["A", "B", "C"]
    assert MarketSpec.model_validate(doc).possible_outcomes == ["A", "B", "C"]


def test_market_needs_a_resolution_rule() -> None:
    doc = sample()["prompt_spec"]["market"]
    doc["resolution_rules"] = {"rules": []}
    with pytest.raises(ValidationError, match="at least one rule"):
        MarketSpec.model_validate(doc)


def test_selection_policy_bounds() -> None:
    with pytest.raises(ValidationError, match="quorum"):
        SelectionPolicy(strategy="multi_source_quorum", quorum=4, max_sources=3)
    with pytest.raises(ValidationError, match="min_sources"):
        SelectionPolicy(strategy="single_best", min_sources=4, max_sources=3)


def test_requirement_needs_targets_unless_deferred() -> None:
    policy = {"strategy": "single_best"}
    with pytest.raises(ValidationError, match="source_targets"):
        DataRequirement.model_validate(
            {"requirement_id": "r", "description": "d", "selection_policy": policy}
        )
    req = DataRequirement.model_validate(
        {
            "requirement_id": "r",
            "description": "d",
            "selection_policy": policy,
            "deferred_source_discovery": True,
        }
    )
    assert req.source_targets == []


def test_provenance_tier_is_literal_0_to_4() -> None:
    doc = sample()["evidence_bundle"]
    doc["items"][0]["provenance"]["tier"] = 5
    with pytest.raises(ValidationError) as info:
        EvidenceBundle.model_validate(doc)
    assert info.value.errors()[0]["loc"][:4] == ("items", 0, "provenance", "tier")


def test_duplicate_evidence_ids_are_reported() -> None:
    doc = sample()["evidence_bundle"]
    doc["items"].append(copy.deepcopy(doc["items"][0]))
    bundle = EvidenceBundle.model_validate(doc)
    assert bundle.duplicate_evidence_ids() == ["ev_3f1d2c4b5a697887"]


def _step(step_id: str, prior: list[str] | None = None) -> ReasoningStep:
    return ReasoningStep(step_id=step_id, type="extract", action="a", prior_step_ids=prior or [])


def test_trace_model_enforces_module_03_structure() -> None:
    ReasoningTrace(trace_id="t", steps=[_step("step_0001"), _step("step_0002", ["step_0001"])])
    with pytest.raises(ValidationError, match="not an earlier step"):
        ReasoningTrace(trace_id="t", steps=[_step("step_0001", ["step_0002"]), _step("step_0002")])
    with pytest.raises(ValidationError, match="duplicate"):
        ReasoningTrace(trace_id="t", steps=[_step("step_0001"), _step("step_0001")])
    with pytest.raises(ValidationError, match="policy allows 1"):
        ReasoningTrace(trace_id="t", policy=TracePolicy(max_steps=1), steps=[_step("a"), _step("b")])
    with pytest.raises(ValidationError, match="unique"):
        ReasoningTrace(trace_id="t", evidence_refs=["e", "e"])


def test_verdict_rule_id_not_blank() -> None:
    with pytest.raises(ValidationError, match="whitespace"):
        DeterministicVerdict(market_id="m", outcome="YES", confidence=0.8, resolution_rule_id="  ")


def test_por_roots_lowercase_and_check_hex() -> None:
    good = "0x" + "AB" * 32
    roots = PoRRoots(
        prompt_spec_hash=good,
        evidence_root=good,
        evidence_leaf_count=1,
        reasoning_root=good,
        reasoning_leaf_count=3,
        verdict_hash=good,
        por_root=good,
    )
    assert roots.por_root == "0x" + "ab" * 32
    with pytest.raises(ValidationError, match="64 hex"):
        PoRRoots.model_validate({**roots.model_dump(), "verdict_hash": "0x1234"})
