"""Module 06 §8: deterministic claim extraction (JSON fields, defaults, regex), stable order and ids."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest

from engine.auditor import AuditConfig, ClaimExtractor
from engine.auditor.reasoning.claim_extraction import make_claim_id
from engine.canonical import dumps_canonical
from engine.schemas import EvidenceBundle, PromptSpec
from tests.golden.regenerate import CORPUS_DIR


def corpus_doc(name: str) -> dict[str, Any]:
    return json.loads((CORPUS_DIR / f"{name}.json").read_text(encoding="utf-8"))


def extract(doc: dict[str, Any], config: AuditConfig | None = None) -> Any:
    spec = PromptSpec.model_validate(doc["prompt_spec"])
    bundle = EvidenceBundle.model_validate(doc["evidence_bundle"])
    return ClaimExtractor(config).extract(spec, bundle)


def reverse_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: reverse_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reverse_keys(item) for item in value]
    return value


def test_claim_id_is_cl_plus_first_12_hex_of_sha256_of_id_path_canonical_value() -> None:
    preimage = "ev_02f2913c0c014953|parsed_value.bitcoin.usd|" + dumps_canonical(104250.12)
    expected = "cl_" + hashlib.sha256(preimage.encode()).hexdigest()[:12]
    assert make_claim_id("ev_02f2913c0c014953", "parsed_value.bitcoin.usd", 104250.12) == expected
    # fast paths agree with dumps_canonical for every scalar kind, including escapes and non-ASCII
    for value in (True, False, 0, -7, 10**30, 1e-05, 95000.0, 'é "q" \\ \n\u2028', "日経"):
        preimage = f"ev|p|{dumps_canonical(value)}"
        assert make_claim_id("ev", "p", value) == "cl_" + hashlib.sha256(preimage.encode()).hexdigest()[:12]


def test_claim_id_is_stable_known_vector() -> None:
    assert make_claim_id("ev_1", "extracted_fields.price_usd", 100000) == make_claim_id(
        "ev_1", "extracted_fields.price_usd", 100000
    )
    assert make_claim_id("ev_1", "x", 1) != make_claim_id(
        "ev_1", "x", 1.0
    )  # int and float differ canonically
    assert make_claim_id("ev_1", "x", 1) != make_claim_id("ev_2", "x", 1)


def test_json_extraction_reads_expected_fields_from_extracted_fields_first() -> None:
    claims = extract(corpus_doc("01_clean_threshold"))
    [item] = claims.items
    assert item.method == "json_fields"
    value = item.value_claim()
    assert value is not None
    assert (value.key, value.kind, value.path, value.value) == (
        "price_usd",
        "numeric",
        "extracted_fields.price_usd",
        104250.12,
    )
    assert value.confidence == 0.8  # tier 2
    # the payload's epoch-seconds last_updated_at is found as the observation time
    assert item.observed_at is not None and item.observed_from is not None
    assert item.observed_from.startswith("claim:")


def test_aliases_and_string_numbers_from_parsed_value() -> None:
    doc = corpus_doc("02_two_sources_agree")
    for item in doc["evidence_bundle"]["items"]:
        item["extracted_fields"] = {}
    claims = extract(doc)
    coingecko, binance = claims.items
    assert coingecko.value_claim().path == "parsed_value.bitcoin.usd"  # type: ignore[union-attr]
    assert binance.value_claim().path == "parsed_value.price"  # type: ignore[union-attr]
    assert binance.value_claim().value == 104198.5  # type: ignore[union-attr]  # "104198.50000000"


def test_default_fields_when_no_expected_fields_are_declared() -> None:
    claims = extract(corpus_doc("37_default_fields"))
    [item] = claims.items
    assert item.method == "json_default_fields"
    assert [(c.key, c.path, c.kind) for c in item.claims] == [
        ("last_updated_at", "parsed_value.bitcoin.last_updated_at", "timestamp"),
        ("usd", "parsed_value.bitcoin.usd", "numeric"),
    ]
    assert item.value_key == "usd"


def test_extraction_is_deterministic_and_claims_are_sorted_by_path() -> None:
    doc = corpus_doc("27_large_floats")
    first, second = extract(doc), extract(copy.deepcopy(doc))
    assert first == second
    paths = [claim.path for claim in first.claims]
    assert paths == sorted(paths)


@pytest.mark.parametrize(
    "name", ["02_two_sources_agree", "09_exceeds_million_suffix", "27_large_floats", "37_default_fields"]
)
def test_claim_order_and_ids_do_not_depend_on_payload_key_order(name: str) -> None:
    doc = corpus_doc(name)
    shuffled = copy.deepcopy(doc)
    for item in shuffled["evidence_bundle"]["items"]:
        for field in ("parsed_value", "extracted_fields"):
            if field in item:
                item[field] = reverse_keys(item[field])
    assert extract(doc) == extract(shuffled)


def test_regex_extraction_from_html_with_declared_kinds() -> None:
    claims = extract(corpus_doc("16_html_regex"))
    [item] = claims.items
    assert item.method == "regex"
    by_key = {claim.key: claim for claim in item.claims}
    assert by_key["price_usd"].value == 104250.12 and by_key["price_usd"].path == "regex:price_usd"
    assert by_key["updated_at"].kind == "timestamp" and by_key["updated_at"].value == "2026-01-31T23:59:50Z"
    assert by_key["price_usd"].confidence == 0.6  # regex claims rank below JSON claims of the same tier


def test_regex_patterns_from_prompt_extra_apply_in_name_order() -> None:
    claims = extract(corpus_doc("17_text_regex_boolean"))
    [item] = claims.items
    assert [(c.key, c.kind, c.value) for c in item.claims] == [
        ("passed", "boolean", True),
        ("votes_for", "numeric", 61204333),
    ]
    assert item.value_key == "passed"


def test_unsafe_and_invalid_patterns_are_refused_and_reported() -> None:
    doc = corpus_doc("16_html_regex")
    patterns = doc["prompt_spec"]["extra"]["requirement_extra"]["req_btc_spot"]["extraction_patterns"]
    patterns[0]["pattern"] = r"(\d+)+$"
    patterns.append({"name": "broken", "pattern": "([0-9"})
    claims = extract(doc)
    assert any("price_usd" in problem and "backtracking" in problem for problem in claims.problems)
    assert any("broken" in problem and "invalid regular expression" in problem for problem in claims.problems)
    assert [c.key for c in claims.items[0].claims] == ["updated_at"]


def test_text_beyond_the_cap_is_not_scanned() -> None:
    doc = corpus_doc("16_html_regex")
    doc["evidence_bundle"]["items"][0]["raw_content"] = (
        "x" * 100 + doc["evidence_bundle"]["items"][0]["raw_content"]
    )
    claims = extract(doc, AuditConfig(max_text_chars=50))
    assert "text_truncated" in claims.items[0].notes
    assert claims.items[0].claims == ()


def test_failed_fetches_yield_no_claims() -> None:
    claims = extract(corpus_doc("25_all_fetches_failed"))
    assert all(item.claims == () and item.notes == ("fetch_failed",) for item in claims.items)
    assert len(claims) == 0


def test_missing_fields_null_and_structured_values_are_noted_not_guessed() -> None:
    doc = corpus_doc("01_clean_threshold")
    doc["prompt_spec"]["data_requirements"][0]["expected_fields"] = ["price_usd", "volume", "nested", "gone"]
    doc["evidence_bundle"]["items"][0]["extracted_fields"] = {"price_usd": None, "nested": {"a": 1}}
    doc["evidence_bundle"]["items"][0]["parsed_value"] = {"volume": "n/a"}
    [item] = extract(doc).items
    assert "null_field:price_usd" in item.notes and "structured_field:nested" in item.notes
    assert "missing_field:gone" in item.notes
    assert [(c.key, c.kind) for c in item.claims] == [("volume", "text_assertion")]
    assert item.value_claim() is None  # value field price_usd is null: no guessing from other fields


def test_lone_surrogates_are_noted_instead_of_crashing() -> None:
    doc = corpus_doc("29_multi_choice")
    doc["evidence_bundle"]["items"][0]["extracted_fields"]["winner"] = "bad \ud800"
    item = extract(doc).items[0]
    assert "unencodable:winner" in item.notes


def test_claim_set_helpers() -> None:
    claims = extract(corpus_doc("02_two_sources_agree"))
    first_id = claims.items[0].evidence_id
    assert {c.evidence_id for c in claims.by_evidence_id(first_id)} == {first_id}
    assert all(c.kind == "numeric" for c in claims.by_kind("numeric"))
    assert len(list(claims)) == len(claims)
