"""run_pipeline is pure: byte-identical output in every process (the Cournot set-order bug, fixed)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.commitments import compute_roots, step_hash
from engine.judge import JudgeAgent
from engine.pipeline import PipelineResult, run_pipeline
from engine.schemas import EvidenceBundle, PromptSpec, ReasoningTrace, VerificationResult
from engine.sentinel import VerificationPackage, replay_compare, verify_package
from engine.version import ENGINE_VERSION

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = json.loads((ROOT / "tests" / "data" / "cournot_minimal.json").read_text(encoding="utf-8"))
CORPUS = ROOT / "samples" / "corpus"

ENVIRONMENTS = [
    {"PYTHONHASHSEED": "0", "TZ": "UTC", "LANG": "C"},
    {"PYTHONHASHSEED": "1", "TZ": "Pacific/Kiritimati", "LANG": "de_DE.UTF-8"},
    {"PYTHONHASHSEED": "4242", "TZ": "America/St_Johns", "LANG": "tr_TR.UTF-8"},
    {"PYTHONHASHSEED": "random", "TZ": "Asia/Kathmandu", "LANG": "ja_JP.UTF-8"},
]


def multi_source_inputs() -> dict[str, Any]:
    """The Cournot sample with three agreeing sources, so the trace cites ≥ 2 evidence ids."""
    doc = copy.deepcopy(SAMPLE)
    first = doc["evidence_bundle"]["items"][0]
    for n, (source, price) in enumerate([("coinbase", 101240.0), ("kraken", 101236.25)], start=1):
        item = copy.deepcopy(first)
        item["evidence_id"] = f"ev_{source}_{n:02d}"
        item["provenance"]["source_id"] = source
        item["provenance"]["source_uri"] = f"https://{source}.example/btc"
        item["parsed_value"] = {"bitcoin": {"usd": price}}
        item["extracted_fields"] = {"price_usd": price}
        doc["evidence_bundle"]["items"].append(item)
    return {"prompt_spec": doc["prompt_spec"], "evidence_bundle": doc["evidence_bundle"]}


def parse(doc: dict[str, Any]) -> tuple[PromptSpec, EvidenceBundle]:
    evidence = doc.get("evidence_bundle", doc.get("evidence"))
    return PromptSpec.model_validate(doc["prompt_spec"]), EvidenceBundle.model_validate(evidence)


class StubAuditor:
    """Cites every evidence item in the map step: exercises the Judge without the real Auditor."""

    def audit(
        self, prompt_spec: PromptSpec, evidence: EvidenceBundle
    ) -> tuple[ReasoningTrace, VerificationResult]:
        ids = [item.evidence_id for item in evidence.items]
        variables = {"event_observed": True, "source_summary": ids, "conflict_detected": False,
                     "insufficient_evidence": False}  # fmt: skip
        steps = [
            {"step_id": "step_0001", "type": "aggregate", "action": "aggregate", "evidence_ids": ids},
            {"step_id": "step_0002", "type": "map", "action": "map", "output": {"evaluation_variables": variables},
             "prior_step_ids": ["step_0001"]},
        ]  # fmt: skip
        return ReasoningTrace.model_validate({"trace_id": "trace_stub", "steps": steps}), VerificationResult(
            ok=True
        )


SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tests.unit.test_pipeline import StubAuditor, parse
from engine.pipeline import run_pipeline
docs = json.load(open(sys.argv[2], encoding="utf-8"))
stub = sys.argv[3] == "stub"
out = []
for doc in docs:
    spec, evidence = parse(doc)
    result = run_pipeline(spec, evidence, auditor=StubAuditor() if stub else None)
    out.append({"canonical": result.canonical_json(), "verdict_hash": result.roots.verdict_hash,
                "por_root": result.roots.por_root, "refs": result.verdict.selected_leaf_refs,
                "set_order": list({f"ev_{n}" for n in range(12)})})
print(json.dumps(out, sort_keys=True))
"""


def run_everywhere(docs: list[dict[str, Any]], tmp_path: Path, auditor: str) -> list[list[dict[str, Any]]]:
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps(docs), encoding="utf-8")
    runs = []
    for overrides in ENVIRONMENTS:
        env = {**os.environ, **overrides, "LC_ALL": overrides["LANG"]}
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(ROOT), str(path), auditor],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(done.stdout))
    return runs


def assert_identical_everywhere(runs: list[list[dict[str, Any]]]) -> None:
    # The probe shows the environments really do reorder sets, so a set-ordered field would differ.
    assert len({json.dumps([r["set_order"] for r in run]) for run in runs}) > 1
    strip = [[{k: v for k, v in r.items() if k != "set_order"} for r in run] for run in runs]
    assert all(run == strip[0] for run in strip[1:])


# -- purity and shape -----------------------------------------------------------------------------


def test_pipeline_result_holds_every_commitment() -> None:
    spec, evidence = parse(multi_source_inputs())
    result = run_pipeline(spec, evidence, auditor=StubAuditor(), judge=JudgeAgent())
    assert result.step_hashes == [step_hash(step) for step in result.trace.steps]
    assert result.roots == compute_roots(spec, evidence, result.trace, result.verdict)
    assert result.roots.evidence_leaf_count == 3 and result.roots.reasoning_leaf_count == 2
    assert result.evaluation_variables is not None and result.evaluation_variables["event_observed"] is True
    assert result.engine_version == ENGINE_VERSION and result.verdict.outcome == "YES"
    with pytest.raises(Exception, match="frozen"):
        result.engine_version = "x"  # type: ignore[misc]


def test_pipeline_is_pure_within_a_process() -> None:
    spec, evidence = parse(multi_source_inputs())
    first = run_pipeline(spec, evidence, auditor=StubAuditor())
    second = run_pipeline(spec, evidence, auditor=StubAuditor())
    assert first.canonical_json() == second.canonical_json()
    assert replay_compare(first, second).status == "identical"


def test_stub_pipeline_is_byte_identical_across_seeds_time_zones_and_locales(tmp_path: Path) -> None:
    runs = run_everywhere([multi_source_inputs()], tmp_path, "stub")
    assert_identical_everywhere(runs)
    assert len(runs[0][0]["refs"]) == 3  # Cournot put these through set(): order changed per process


# -- the real Auditor ------------------------------------------------------------------------------


def test_real_pipeline_trace_cites_several_evidence_ids_and_verifies() -> None:
    spec, evidence = parse(multi_source_inputs())
    result = run_pipeline(spec, evidence)
    cited = {eid for step in result.trace.steps for eid in step.evidence_ids}
    assert len(cited) >= 2
    assert result.evaluation_variables is not None
    package = VerificationPackage(
        prompt_spec=spec,
        evidence=evidence,
        trace=result.trace,
        verdict=result.verdict,
        roots=result.roots,
        stored_step_hashes=result.step_hashes,
    )
    report = verify_package(package, mode="replay")
    assert report.ok, [c for c in report.checks if not c.ok]
    assert report.replay is not None and report.replay.status == "identical"


def test_real_pipeline_is_byte_identical_across_seeds_time_zones_and_locales(tmp_path: Path) -> None:
    runs = run_everywhere([multi_source_inputs()], tmp_path, "real")
    assert_identical_everywhere(runs)
    canonical = json.loads(runs[0][0]["canonical"])
    cited = {eid for step in canonical["trace"]["steps"] for eid in step.get("evidence_ids", [])}
    assert len(cited) >= 2


def corpus_documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(CORPUS.rglob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and "prompt_spec" in doc and ("evidence_bundle" in doc or "evidence" in doc):
            docs.append(doc)
    return docs


@pytest.mark.skipif(not CORPUS.is_dir(), reason="samples/corpus/ is not there yet")
def test_whole_corpus_is_byte_identical_across_processes(tmp_path: Path) -> None:
    docs = corpus_documents()
    assert docs, "samples/corpus/ holds no prompt_spec + evidence documents"
    runs = run_everywhere(docs, tmp_path, "real")
    assert_identical_everywhere(runs)
    for doc, produced in zip(docs, runs[0], strict=True):
        spec, evidence = parse(doc)
        assert run_pipeline(spec, evidence).canonical_json() == produced["canonical"]


def test_pipeline_result_canonical_json_is_what_replay_compares() -> None:
    spec, evidence = parse(multi_source_inputs())
    result: PipelineResult = run_pipeline(spec, evidence, auditor=StubAuditor())
    again = PipelineResult.model_validate_json(result.model_dump_json())
    assert again.canonical_json() == result.canonical_json()
