"""``ledger audit``: offline, findings exit 0, bad input exits 2 naming the problem and field path."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from tests.golden.regenerate import CORPUS_DIR, golden_path


def write(tmp_path: Path, content: str | bytes) -> str:
    target = tmp_path / "input.json"
    target.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return str(target)


def corpus(name: str) -> dict[str, Any]:
    return json.loads((CORPUS_DIR / f"{name}.json").read_text(encoding="utf-8"))


def test_json_output_holds_trace_verification_hashes_and_roots(
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    path = CORPUS_DIR / "02_two_sources_agree.json"
    assert main(["audit", str(path), "--format", "json"]) == 0
    output = capsysbinary.readouterr().out
    assert output == golden_path(path).read_bytes()
    report = json.loads(output)
    for key in ("trace", "verification", "step_hashes", "reasoning_root", "reasoning_leaf_count"):
        assert key in report
    for key in ("evidence_root", "evidence_leaf_count", "prompt_spec_hash", "evaluation_variables"):
        assert key in report
    assert len(report["step_hashes"]) == len(report["trace"]["steps"]) == report["reasoning_leaf_count"]


def test_findings_in_the_evidence_are_results_not_errors(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    assert main(["audit", str(CORPUS_DIR / "25_all_fetches_failed.json")]) == 0
    report = json.loads(capsysbinary.readouterr().out)
    assert report["verification"]["ok"] is False
    assert report["evaluation_variables"]["insufficient_evidence"] is True


def test_text_output_is_a_readable_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", str(CORPUS_DIR / "03_conflicting_sources.json"), "--format", "text"]) == 0
    text = capsys.readouterr().out
    for fragment in (
        "steps (7):",
        "extract_claims",
        "checks (",
        "[FAIL] error contradiction.numeric:price_usd",
    ):
        assert fragment in text
    for fragment in ("evaluation variables:", "conflict_detected: true", "reasoning_root", "(7 leaves)"):
        assert fragment in text


def test_standard_input(monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    raw = (CORPUS_DIR / "01_clean_threshold.json").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(raw)))
    assert main(["audit", "-"]) == 0
    assert capsysbinary.readouterr().out == golden_path(CORPUS_DIR / "01_clean_threshold.json").read_bytes()


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "invalid_json"),
        ('{"prompt_spec": {}, "prompt_spec": {}}', "duplicate_key"),
        ('{"prompt_spec": NaN}', "non_finite_number"),
        (b"\xff\xfe{}", "invalid_utf8"),
        ("[]", "not_an_object"),
        ("{}", "unknown_envelope_schema"),
        ('{"prompt_spec": 1' + "0" * 5000 + "}", "number_too_large"),  # the consumer's reason code
    ],
)
def test_invalid_input_exits_1_with_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes, fragment: str
) -> None:
    assert main(["audit", write(tmp_path, content)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert fragment in captured.err


def test_validation_errors_name_every_field_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = corpus("18_quorum_met")
    document["evidence_bundle"]["items"][2]["provenance"]["tier"] = 9
    document["evidence_bundle"]["items"][0]["surprise"] = True
    document["prompt_spec"]["market"]["resolution_window"]["start"] = "2026-01-31T23:00:00"
    document["extra_top_level"] = 1
    assert main(["audit", write(tmp_path, json.dumps(document))]) == 1
    err = capsys.readouterr().err
    assert "$.evidence_bundle.items[2].provenance.tier:" in err
    assert "$.evidence_bundle.items[0].surprise: Extra inputs are not permitted" in err
    assert "$.prompt_spec.market.resolution_window.start:" in err and "time zone" in err
    assert "$.extra_top_level: Extra inputs are not permitted" in err


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_lone_surrogates_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = corpus("01_clean_threshold")
    document["evidence_bundle"]["items"][0]["parsed_value"]["note"] = (
        "\ud800"  # the store cannot hold it: refused before validation, at its path
    )
    assert main(["audit", write(tmp_path, json.dumps(document))]) == 1
    assert "unstorable_text" in capsys.readouterr().err
    document = corpus("01_clean_threshold")
    document["evidence_bundle"]["bundle_id"] = "bundle_\ud800"  # a str field: validation refuses it
    assert main(["audit", write(tmp_path, json.dumps(document))]) == 1
    assert "evidence_bundle.bundle_id:" in capsys.readouterr().err
