"""Selection policies: single_best, multi_source_quorum, fallback_chain, and every tie-breaker."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engine.auditor.reasoning.claim_extraction import Claim
from engine.auditor.reasoning.selection import Candidate, select
from engine.schemas import DataRequirement, SelectionPolicy


def candidate(index: int, source: str, tier: int, value: Any, at: str | None = None) -> Candidate:
    claim = Claim(
        f"cl_{index:012d}",
        "numeric",
        "price_usd",
        "extracted_fields.price_usd",
        value,
        f"ev_{index}",
        "r",
        0.8,
        0,
    )
    observed = datetime.fromisoformat(at).replace(tzinfo=UTC) if at else None
    return Candidate(
        index=index, evidence_id=f"ev_{index}", source_id=source, tier=tier, claim=claim, observed_at=observed
    )


def requirement(*sources: str, preferred: tuple[str, ...] = ()) -> DataRequirement:
    return DataRequirement(
        requirement_id="r",
        description="d",
        source_targets=[{"source_id": s, "uri": f"https://{s}.example/api"} for s in sources],
        selection_policy={"strategy": "single_best"},
        preferred_sources=list(preferred),
    )


def above(c: Candidate) -> bool:
    return bool(c.claim.value > 100)


def run(policy: dict[str, Any], candidates: list[Candidate], req: DataRequirement | None = None) -> Any:
    return select("r", SelectionPolicy(**policy), req, candidates, above)


def test_single_best_highest_provenance_then_bundle_order() -> None:
    cands = [candidate(0, "a", 1, 101), candidate(1, "b", 3, 102), candidate(2, "c", 3, 103)]
    result = run({"strategy": "single_best"}, cands)
    assert result.ok and result.representative.evidence_id == "ev_1"
    assert [c.evidence_id for c in result.ordered] == ["ev_1", "ev_2", "ev_0"]
    assert not result.disagreement


def test_single_best_source_priority_follows_source_targets_then_preferred_sources() -> None:
    cands = [candidate(0, "kraken", 3, 101), candidate(1, "coinbase", 1, 102), candidate(2, "extra", 4, 103)]
    req = requirement("coinbase", "kraken", preferred=("extra",))
    result = run({"strategy": "single_best", "tie_breaker": "source_priority"}, cands, req)
    assert [c.source_id for c in result.ordered] == ["coinbase", "kraken", "extra"]


def test_single_best_most_recent_puts_untimed_items_last() -> None:
    cands = [
        candidate(0, "a", 4, 101),
        candidate(1, "b", 1, 102, "2026-02-01T00:00:01"),
        candidate(2, "c", 2, 103, "2026-02-01T00:00:09"),
    ]
    result = run({"strategy": "single_best", "tie_breaker": "most_recent"}, cands)
    assert [c.evidence_id for c in result.ordered] == ["ev_2", "ev_1", "ev_0"]


def test_disagreement_is_reported_even_when_one_source_is_selected() -> None:
    result = run({"strategy": "single_best"}, [candidate(0, "a", 2, 101), candidate(1, "b", 2, 99)])
    assert result.ok and result.disagreement
    assert [key for key, _ in result.groups] == [True, False]


def test_min_sources_counts_distinct_sources() -> None:
    cands = [candidate(0, "a", 2, 101), candidate(1, "a", 2, 102)]
    result = run({"strategy": "single_best", "min_sources": 2}, cands)
    assert (result.ok, result.failure) == (False, "min_sources")


def test_no_candidates_fails() -> None:
    assert run({"strategy": "fallback_chain"}, []).failure == "no_candidates"


def test_quorum_met_by_distinct_agreeing_sources() -> None:
    cands = [candidate(0, "a", 2, 101), candidate(1, "b", 2, 102), candidate(2, "c", 2, 99)]
    result = run({"strategy": "multi_source_quorum", "quorum": 2, "min_sources": 2}, cands)
    assert result.ok and result.selected_ids() == ["ev_0", "ev_1"]
    assert result.disagreement  # c says otherwise


def test_quorum_not_met() -> None:
    cands = [candidate(0, "a", 2, 101), candidate(1, "b", 2, 99)]
    result = run({"strategy": "multi_source_quorum", "quorum": 2}, cands)
    assert (result.ok, result.failure) == (False, "quorum_not_met")


def test_quorum_ties_are_no_consensus() -> None:
    cands = [candidate(0, "a", 2, 101), candidate(1, "b", 2, 99)]
    result = run({"strategy": "multi_source_quorum", "quorum": 1}, cands)
    assert (result.ok, result.failure) == (False, "no_consensus")


def test_quorum_counts_each_source_once_and_respects_max_sources() -> None:
    cands = [
        candidate(0, "a", 3, 101),
        candidate(1, "a", 3, 102),
        candidate(2, "b", 1, 103),
        candidate(3, "c", 1, 104),
    ]
    result = run({"strategy": "multi_source_quorum", "quorum": 2, "max_sources": 2}, cands)
    assert result.ok and result.selected_ids() == ["ev_0", "ev_2"]  # a (once) and b; c is beyond max_sources
    only_a = run({"strategy": "multi_source_quorum", "quorum": 2, "max_sources": 3}, cands[:2])
    assert only_a.failure == "quorum_not_met"


@pytest.mark.parametrize(
    ("available", "expected", "fallback", "chain"),
    [
        (["coingecko", "binance", "kraken"], "coingecko", False, ["selected", "not_needed", "not_needed"]),
        (["binance", "kraken"], "binance", True, ["unavailable", "selected", "not_needed"]),
        (["kraken"], "kraken", True, ["unavailable", "unavailable", "selected"]),
        (["other"], "other", True, ["unavailable", "unavailable", "unavailable", "selected_outside_chain"]),
    ],
)
def test_fallback_chain_walks_source_targets_in_order(
    available: list[str], expected: str, fallback: bool, chain: list[str]
) -> None:
    cands = [candidate(i, source, 2, 101) for i, source in enumerate(available)]
    result = run({"strategy": "fallback_chain"}, cands, requirement("coingecko", "binance", "kraken"))
    assert result.representative.source_id == expected
    assert result.fallback_used is fallback
    assert [status for _, status in result.chain] == chain
    assert result.to_output()["chain"][0]["source_id"] == "coingecko"
