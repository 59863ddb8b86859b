"""Reasoning helpers of the Auditor: claims, semantics, selection and contradictions."""

from engine.auditor.reasoning.claim_extraction import (
    Claim,
    ClaimExtractor,
    ClaimSet,
    ItemClaims,
    make_claim_id,
)
from engine.auditor.reasoning.contradiction_checks import ContradictionChecker
from engine.auditor.reasoning.selection import Candidate, Selection, select
from engine.auditor.reasoning.semantics import (
    EventSpec,
    Quantity,
    derive_event_spec,
    find_comparators,
    parse_quantity,
)

__all__ = [
    "Candidate",
    "Claim",
    "ClaimExtractor",
    "ClaimSet",
    "ContradictionChecker",
    "EventSpec",
    "ItemClaims",
    "Quantity",
    "Selection",
    "derive_event_spec",
    "find_comparators",
    "make_claim_id",
    "parse_quantity",
    "select",
]
