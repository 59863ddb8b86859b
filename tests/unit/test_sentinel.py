"""Module 08 (Sentinel): verify-only mode, pinpoint challenges with Merkle proofs, replay comparison."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from engine.canonical import dumps_canonical, to_hex
from engine.commitments import compute_roots, evidence_leaf_hashes, step_hash
from engine.judge import JudgeAgent
from engine.pipeline import PipelineResult, run_pipeline
from engine.schemas import (
    EvidenceBundle,
    PoRRoots,
    PromptSpec,
    ReasoningTrace,
    VerificationResult,
)
from engine.sentinel import (
    Challenge,
    MerkleProofPacket,
    ReplaySnapshot,
    SentinelAgent,
    SentinelReport,
    VerificationPackage,
    challenge_id,
    replay_compare,
    verify_package,
)
from engine.version import ENGINE_VERSION

SPEC: dict[str, Any] = {
    "market": {
        "market_id": "mk_sentinel",
        "question": "Will X trade above 100?",
        "event_definition": "X price is above 100 at 2026-02-01T00:00:00Z",
        "resolution_deadline": "2026-02-02T00:00:00Z",
        "resolution_window": {"start": "2026-01-31T00:00:00Z", "end": "2026-02-01T00:00:00Z"},
        "resolution_rules": {"rules": [{"rule_id": "R_BINARY_DECISION", "description": "d"}]},
        "dispute_policy": {"dispute_window_seconds": 3600},
    },
    "prediction_semantics": {"target_entity": "X", "predicate": "price above", "threshold": "100"},
    "extra": {"strict_mode": True},
}
EVIDENCE_IDS = ("ev_a", "ev_b", "ev_c")


class StubAuditor:
    """A fixed five-step trace citing every evidence item, so the tests do not depend on the Auditor."""

    def audit(
        self, prompt_spec: PromptSpec, evidence: EvidenceBundle
    ) -> tuple[ReasoningTrace, VerificationResult]:
        ids = [item.evidence_id for item in evidence.items]
        steps: list[dict[str, Any]] = [
            {
                "step_id": f"step_{n + 1:04d}",
                "type": "extract",
                "action": f"extract {eid}",
                "evidence_ids": [eid],
            }
            for n, eid in enumerate(ids)
        ]
        steps.append(
            {"step_id": "step_0004", "type": "aggregate", "action": "aggregate", "evidence_ids": ids}
        )
        variables = {
            "event_observed": True,
            "source_summary": ids,
            "conflict_detected": False,
            "insufficient_evidence": False,
        }
        steps.append(
            {
                "step_id": "step_0005",
                "type": "map",
                "action": "map",
                "output": {"evaluation_variables": variables},
            }
        )
        trace = ReasoningTrace.model_validate(
            {"trace_id": "trace_sentinel", "steps": steps, "evidence_refs": ids}
        )
        return trace, VerificationResult(ok=True)


def inputs() -> tuple[PromptSpec, EvidenceBundle]:
    items = [
        {
            "evidence_id": eid,
            "requirement_id": "req_1",
            "provenance": {"source_id": f"src_{n}", "source_uri": f"https://example.test/{n}", "tier": 3},
            "extracted_fields": {"price_usd": 100.0 + n},
        }
        for n, eid in enumerate(EVIDENCE_IDS)
    ]
    bundle = {"bundle_id": "b_s", "market_id": "mk_sentinel", "plan_id": "p", "items": items}
    return PromptSpec.model_validate(SPEC), EvidenceBundle.model_validate(bundle)


def produce() -> PipelineResult:
    spec, evidence = inputs()
    return run_pipeline(spec, evidence, auditor=StubAuditor())


def package(**changes: Any) -> VerificationPackage:
    spec, evidence = inputs()
    result = produce()
    fields: dict[str, Any] = {
        "prompt_spec": spec,
        "evidence": evidence,
        "trace": result.trace,
        "verdict": result.verdict,
        "roots": result.roots,
        "stored_step_hashes": result.step_hashes,
        "stored_evidence_leaf_hashes": [to_hex(leaf) for leaf in evidence_leaf_hashes(evidence)],
    }
    fields.update(changes)
    return VerificationPackage(**fields)


def only_challenge(report: SentinelReport) -> Challenge:
    assert not report.ok
    assert len(report.challenges) == 1, [c.kind for c in report.challenges]
    return report.challenges[0]


def failed_checks(report: SentinelReport) -> list[str]:
    return [check.check_id for check in report.checks if not check.ok]


def assert_proof_verifies_against(challenge: Challenge, root: str, leaf_count: int) -> MerkleProofPacket:
    proof = challenge.merkle_proof
    assert proof is not None
    assert proof.verify(root=root, leaf_count=leaf_count)
    assert all(s.startswith("0x") and len(s) == 66 for s in [proof.leaf, proof.root, *proof.siblings])
    return proof


def tampered_step(trace: ReasoningTrace, index: int) -> ReasoningTrace:
    steps = list(trace.steps)
    steps[index] = steps[index].model_copy(update={"action": steps[index].action + " (edited)"})
    return trace.model_copy(update={"steps": steps})


# -- verify-only ---------------------------------------------------------------------------------


def test_valid_package_passes_with_no_challenges() -> None:
    report = verify_package(package())
    assert report.ok and report.challenges == [] and failed_checks(report) == []
    assert report.recomputed_roots == package().roots
    assert report.verification_result().ok and report.verification_result().challenge is None


def test_tampered_evidence_root_claim_is_an_evidence_leaf_challenge() -> None:
    good = package()
    roots = good.roots.model_copy(update={"evidence_root": "0x" + "ab" * 32})
    report = verify_package(package(roots=roots))
    challenge = only_challenge(report)
    assert (challenge.kind, challenge.leaf_index, challenge.leaf_hash) == ("evidence_leaf", None, None)
    assert challenge.component_root == good.roots.evidence_root
    proof = assert_proof_verifies_against(challenge, good.roots.por_root, 4)
    assert (proof.tree, proof.index, proof.leaf) == ("por", 1, good.roots.evidence_root)
    assert "commitment.evidence_root" in failed_checks(report)
    assert "commitment.por_root" not in failed_checks(report)  # the anchored por_root itself is right


@pytest.mark.parametrize("index", [0, 1, 2])
def test_tampered_evidence_item_is_pinpointed_to_its_leaf(index: int) -> None:
    good = package()
    items = list(good.evidence.items)
    items[index] = items[index].model_copy(update={"extracted_fields": {"price_usd": 1.0}})
    evidence = good.evidence.model_copy(update={"items": items})
    report = verify_package(package(evidence=evidence))
    challenge = only_challenge(report)
    recomputed = [to_hex(leaf) for leaf in evidence_leaf_hashes(evidence)]
    assert (challenge.kind, challenge.leaf_index) == ("evidence_leaf", index)
    assert challenge.leaf_hash == recomputed[index]
    assert challenge.details["evidence_id"] == EVIDENCE_IDS[index]
    assert challenge.details["stored_leaf_hash"] == good.stored_evidence_leaf_hashes[index]  # type: ignore[index]
    assert challenge.details["differing_indexes"] == [index]
    proof = assert_proof_verifies_against(challenge, challenge.details["recomputed_root"], 3)
    assert proof.tree == "evidence" and proof.leaf == challenge.leaf_hash
    assert not proof.verify(root=good.roots.evidence_root, leaf_count=3)  # not the committed tree


@pytest.mark.parametrize("index", [0, 2, 4])
def test_tampered_trace_step_is_pinpointed_to_its_reasoning_leaf(index: int) -> None:
    good = package()
    trace = tampered_step(good.trace, index)
    report = verify_package(package(trace=trace))
    challenge = only_challenge(report)
    assert (challenge.kind, challenge.leaf_index) == ("reasoning_leaf", index)
    assert challenge.leaf_hash == step_hash(trace.steps[index])
    assert challenge.details["step_id"] == f"step_{index + 1:04d}"
    assert challenge.details["stored_leaf_hash"] == good.stored_step_hashes[index]  # type: ignore[index]
    proof = assert_proof_verifies_against(challenge, challenge.details["recomputed_root"], 5)
    assert proof.tree == "reasoning" and challenge.component_root == challenge.details["recomputed_root"]
    assert report.verification_result().challenge is not None
    assert report.verification_result().challenge.step_id == f"step_{index + 1:04d}"  # type: ignore[union-attr]


def test_tampered_trace_step_without_stored_hashes_is_a_root_level_challenge() -> None:
    good = package()
    report = verify_package(package(trace=tampered_step(good.trace, 1), stored_step_hashes=None))
    challenge = only_challenge(report)
    assert (challenge.kind, challenge.leaf_index) == ("reasoning_leaf", None)
    proof = assert_proof_verifies_against(challenge, report.recomputed_roots.por_root, 4)  # type: ignore[union-attr]
    assert (proof.tree, proof.index) == ("por", 2)


def test_step_hash_commitments_serve_as_stored_hashes() -> None:
    good = package()
    steps = [
        s.model_copy(update={"hash_commitment": h})
        for s, h in zip(good.trace.steps, good.stored_step_hashes or [], strict=True)
    ]
    trace = tampered_step(good.trace.model_copy(update={"steps": steps}), 3)
    report = verify_package(package(trace=trace, stored_step_hashes=None))
    assert only_challenge(report).leaf_index == 3


def test_extra_stored_leaf_past_the_recomputed_tree_is_reported_at_root_level() -> None:
    good = package()
    stored = [*(good.stored_step_hashes or []), "0x" + "11" * 32]
    report = verify_package(package(stored_step_hashes=stored))
    challenge = only_challenge(report)
    assert (challenge.kind, challenge.leaf_index, challenge.details["first_differing_index"]) == (
        "reasoning_leaf",
        None,
        5,
    )
    assert {"commitment.reasoning_leaves", "commitment.stored_reasoning_leaves_root"} <= set(
        failed_checks(report)
    )


def test_tampered_verdict_outcome_is_a_verdict_hash_challenge() -> None:
    good = package()
    report = verify_package(package(verdict=good.verdict.model_copy(update={"outcome": "NO"})))
    challenge = only_challenge(report)
    assert (challenge.kind, challenge.leaf_index) == ("verdict_hash", None)
    assert challenge.details["claimed"] == good.roots.verdict_hash
    proof = assert_proof_verifies_against(challenge, report.recomputed_roots.por_root, 4)  # type: ignore[union-attr]
    assert (proof.tree, proof.index, proof.leaf) == ("por", 3, challenge.details["recomputed"])
    assert report.verification_result().challenge.kind == "verdict_hash"  # type: ignore[union-attr]


def test_verdict_with_a_wrong_reference_is_challenged_even_when_its_hash_matches() -> None:
    good = package()
    verdict = good.verdict.model_copy(update={"evidence_root": "0x" + "cd" * 32})
    spec, evidence = inputs()
    roots = compute_roots(spec, evidence, good.trace, verdict)
    report = verify_package(package(verdict=verdict, roots=roots))
    challenge = only_challenge(report)
    assert challenge.kind == "verdict_hash" and challenge.details["inconsistent_refs"] == ["evidence_root"]


def test_tampered_prompt_spec_is_a_prompt_hash_challenge() -> None:
    good = package()
    spec = good.prompt_spec.model_copy(update={"forbidden_behaviors": ["guessing"]})
    report = verify_package(package(prompt_spec=spec))
    challenge = only_challenge(report)
    assert (challenge.kind, challenge.leaf_index) == ("prompt_hash", None)
    proof = assert_proof_verifies_against(challenge, report.recomputed_roots.por_root, 4)  # type: ignore[union-attr]
    assert (proof.tree, proof.index, proof.leaf) == ("por", 0, challenge.details["recomputed"])
    assert report.verification_result().challenge.kind == "por_bundle"  # type: ignore[union-attr]


def test_tampered_por_root_is_a_por_root_challenge() -> None:
    good = package()
    report = verify_package(package(roots=good.roots.model_copy(update={"por_root": "0x" + "ee" * 32})))
    challenge = only_challenge(report)
    assert challenge.kind == "por_root" and challenge.bundle_root == "0x" + "ee" * 32
    assert challenge.details["recomputed_por_root"] == good.roots.por_root
    proof = assert_proof_verifies_against(challenge, good.roots.por_root, 4)
    assert proof.index == 0 and challenge.details["components"][0] == proof.leaf
    assert set(failed_checks(report)) == {"commitment.por_root", "commitment.por_root_internal"}


def test_every_challenge_id_matches_the_documented_formula_computed_independently() -> None:
    good = package()
    cases = [
        package(roots=good.roots.model_copy(update={"por_root": "0x" + "EE" * 32})),
        package(trace=tampered_step(good.trace, 2)),
        package(verdict=good.verdict.model_copy(update={"confidence": 0.1})),
    ]
    for case in cases:
        for challenge in verify_package(case).challenges:
            preimage = {
                "kind": challenge.kind,
                "market_id": "mk_sentinel",
                "bundle_root": case.roots.por_root.lower(),
                "leaf_index": challenge.leaf_index,
                "leaf_hash": challenge.leaf_hash,
            }
            text = json.dumps(
                {k: v for k, v in preimage.items() if v is not None}, sort_keys=True, separators=(",", ":")
            )
            expected = "ch_" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
            assert challenge.challenge_id == expected and challenge.id_is_valid()
            assert len(challenge.challenge_id) == 27


def test_challenge_id_rules_for_none_case_and_types() -> None:
    root, leaf = "0x" + "Ab" * 32, "0x" + "0F" * 32
    assert challenge_id("por_root", "m", root) == challenge_id("por_root", "m", root.lower(), None, None)
    assert challenge_id("evidence_leaf", "m", root, 0, leaf) == challenge_id(
        "evidence_leaf", "m", root, 0, leaf.lower()
    )
    assert challenge_id("evidence_leaf", "m", root, 0, leaf) != challenge_id(
        "evidence_leaf", "m", root, 1, leaf
    )
    bad_fields: list[dict[str, Any]] = [
        {"bundle_root": "ab" * 32},
        {"leaf_hash": "0x12"},
        {"leaf_index": True},
    ]
    for bad in bad_fields:
        args: dict[str, Any] = {"kind": "evidence_leaf", "market_id": "m", "bundle_root": root, **bad}
        with pytest.raises(ValueError):
            challenge_id(**args)


def test_challenge_ids_are_stable_across_runs_and_the_report_is_deterministic() -> None:
    first = verify_package(package(trace=tampered_step(package().trace, 1)))
    second = SentinelAgent().verify(package(trace=tampered_step(package().trace, 1)))
    assert dumps_canonical(first) == dumps_canonical(second)
    assert "time" not in dumps_canonical(first).lower().replace("resolution_time", "")


def test_mutated_proofs_do_not_verify() -> None:
    challenge = only_challenge(verify_package(package(trace=tampered_step(package().trace, 2))))
    proof = challenge.merkle_proof
    assert proof is not None and proof.verify()
    assert not proof.model_copy(update={"index": 3}).verify()
    assert not proof.model_copy(update={"siblings": list(reversed(proof.siblings))}).verify()
    assert not proof.model_copy(update={"leaf_count": 4}).verify()  # wrong depth for the claimed count
    assert not proof.verify(root="0x" + "00" * 32)


def test_foreign_market_and_ungrounded_refs_fail_consistency() -> None:
    good = package()
    verdict = good.verdict.model_copy(update={"selected_leaf_refs": ["ev_zzz"]})
    report = verify_package(package(verdict=verdict))
    assert "consistency.selected_leaf_refs" in failed_checks(report)


def test_non_strict_prompt_is_a_warning_not_a_commitment_failure() -> None:
    spec = PromptSpec.model_validate({**SPEC, "extra": {}})
    result = run_pipeline(spec, inputs()[1], auditor=StubAuditor())
    pkg = VerificationPackage(
        prompt_spec=spec, evidence=inputs()[1], trace=result.trace, verdict=result.verdict, roots=result.roots
    )
    report = verify_package(pkg)
    assert report.ok and result.verdict.outcome == "INVALID"
    assert [c.severity for c in report.checks if c.check_id == "schema_lock.strict_mode"] == ["warn"]


# -- replay comparison -----------------------------------------------------------------------------


def snapshot(result: PipelineResult, **changes: Any) -> ReplaySnapshot:
    return ReplaySnapshot.of(result).model_copy(update=changes)


def test_replay_compare_identical() -> None:
    comparison = replay_compare(produce(), produce())
    assert comparison.status == "identical" and comparison.differing == []
    assert comparison.first_divergent_step_index is None


def test_replay_compare_reports_first_divergent_step_with_both_canonical_jsons() -> None:
    stored = produce()
    edited = tampered_step(stored.trace, 3)
    stored_snapshot = ReplaySnapshot.from_artifacts(
        engine_version=ENGINE_VERSION, steps=edited.steps, verdict=stored.verdict, roots=stored.roots
    )
    comparison = replay_compare(stored_snapshot, produce())
    assert (comparison.status, comparison.component, comparison.first_divergent_step_index) == (
        "diverged",
        "step",
        3,
    )
    assert comparison.stored_canonical == dumps_canonical(edited.steps[3])
    assert comparison.recomputed_canonical == dumps_canonical(stored.trace.steps[3])
    assert comparison.differing == ["steps", "step_hashes"]


def test_replay_compare_reports_missing_steps_and_verdict_and_root_differences() -> None:
    result = produce()
    shorter = snapshot(result, steps=ReplaySnapshot.of(result).steps[:4])
    comparison = replay_compare(shorter, result)
    assert (comparison.first_divergent_step_index, comparison.stored_canonical) == (4, None)
    other_verdict = dumps_canonical(result.verdict.model_copy(update={"confidence": 0.5}))
    comparison = replay_compare(snapshot(result, verdict=other_verdict), result)
    assert (comparison.status, comparison.component, comparison.differing) == (
        "diverged",
        "verdict",
        ["verdict"],
    )
    roots = PoRRoots.model_validate({**result.roots.model_dump(), "por_root": "0x" + "00" * 32})
    comparison = replay_compare(snapshot(result, roots=roots), result)
    assert (comparison.component, comparison.root_field, comparison.differing) == (
        "roots",
        "por_root",
        ["por_root"],
    )


def test_replay_compare_reports_version_drift_not_nondeterminism() -> None:
    result = produce()
    comparison = replay_compare(snapshot(result, engine_version="0.9.0"), result)
    assert comparison.status == "version_drift" and comparison.differing == []
    assert (comparison.stored_engine_version, comparison.recomputed_engine_version) == (
        "0.9.0",
        ENGINE_VERSION,
    )


def test_package_engine_version_defaults_to_the_verdict_metadata() -> None:
    assert package().effective_engine_version() == ENGINE_VERSION
    assert package(engine_version="0.1").effective_engine_version() == "0.1"


def test_judge_agent_output_round_trips_through_the_package_model() -> None:
    pkg = package()
    again = VerificationPackage.model_validate_json(pkg.model_dump_json())
    assert (
        verify_package(again).ok
        and JudgeAgent().judge(pkg.prompt_spec, pkg.evidence, pkg.trace)[0] == pkg.verdict
    )


# -- replay mode ------------------------------------------------------------------------------------


def test_replay_mode_divergence_is_a_replay_divergence_challenge_pinpointing_the_step() -> None:
    good = package()  # produced by StubAuditor, so the real pipeline's replay differs
    report = verify_package(good, mode="replay")
    challenge = only_challenge(report)
    assert report.replay is not None and (report.replay.status, report.replay.component) == (
        "diverged",
        "step",
    )
    assert (challenge.kind, challenge.leaf_index, challenge.details["step_id"]) == (
        "replay_divergence",
        0,
        "step_0001",
    )
    assert challenge.leaf_hash == good.stored_step_hashes[0]  # type: ignore[index]
    assert challenge.details["stored_canonical"] == dumps_canonical(good.trace.steps[0])
    assert challenge.details["recomputed_canonical"] != challenge.details["stored_canonical"]
    proof = assert_proof_verifies_against(
        challenge, good.roots.reasoning_root, good.roots.reasoning_leaf_count
    )
    assert proof.tree == "reasoning"
    assert [c.check_id for c in report.checks if not c.ok] == ["replay"]


def test_replay_mode_under_another_engine_version_is_version_drift_not_a_challenge() -> None:
    report = verify_package(package(engine_version="0.0.1"), mode="replay")
    assert report.ok and report.challenges == []
    assert report.replay is not None and report.replay.status == "version_drift"
    assert [c.severity for c in report.checks if c.check_id == "replay"] == ["warn"]
