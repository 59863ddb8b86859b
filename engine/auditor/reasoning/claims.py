"""The claims extraction produces: one value read from one evidence item, and an item's claims.

Plain :class:`~engine.auditor.record.Record` classes (native when compiled); made by
:mod:`engine.auditor.reasoning.claim_extraction`, which re-exports them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Final

from engine.auditor.reasoning.values import format_time
from engine.auditor.record import Record

__all__ = ["Claim", "ItemClaims"]


class Claim(Record):
    """One value read from one evidence item; ``key`` is its semantic key (field or pattern name).

    ``rank`` is the declaration order of the key (lower first); used to pick an item's value and time.
    """

    FIELDS: ClassVar[tuple[str, ...]] = (
        "claim_id",
        "kind",
        "key",
        "path",
        "value",
        "evidence_id",
        "requirement_id",
        "confidence",
        "rank",
    )
    __slots__ = FIELDS

    def __init__(
        self,
        claim_id: str,
        kind: str,
        key: str,
        path: str,
        value: Any,
        evidence_id: str,
        requirement_id: str,
        confidence: float,
        rank: int,
    ) -> None:
        self.claim_id: Final = claim_id
        self.kind: Final = kind
        self.key: Final = key
        self.path: Final = path
        self.value: Final = value
        self.evidence_id: Final = evidence_id
        self.requirement_id: Final = requirement_id
        self.confidence: Final = confidence
        self.rank: Final = rank

    def to_output(self) -> dict[str, Any]:
        """The claim as committed inside an extract step."""
        return {
            "claim_id": self.claim_id,
            "confidence": self.confidence,
            "key": self.key,
            "kind": self.kind,
            "path": self.path,
            "value": self.value,
        }


class ItemClaims(Record):
    """What extraction found in one evidence item (bundle position ``index``)."""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "index",
        "evidence_id",
        "requirement_id",
        "method",
        "claims",
        "value_key",
        "observed_at",
        "observed_from",
        "notes",
    )
    __slots__ = FIELDS

    def __init__(
        self,
        index: int,
        evidence_id: str,
        requirement_id: str,
        method: str,
        claims: tuple[Claim, ...],
        value_key: str | None,
        observed_at: datetime | None,
        observed_from: str | None,
        notes: tuple[str, ...],
    ) -> None:
        self.index: Final = index
        self.evidence_id: Final = evidence_id
        self.requirement_id: Final = requirement_id
        self.method: Final = method
        self.claims: Final = claims
        self.value_key: Final = value_key
        self.observed_at: Final = observed_at
        self.observed_from: Final = observed_from
        self.notes: Final = notes

    def value_claim(self) -> Claim | None:
        """The claim that carries the item's value for the event, if any."""
        for claim in self.claims:
            if claim.key == self.value_key and claim.kind != "timestamp":
                return claim
        return None

    def to_output(self) -> dict[str, Any]:
        """The item's extraction as committed inside an extract step."""
        return {
            "claims": [claim.to_output() for claim in self.claims],
            "evidence_id": self.evidence_id,
            "method": self.method,
            "notes": list(self.notes),
            "observed_at": format_time(self.observed_at) if self.observed_at else None,
            "observed_at_source": self.observed_from,
            "value_claim_id": claim.claim_id if (claim := self.value_claim()) else None,
        }
