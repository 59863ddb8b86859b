"""``engine.por_pack``: genuine Cournot packs verify; every mutation is rejected and pinpointed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.canonical import hash_canonical, to_hex
from engine.por_pack import (
    MAX_ORDERINGS,
    PackReport,
    PipelineReasoningStep,
    PipelineReasoningTrace,
    settle_verdict_hash,
    verify_pack_document,
)
from engine.schemas import DeterministicVerdict, ReasoningTrace
from ledger.por_files import read_pack_files, verify_pack_path

PACKS = Path(__file__).resolve().parents[1] / "data" / "por_packs"
GENUINE = sorted((PACKS / "genuine").iterdir())
MUTATED = PACKS / "mutated"


def verify(name: str) -> PackReport:
    return verify_pack_path(MUTATED / name)


def failed(report: PackReport) -> dict[str, Any]:
    return {check.check_id: check for check in report.checks if check.status == "failed"}


def test_pipeline_step_hash_matches_cournot_vector() -> None:
    step = PipelineReasoningStep(step_id="step_001", step_type="conclusion", description="d")
    assert (
        to_hex(hash_canonical(step)) == "0x50cb6bffbf0bf8cd01f61d9ebf4c36940a1190672ceac340c3d57bdfa951436b"
    )


@pytest.mark.parametrize("path", GENUINE, ids=[path.name for path in GENUINE])
def test_genuine_packs_verify(path: Path) -> None:
    report = verify_pack_path(path)
    assert report.status == "ok", [c for c in report.checks if c.status != "ok"]
    assert report.challenges == []
    assert {c.check_id for c in report.checks} >= {
        "root.prompt_spec_hash",
        "root.evidence_root",
        "root.reasoning_root",
        "root.verdict_hash",
        "root.por_root",
        "verdict.embedded",
    }


def test_genuine_set_covers_zero_one_and_several_cited_items_and_multi_choice() -> None:
    cited = {}
    for path in GENUINE:
        if path.is_dir():
            verdict = json.loads((path / "verdict.json").read_text(encoding="utf-8"))
            cited[path.name] = len(verdict["selected_leaf_refs"])
    assert cited["all_fetches_failed"] == 0
    assert cited["clean_threshold"] == 1
    assert cited["quorum_met"] == 3
    spec = json.loads((PACKS / "genuine" / "multi_choice" / "prompt_spec.json").read_text(encoding="utf-8"))
    assert spec["market"]["market_type"] == "multi_choice"


def test_the_projects_module03_trace_model_rejects_the_pipeline_trace_the_verifier_accepts() -> None:
    raw = json.loads(
        (PACKS / "genuine" / "clean_threshold" / "reasoning_trace.json").read_text(encoding="utf-8")
    )
    with pytest.raises(ValueError):
        ReasoningTrace.model_validate(raw)
    assert PipelineReasoningTrace.model_validate(raw).steps


@pytest.mark.parametrize(
    ("name", "file_check"),
    [
        ("edit_prompt_spec_manifest_stale", "file.prompt_spec"),
        ("edit_evidence_bundle_manifest_stale", "file.evidence_bundle"),
        ("edit_reasoning_trace_manifest_stale", "file.reasoning_trace"),
        ("edit_verdict_manifest_stale", "file.verdict"),
        ("edit_por_bundle_manifest_stale", "file.por_bundle"),
        ("edit_tool_plan_manifest_stale", "file.tool_plan"),
        ("edit_checks_manifest_stale", "file.checks_judge"),
    ],
)
def test_stale_manifest_names_the_edited_file(name: str, file_check: str) -> None:
    report = verify(name)
    assert report.status == "failed"
    check = failed(report)[file_check]
    assert check.file.endswith(".json") and check.expected != check.actual


def test_edited_prompt_spec_fails_prompt_hash_with_challenge() -> None:
    report = verify("edit_prompt_spec_manifest_fixed")
    check = failed(report)["root.prompt_spec_hash"]
    assert (check.file, check.leaf_index) == ("prompt_spec.json", 0)
    assert [c.kind for c in report.challenges] == ["prompt_hash"]


def test_edited_evidence_item_is_pinpointed_by_the_trace_citation() -> None:
    report = verify("edit_evidence_bundle_manifest_fixed")
    check = failed(report)["root.evidence_root"]
    assert (check.leaf_index, check.evidence_id, check.step_id) == (1, "ev_1bc7f5caf03b6e64", "step_003")
    (challenge,) = report.challenges
    assert challenge.kind == "evidence_leaf" and challenge.leaf_index == 1
    assert challenge.merkle_proof is not None and challenge.merkle_proof.verify()


def test_edited_step_is_pinpointed_by_the_justification() -> None:
    report = verify("edit_reasoning_trace_manifest_fixed")
    check = failed(report)["root.reasoning_root"]
    assert (check.leaf_index, check.step_id) == (3, "step_004")
    assert "verdict_refs.reasoning_root" in failed(report)
    assert [c.kind for c in report.challenges] == ["reasoning_leaf"]


def test_edited_verdict_fails_hash_and_embedded_copy() -> None:
    report = verify("edit_verdict_manifest_fixed")
    bad = failed(report)
    assert bad["root.verdict_hash"].file == "verdict.json"
    assert bad["verdict.embedded"].details["fields"] == ["confidence"]
    assert [c.kind for c in report.challenges] == ["verdict_hash"]


def test_edited_por_bundle_root_is_proved_against_the_claimed_por_root() -> None:
    report = verify("edit_por_bundle_manifest_fixed")
    check = failed(report)["por_bundle.evidence_root"]
    assert (check.file, check.leaf_index) == ("por_bundle.json", 1)
    (challenge,) = report.challenges
    assert challenge.merkle_proof is not None
    assert challenge.merkle_proof.verify(root=report.por_root)  # the expected leaf is in the claimed root


def test_edited_tool_plan_and_manifest_are_named() -> None:
    assert failed(verify("edit_tool_plan_manifest_fixed"))["consistency.plan_id"].file == "tool_plan.json"
    assert failed(verify("edit_manifest"))["manifest.por_root"].file == "manifest.json"


def test_checks_files_are_reported_as_uncommitted() -> None:
    report = verify("edit_checks_manifest_fixed")
    assert report.status == "ok"  # nothing but the unsigned manifest covers checks/ (documented)
    (warning,) = [c for c in report.checks if c.check_id == "file.uncommitted"]
    assert warning.details["files"] == ["checks/audit_checks.json", "checks/judge_checks.json"]


def test_reordered_steps_reproduce_the_claimed_root_in_id_order() -> None:
    report = verify("steps_reordered")
    check = failed(report)["root.reasoning_root"]
    assert (check.leaf_index, check.step_id) == (1, "step_003")
    (challenge,) = report.challenges
    assert challenge.details["proof_against"] == "claimed_root"
    assert challenge.merkle_proof is not None
    assert challenge.merkle_proof.verify(root=check.expected)


def test_dropped_evidence_item_is_named_and_confirmed_by_the_verdict_ids() -> None:
    report = verify("evidence_dropped")
    bad = failed(report)
    assert (bad["root.evidence_root"].leaf_index, bad["root.evidence_root"].evidence_id) == (
        1,
        "ev_1bc7f5caf03b6e64",
    )
    assert bad["verdict_refs.evidence_root"].details["removed"] == ["ev_1bc7f5caf03b6e64"]


def test_flipped_outcome_fails_verdict_hash_and_justification() -> None:
    bad = failed(verify("outcome_flipped"))
    assert bad["root.verdict_hash"].leaf_index == 3
    assert bad["verdict_refs.justification_header"].details["fields"] == ["Outcome"]


def test_swapped_roots_are_both_proved_against_the_claimed_por_root() -> None:
    report = verify("roots_swapped")
    bad = failed(report)
    assert bad["por_bundle.evidence_root"].leaf_index == 1
    assert bad["por_bundle.reasoning_root"].leaf_index == 2
    assert [c.leaf_index for c in report.challenges] == [1, 2]
    assert all(
        c.merkle_proof is not None and c.merkle_proof.verify(root=report.por_root) for c in report.challenges
    )


def test_every_mutation_except_uncommitted_checks_is_rejected() -> None:
    for path in sorted(MUTATED.iterdir()):
        report = verify_pack_path(path)
        expected = (
            "ok" if path.name in {"edit_checks_manifest_fixed", "verdict_set_order_changed"} else "failed"
        )
        assert report.status == expected, path.name
        for check in report.failures:
            assert check.file is not None or check.check_id == "roots", (path.name, check.check_id)


def test_set_order_change_is_settled_by_naming_the_reproducing_order() -> None:
    report = verify("verdict_set_order_changed")
    (check,) = [c for c in report.checks if c.check_id == "root.verdict_hash"]
    assert check.status == "warn" and report.status == "ok"
    written = json.loads((MUTATED / "verdict_set_order_changed" / "verdict.json").read_text(encoding="utf-8"))
    assert check.details["reproducing_selected_leaf_refs"] == list(reversed(written["selected_leaf_refs"]))


def _verdict(refs: list[str]) -> DeterministicVerdict:
    return DeterministicVerdict(
        market_id="mk",
        outcome="YES",
        confidence=0.9,
        resolution_rule_id="R_THRESHOLD",
        selected_leaf_refs=refs,
    )


def test_verdict_hash_unverifiable_when_too_many_orders_and_failed_when_none_matches() -> None:
    many = _verdict([f"ev_{i}" for i in range(9)])
    assert settle_verdict_hash(many, "0x" + "00" * 32).status == "unverifiable"
    assert MAX_ORDERINGS < 362880
    few = _verdict(["ev_a", "ev_b", "ev_c"])
    result = settle_verdict_hash(few, "0x" + "00" * 32)
    assert (result.status, result.details["orders_tried"]) == ("failed", 6)
    target = to_hex(hash_canonical(few.model_copy(update={"selected_leaf_refs": ["ev_c", "ev_a", "ev_b"]})))
    found = settle_verdict_hash(few, target)
    assert (found.status, found.details["reproducing_selected_leaf_refs"]) == (
        "warn",
        ["ev_c", "ev_a", "ev_b"],
    )


def test_zip_and_document_forms_verify_like_the_directory() -> None:
    zipped = verify_pack_path(PACKS / "genuine" / "two_sources_agree_zip.zip")
    directory = verify_pack_path(PACKS / "genuine" / "two_sources_agree")
    assert zipped.por_root == directory.por_root and zipped.status == "ok"
    files = read_pack_files(PACKS / "genuine" / "two_sources_agree")
    document = {key.removesuffix(".json"): json.loads(data) for key, data in files.items() if "/" not in key}
    document.pop("manifest")
    assert verify_pack_document(document, source="doc").status == "ok"
    document["reasoning_trace"]["steps"].reverse()
    assert verify_pack_document(document, source="doc").status == "failed"


def test_missing_and_invalid_parts_are_reported_not_raised() -> None:
    report = verify_pack_document({"prompt_spec": {}, "verdict": "x"}, source="doc")
    assert report.status == "failed"
    ids = {c.check_id for c in report.failures}
    assert {"parse.prompt_spec", "parse.verdict", "parse.evidence_bundle", "roots"} <= ids


def test_cournot_verdicts_from_two_hash_seeds_are_told_apart_by_order_alone() -> None:
    seed0 = json.loads((PACKS / "genuine" / "quorum_met" / "por_bundle.json").read_text(encoding="utf-8"))
    seed2 = json.loads((PACKS / "genuine" / "quorum_met_seed2" / "verdict.json").read_text(encoding="utf-8"))
    assert seed0["verdict_hash"] != to_hex(hash_canonical(DeterministicVerdict.model_validate(seed2)))
    settled = settle_verdict_hash(DeterministicVerdict.model_validate(seed2), seed0["verdict_hash"])
    assert settled.status == "warn"
    assert settled.details["reproducing_selected_leaf_refs"] == seed0["verdict"]["selected_leaf_refs"]
    assert settled.details["order_dependent"] is True
