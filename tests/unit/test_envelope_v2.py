"""Envelope version 2: the reasoning options, their bounds, and version 1 left exactly as it was."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from consumers.publisher import CONTENT_TYPE_HEADER, prepare_document
from engine.envelope import (
    MAX_REASONING_EXPRESSION_LENGTH,
    MAX_REASONING_QUERY_LENGTH,
    SUPPORTED_VERSIONS,
    EnvelopeError,
    EnvelopeV1,
    EnvelopeV2,
    Reason,
    decode_envelope,
    render_json_schema,
    wrap_inputs,
)
from ledger.store.drafts import audit_envelope

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = json.loads((ROOT / "tests" / "data" / "cournot_minimal.json").read_text())
QUERY = "What is the BTC close minus the 100,000 USD threshold?"
EXPRESSION = "104250.12 - 100000"


def inputs() -> tuple[Any, Any]:
    sample = copy.deepcopy(SAMPLE)
    return sample["prompt_spec"], sample["evidence_bundle"]


def v2(**options: Any) -> dict[str, Any]:
    document = wrap_inputs(*inputs(), reasoning_query=QUERY, reasoning_expression=EXPRESSION)
    document["options"].update(options)
    return document


def encode(document: Any) -> bytes:
    return json.dumps(document).encode()


def refusal(document: Any) -> EnvelopeError:
    with pytest.raises(EnvelopeError) as info:
        decode_envelope(encode(document))
    return info.value


@pytest.mark.parametrize("version", [1, 2])
def test_checked_in_schemas_equal_the_generated_ones(version: int) -> None:
    published = (ROOT / "schemas" / f"envelope-v{version}.schema.json").read_text(encoding="utf-8")
    assert published == render_json_schema(version), (
        f"run: python -m engine.envelope {version} > schemas/envelope-v{version}.schema.json"
    )


def test_v2_schema_publishes_the_bounded_reasoning_options() -> None:
    schema = json.loads(render_json_schema(2))
    assert {1, 2} == SUPPORTED_VERSIONS
    assert schema["properties"]["schema_version"]["const"] == 2
    assert schema["$id"].endswith("envelope-v2.schema.json")
    options = schema["$defs"]["EnvelopeOptionsV2"]
    assert options["additionalProperties"] is False
    query = options["properties"]["reasoning_query"]["anyOf"][0]
    expression = options["properties"]["reasoning_expression"]["anyOf"][0]
    assert (query["minLength"], query["maxLength"]) == (1, MAX_REASONING_QUERY_LENGTH)
    assert (expression["minLength"], expression["maxLength"]) == (1, MAX_REASONING_EXPRESSION_LENGTH)
    v1_options = json.loads(render_json_schema(1))["$defs"]["EnvelopeOptions"]["properties"]
    assert set(v1_options) == {"verify_reasoning"}


def test_v2_carries_the_reasoning_options() -> None:
    decoded = decode_envelope(encode(v2(verify_reasoning=True)))
    assert isinstance(decoded.envelope, EnvelopeV2) and decoded.envelope.schema_version == 2
    assert decoded.envelope.options.verify_reasoning is True
    assert decoded.envelope.options.reasoning_query == QUERY
    assert decoded.envelope.options.reasoning_expression == EXPRESSION


def test_v2_options_are_each_optional() -> None:
    document = wrap_inputs(*inputs(), reasoning_query=QUERY)
    assert document["schema_version"] == 2
    decoded = decode_envelope(encode(document))
    assert isinstance(decoded.envelope, EnvelopeV2)
    assert decoded.envelope.options.reasoning_expression is None
    bare = wrap_inputs(*inputs())
    bare["schema_version"] = 2
    assert decode_envelope(encode(bare)).envelope.options.model_dump(exclude_none=True) == {
        "verify_reasoning": False
    }


@pytest.mark.parametrize("name", ["reasoning_query", "reasoning_expression"])
def test_v1_still_refuses_the_reasoning_options(name: str) -> None:
    document = wrap_inputs(*inputs())
    document["options"][name] = "10 + 5"
    error = refusal(document)
    assert (error.reason, error.path) == (Reason.SCHEMA_VIOLATION, f"$.options.{name}")


@pytest.mark.parametrize(
    ("options", "path"),
    [
        ({"reasoning_query": ""}, "$.options.reasoning_query"),
        ({"reasoning_query": "   \n"}, "$.options.reasoning_query"),
        ({"reasoning_query": "x" * (MAX_REASONING_QUERY_LENGTH + 1)}, "$.options.reasoning_query"),
        ({"reasoning_query": 15}, "$.options.reasoning_query"),
        ({"reasoning_expression": ""}, "$.options.reasoning_expression"),
        (
            {"reasoning_expression": "1" * (MAX_REASONING_EXPRESSION_LENGTH + 1)},
            "$.options.reasoning_expression",
        ),
        ({"reasoning_expression": ["10 + 5"]}, "$.options.reasoning_expression"),
        ({"reasoning_formula": "10 + 5"}, "$.options.reasoning_formula"),
    ],
)
def test_v2_refuses_unbounded_blank_mistyped_or_unknown_options(options: dict[str, Any], path: str) -> None:
    error = refusal(v2(**options))
    assert (error.reason, error.path) == (Reason.SCHEMA_VIOLATION, path)


def test_the_longest_allowed_options_are_accepted() -> None:
    document = v2(
        reasoning_query="q" * MAX_REASONING_QUERY_LENGTH,
        reasoning_expression="1" * MAX_REASONING_EXPRESSION_LENGTH,
    )
    assert decode_envelope(encode(document)).envelope.schema_version == 2


def test_version_3_is_refused() -> None:
    document = v2()
    document["schema_version"] = 3
    assert refusal(document).reason is Reason.UNKNOWN_VERSION


def test_v1_documents_are_unchanged_and_keep_their_idempotency_keys() -> None:
    spec, bundle = inputs()
    document = wrap_inputs(spec, bundle, event_id=None, verify_reasoning=True)
    assert document == {
        "schema_id": "cournot-ledger/evidence-envelope",
        "schema_version": 1,
        "prompt_spec": spec,
        "evidence_bundle": bundle,
        "options": {"verify_reasoning": True},
    }
    v1 = decode_envelope(encode(document))
    assert isinstance(v1.envelope, EnvelopeV1)
    # version and options are not inputs: the same inputs under v2 have the same key
    assert decode_envelope(encode(v2())).idempotency_key == v1.idempotency_key
    assert v1.idempotency_key == f"inputs:{v1.inputs_hash}"


def test_the_submission_records_v2_options_and_leaves_v1_payloads_as_they_were() -> None:
    v1_received = audit_envelope(decode_envelope(encode(wrap_inputs(*inputs())))).entries[0]
    assert v1_received.kind == "submission.received"
    assert v1_received.payload["envelope_options"] == {"verify_reasoning": False}
    assert v1_received.payload["envelope"]["schema_version"] == 1
    received = audit_envelope(decode_envelope(encode(v2(verify_reasoning=True)))).entries[0]
    assert received.payload["envelope_options"] == {
        "verify_reasoning": True,
        "reasoning_query": QUERY,
        "reasoning_expression": EXPRESSION,
    }
    assert received.payload["envelope"]["schema_version"] == 2
    only_query = audit_envelope(decode_envelope(encode(wrap_inputs(*inputs(), reasoning_query=QUERY))))
    assert only_query.entries[0].payload["envelope_options"] == {
        "verify_reasoning": False,
        "reasoning_query": QUERY,
    }


def test_the_publisher_wraps_bare_inputs_with_reasoning_options_as_v2() -> None:
    spec, bundle = inputs()
    bare = {"prompt_spec": spec, "evidence_bundle": bundle, "options": {"reasoning_query": QUERY}}
    prepared = prepare_document(bare)
    assert json.loads(prepared.value)["schema_version"] == 2
    assert prepared.headers[0] == ("content-type", b"application/vnd.cournot-ledger.envelope+json; version=2")
    plain = prepare_document({"prompt_spec": spec, "evidence_bundle": bundle})
    assert json.loads(plain.value)["schema_version"] == 1 and plain.headers[0] == CONTENT_TYPE_HEADER
