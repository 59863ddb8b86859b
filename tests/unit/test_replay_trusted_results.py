"""The pipeline's and the judge's unvalidated constructions equal the validated ones, and fall back.

``engine.pipeline._result`` and ``engine.judge.agent._verdict`` / ``_verification`` store the
engine's own values without re-validation when every value visibly satisfies its field; anything
else goes through the validating constructor. Replay's step check compares stored step texts with
the engine's canonical step bytes (the preimages of the step hashes) instead of hashing them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from engine.envelope import ENVELOPE_SCHEMA_ID, ENVELOPE_SCHEMA_VERSION, decode_envelope
from engine.judge.agent import _verdict, _verification
from engine.pipeline import PipelineResult, _result, run_pipeline
from engine.schemas import ChallengeRef, CheckResult, DeterministicVerdict, VerificationResult
from ledger.replay.identical import steps_identical

CORPUS = Path(__file__).resolve().parents[2] / "samples" / "corpus"


def _results() -> list[PipelineResult]:
    results = []
    for path in sorted(CORPUS.glob("*.json"))[:12]:
        document = json.loads(path.read_text())
        header = {"schema_id": ENVELOPE_SCHEMA_ID, "schema_version": ENVELOPE_SCHEMA_VERSION}
        body = {"prompt_spec": document["prompt_spec"], "evidence_bundle": document["evidence_bundle"]}
        try:
            decoded = decode_envelope(json.dumps({**header, **body}).encode())
        except ValueError:
            continue
        inputs = decoded.envelope
        results.append(run_pipeline(inputs.prompt_spec, inputs.evidence_bundle))
    return results


RESULTS = _results()


def _same(built: Any, reference: Any) -> None:
    assert built == reference
    assert list(built.__dict__) == list(reference.__dict__)
    assert built.model_fields_set == reference.model_fields_set
    assert built.model_dump() == reference.model_dump()


def _fields(result: PipelineResult) -> dict[str, Any]:
    return {name: getattr(result, name) for name in PipelineResult.model_fields}


@pytest.mark.parametrize("index", range(len(RESULTS)))
def test_the_pipeline_result_equals_the_validated_one(index: int) -> None:
    result = RESULTS[index]
    reference = PipelineResult(**_fields(result))
    reference._step_canonical = result.step_canonical
    reference._prompt_spec_canonical = result.prompt_spec_canonical
    reference._verdict_canonical = result.verdict_canonical
    _same(result, reference)
    assert result.step_canonical and result.prompt_spec_canonical and result.verdict_canonical
    assert result.canonical_json() == reference.canonical_json()


def test_a_pipeline_result_of_other_types_is_validated() -> None:
    fields = _fields(RESULTS[0])
    private = {"_step_canonical": (b"x",), "_prompt_spec_canonical": b"y"}
    tupled = _result({**fields, "step_hashes": tuple(fields["step_hashes"])}, private)
    assert tupled.step_hashes == list(fields["step_hashes"]) and tupled.step_canonical == (b"x",)
    with pytest.raises(ValidationError):
        _result({**fields, "step_hashes": [1]}, private)
    with pytest.raises(ValidationError):
        _result({**fields, "roots": {"por_root": "nope"}}, private)
    with pytest.raises(ValidationError):
        _result({**fields, "evaluation_variables": {1: "a"}}, private)


@pytest.mark.parametrize("index", range(len(RESULTS)))
def test_the_judges_models_equal_the_validated_ones(index: int) -> None:
    result = RESULTS[index]
    verdict = result.verdict
    values = {name: getattr(verdict, name) for name in verdict.model_fields_set}
    _same(verdict, DeterministicVerdict(**values))
    judged = result.judge_verification
    _same(judged, VerificationResult(ok=judged.ok, checks=judged.checks, challenge=judged.challenge))


def _verdict_values(**changes: Any) -> dict[str, Any]:
    verdict = RESULTS[0].verdict
    values = {name: getattr(verdict, name) for name in verdict.model_fields_set}
    values["metadata"], values["selected_leaf_refs"] = (
        dict(values["metadata"]),
        list(values["selected_leaf_refs"]),
    )
    return {**values, **changes}


@settings(max_examples=200, deadline=None)
@given(
    confidence=st.one_of(st.floats(allow_nan=True), st.integers(-2, 2), st.booleans()),
    market_id=st.one_of(st.text(max_size=3), st.integers()),
    rule_id=st.sampled_from(["R_X", "", "  ", 3]),
    refs=st.one_of(
        st.lists(st.text(max_size=2), max_size=2), st.lists(st.integers(), min_size=1, max_size=2)
    ),
    key=st.one_of(st.text(max_size=2), st.integers()),
)
def test_a_verdict_is_what_validation_makes_of_the_same_values(
    confidence: Any, market_id: Any, rule_id: Any, refs: Any, key: Any
) -> None:
    values = _verdict_values(
        confidence=confidence,
        market_id=market_id,
        resolution_rule_id=rule_id,
        selected_leaf_refs=refs,
        metadata={key: 1},
    )
    try:
        reference = DeterministicVerdict(**{**values, "metadata": dict(values["metadata"])})
    except ValidationError:
        with pytest.raises(ValidationError):
            _verdict(values)
        return
    _same(_verdict(values), reference)


def test_judge_verification_of_other_values_is_validated() -> None:
    check = CheckResult.passed("a", "b")
    challenge = ChallengeRef(kind="por_bundle", reason="r")
    _same(
        _verification(True, [check], challenge),
        VerificationResult(ok=True, checks=[check], challenge=challenge),
    )
    with pytest.raises(ValidationError):
        _verification(True, [{"check_id": ""}], None)  # type: ignore[list-item]
    coerced = _verification(True, [check.model_dump()], None)  # type: ignore[list-item]
    assert coerced.checks == [check]


@pytest.mark.parametrize("index", range(len(RESULTS)))
def test_stored_steps_are_proved_by_the_engines_preimages_or_by_hashing(index: int) -> None:
    result = RESULTS[index]
    texts = tuple(data.decode("utf-8") for data in result.step_canonical)
    hashes = tuple(result.step_hashes)
    bare = PipelineResult(**_fields(result))  # no preimages: each text is hashed
    for replayed in (result, bare):
        assert steps_identical(hashes, texts, replayed)
        for position in range(len(texts)):
            tampered = list(texts)
            tampered[position] = tampered[position].replace('"', "'", 1)
            assert not steps_identical(hashes, tampered, replayed)
        assert not steps_identical(hashes[:-1], texts[:-1], replayed)
        assert not steps_identical(hashes, texts[:-1], replayed)
