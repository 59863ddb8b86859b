"""The auditor's result records (``engine.auditor.record.Record``) keep the frozen dataclasses' semantics.

Equality and hash over the fields in declaration order, only against the same class, and a
``Name(field=value, ...)`` repr; they hold pure and compiled alike.
"""

from __future__ import annotations

from datetime import UTC, datetime

from engine.auditor.reasoning.claim_extraction import Claim, ItemClaims
from engine.auditor.reasoning.selection import Candidate
from engine.auditor.verification.logic_sanity import ItemAssessment


def _claim(value: object = 1, rank: int = 0) -> Claim:
    return Claim("cl_1", "numeric", "price", "price", value, "ev_1", "req_1", 0.9, rank)


def test_equal_fields_make_equal_records_with_equal_hashes() -> None:
    assert _claim() == _claim()
    assert (_claim() != _claim()) is False
    assert hash(_claim()) == hash(_claim())
    assert len({_claim(), _claim()}) == 1


def test_any_differing_field_makes_records_unequal() -> None:
    assert _claim(rank=0) != _claim(rank=1)
    assert _claim(value=1) != _claim(value=2)
    assert (_claim(rank=0) == _claim(rank=1)) is False


def test_a_record_never_equals_another_class_or_a_tuple() -> None:
    claim = _claim()
    assert claim != claim.field_values()
    assert claim != object()
    assessment = ItemAssessment(0, "ev_1", "req_1", "src", 1, True, None, "in_window")
    assert assessment != ItemAssessment(0, "ev_1", "req_1", "src", 1, False, "no_value", "in_window")
    assert assessment != claim


def test_repr_names_every_field_in_declaration_order() -> None:
    assert repr(_claim()) == (
        "Claim(claim_id='cl_1', kind='numeric', key='price', path='price', value=1, "
        "evidence_id='ev_1', requirement_id='req_1', confidence=0.9, rank=0)"
    )


def test_nested_records_compare_by_value() -> None:
    moment = datetime(2026, 1, 1, tzinfo=UTC)

    def item() -> ItemClaims:
        return ItemClaims(0, "ev_1", "req_1", "json", (_claim(),), "price", moment, "ts", ("n",))

    assert item() == item() and hash(item()) == hash(item())
    assert item().value_claim() == _claim()
    candidate = Candidate(
        index=0, evidence_id="ev_1", source_id="src", tier=1, claim=_claim(), observed_at=moment
    )
    assert candidate == Candidate(0, "ev_1", "src", 1, _claim(), moment)
    assert candidate.field_values() == (0, "ev_1", "src", 1, _claim(), moment)
